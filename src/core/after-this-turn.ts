/**
 * Work the server puts off until what the current turn of the event loop set going is on its way
 * (subscribers' writes, a run's start checkpoint, the start of a shell a run finds missing) runs
 * after the immediates queued in this turn, not among them: an immediate queued from an immediate
 * runs in the next turn's check phase. undici writes an HTTP request on a kept-alive connection from an
 * immediate of its own (it first lets the idle socket's pending bytes be read), so work put off
 * with a plain setImmediate queued before the request ran before it was written: the agent's LLM
 * requests waited for the SSE writes of the step's events and for the run's start checkpoint.
 */
export function afterThisTurn(callback: () => void): void {
  setImmediate(() => setImmediate(callback));
}

/** afterThisTurn as a promise. */
export function thisTurnDone(): Promise<void> {
  return new Promise((resolve) => afterThisTurn(resolve));
}
