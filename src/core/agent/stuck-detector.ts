/** One executed tool call (or one reply's calls together) as the detector sees it. */
export interface StuckStep {
  /** Tool name and arguments, as one comparable string. */
  action: string;
  observation: string;
  isError: boolean;
  /** A poll (`is_input`) of a command that is still running: waiting, not looping; never counted. */
  livePoll?: boolean;
}

export type StuckVerdict = { kind: 'ok' } | { kind: 'nudge'; message: string } | { kind: 'stop'; reason: string };

/** How many steps after a nudge a new loop still counts as the same one (and stops the run). */
const NUDGE_MEMORY = 12;

/**
 * Notices the agent going round in circles: the same action with the same result, the same
 * action failing again and again, two actions alternating, or every action giving the same
 * result. The first time, the model is told what it is doing (a nudge) and the pattern starts
 * over; if a loop forms again soon after, the run stops as `stuck`.
 */
export class StuckDetector {
  private steps: StuckStep[] = [];
  private count = 0;
  private nudgedAt: number | null = null;

  constructor(private readonly repeatThreshold = 4) {}

  /** One reply's calls as one step: the same reply (all its calls and results) is what repeats in a loop. */
  observeTurn(steps: readonly StuckStep[]): StuckVerdict {
    if (steps.length === 0) return { kind: 'ok' };
    if (steps.length === 1) return this.observe(steps[0]!);
    const counted = steps.filter((step) => !step.livePoll);
    if (counted.length === 0) return { kind: 'ok' };
    return this.observe({
      action: JSON.stringify(counted.map((step) => step.action)),
      observation: counted.map((step) => step.observation).join('\n\u0000'),
      isError: counted.every((step) => step.isError),
    });
  }

  observe(step: StuckStep): StuckVerdict {
    if (step.livePoll) return { kind: 'ok' };
    this.count += 1;
    this.steps.push(step);
    if (this.steps.length > 8) this.steps.shift();
    const pattern = this.pattern();
    if (!pattern) return { kind: 'ok' };
    this.steps = [];
    if (this.nudgedAt !== null && this.count - this.nudgedAt <= NUDGE_MEMORY) {
      // The patterns are written to the model ("You have…"); the reason speaks of it.
      return { kind: 'stop', reason: `The agent ${pattern.replace(/^have /, 'has ')}, and went on after being told so.` };
    }
    this.nudgedAt = this.count;
    return {
      kind: 'nudge',
      message:
        `You ${pattern}. Doing it again will not give a different result. Stop and think about why it is not working: ` +
        're-read the error and the relevant code, try a genuinely different approach, or, if you are blocked, explain the problem to the user in a reply without tool calls. ' +
        'If this loop goes on, the run will be stopped.',
    };
  }

  private pattern(): string | null {
    const steps = this.steps;
    const last = (n: number) => (steps.length >= n ? steps.slice(-n) : null);
    const key = (step: StuckStep) => `${step.action}\u0000${step.observation}`;

    const repeat = last(this.repeatThreshold);
    if (repeat && repeat.every((step) => key(step) === key(repeat[0]!))) {
      return `have made the same call with the same result ${this.repeatThreshold} times in a row`;
    }
    const failing = last(3);
    if (failing && failing.every((step) => step.isError && step.action === failing[0]!.action)) {
      return 'have made the same call 3 times in a row and it failed each time';
    }
    const errors = last(5);
    if (errors && errors.every((step) => step.isError && step.observation === errors[0]!.observation)) {
      return 'have received the same error 5 times in a row';
    }
    const alternating = last(6);
    if (alternating && key(alternating[0]!) !== key(alternating[1]!) && alternating.every((step, index) => key(step) === key(alternating[index % 2]!))) {
      return 'have been alternating between the same two calls with the same two results';
    }
    const same = last(8);
    if (same && !['', '(no output)'].includes(same[0]!.observation.trim()) && same.every((step) => step.observation === same[0]!.observation)) {
      return 'have received exactly the same result 8 times in a row from different calls';
    }
    return null;
  }
}
