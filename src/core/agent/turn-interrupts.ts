/**
 * The switch a message sent with multitask_strategy `interrupt` throws: it aborts the signal of
 * the step in progress (the LLM request being streamed, the tool call running), never the run's.
 * The run loop takes the interrupt at its next step and records it; later steps get a fresh signal.
 */
export class TurnInterrupts {
  static readonly REASON = 'interrupt';
  private controller = new AbortController();
  private messageSeq: number | null = null;

  /** A message (its seq) asks the run to stop what it is doing and take it. */
  trigger(messageSeq: number): void {
    this.messageSeq ??= messageSeq;
    this.controller.abort(new Error(TurnInterrupts.REASON));
  }

  /** The seq of the message that interrupted the run and was not taken yet, else null. */
  get pending(): number | null {
    return this.messageSeq;
  }

  /** The signal of the next step: aborted when the run stops or an interrupt arrives. */
  signal(run: AbortSignal): AbortSignal {
    return AbortSignal.any([run, this.controller.signal]);
  }

  /** The interrupt is handled: its message seq, and a fresh signal for the steps after it. */
  take(): number | null {
    const seq = this.messageSeq;
    if (seq !== null) {
      this.messageSeq = null;
      this.controller = new AbortController();
    }
    return seq;
  }
}
