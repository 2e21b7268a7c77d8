/** Notices the agent repeating the same action with the same result, `threshold` times in a row. */
export class StuckDetector {
  private last: string | null = null;
  private count = 0;

  constructor(readonly threshold: number) {}

  repeated(action: string, observation: string): boolean {
    const key = `${action}\u0000${observation}`;
    this.count = key === this.last ? this.count + 1 : 1;
    this.last = key;
    return this.count >= this.threshold;
  }
}
