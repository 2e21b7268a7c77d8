import type { SseWriter } from './sse-writer.js';

/**
 * Heartbeat comments for every open SSE response from one timer, instead of an interval per
 * connection: every half interval, each stream that has written nothing during the last half
 * interval (and is not waiting for its client to read) gets `: heartbeat`, so no stream is
 * silent longer than the interval, and streams that are busy with events get none.
 */
export class SseHeartbeats {
  /** Half intervals since the start; writers note it at each write. */
  tick = 1;
  private readonly writers = new Set<SseWriter>();
  private timer: NodeJS.Timeout | null = null;

  constructor(private readonly intervalMs: number) {}

  add(writer: SseWriter): void {
    this.writers.add(writer);
    if (this.timer || this.intervalMs <= 0) return;
    this.timer = setInterval(() => this.beat(), this.intervalMs / 2);
    this.timer.unref();
  }

  delete(writer: SseWriter): void {
    this.writers.delete(writer);
    if (this.writers.size > 0 || !this.timer) return;
    clearInterval(this.timer);
    this.timer = null;
  }

  private beat(): void {
    for (const writer of this.writers) if (writer.lastTick < this.tick && !writer.blocked) writer.heartbeat();
    this.tick += 1;
  }
}
