/** What the model is told as the run's step budget runs out: a warning at ~80 %, the summary request on the last step. */
export function iterationBudgetNote(iteration: number, limit: number): { text: string; last: boolean } | null {
  if (limit > 1 && iteration === limit) {
    return {
      last: true,
      text:
        `This is the last step of this run: it may take at most ${limit} steps (max_iterations_per_run). Do not call any tool now. ` +
        'Reply with a short summary for the user: what is done, what is left to do, and the next step you would take. The user can continue the run afterwards.',
    };
  }
  const warnAt = Math.ceil(limit * 0.8);
  if (limit >= 5 && iteration === warnAt && warnAt < limit) {
    return {
      last: false,
      text: `You have used ${iteration - 1} of the ${limit} steps this run may take. Bring the work to a safe point: finish the change in progress and verify it. Call \`finish\` if the task is done; otherwise you will be asked for a summary on the last step.`,
    };
  }
  return null;
}
