/**
 * What the model is told as the run's step budget runs out: a warning at ~80 %, the summary
 * request on the last step. `ending`: how this run may end when the task is done: `finish`
 * (offered and accepted), `schema` (an answer matching the user's output_schema), or `answer`.
 */
export function iterationBudgetNote(iteration: number, limit: number, ending: 'finish' | 'schema' | 'answer' = 'finish'): { text: string; last: boolean } | null {
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
      text: `You have used ${iteration - 1} of the ${limit} steps this run may take. Bring the work to a safe point: finish the change in progress and verify it. ${DONE[ending]} otherwise you will be asked for a summary on the last step.`,
    };
  }
  return null;
}

const DONE = {
  finish: 'Call `finish` if the task is done;',
  schema: 'If the task is done, give the final answer in the form the user asked for (it must match their schema);',
  answer: 'If the task is done, reply with your final answer (a reply without tool calls);',
} as const;
