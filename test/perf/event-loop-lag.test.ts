/**
 * The event loop's delay (`agentd_process_nodejs_eventloop_lag_*_seconds`) is sampled only while
 * the server has work: Node's monitor, a timer every 10 ms, woke an idle server a hundred times a
 * second when prom-client's default metrics kept it on.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { EventLoopLag, LAG_IDLE_MS } from '../../src/adapters/metrics/event-loop-lag.js';
import { spawnServer } from '../support/agentd.js';
import { fetchWithKey } from '../support/json-api.js';

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'agentd-event-loop-lag-'));
afterAll(() => fs.rmSync(tmp, { recursive: true, force: true }));

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** How many times a process's main thread gave up the CPU of its own accord (slept, mostly in epoll_wait) so far. */
function wakeupsOf(pid: number): number {
  const status = fs.readFileSync(`/proc/${pid}/task/${pid}/status`, 'utf8');
  return Number(/^voluntary_ctxt_switches:\s+(\d+)$/m.exec(status)![1]);
}

/** The event-loop figures of a scrape, by figure (`min`, `p99`...). */
async function lagFigures(url: string): Promise<Record<string, number>> {
  const text = await (await fetchWithKey(url, '/metrics')).text();
  const figures: Record<string, number> = {};
  for (const [, figure, value] of text.matchAll(/^agentd_process_nodejs_eventloop_lag_(\w+)_seconds (\S+)$/gm)) figures[figure!] = Number(value);
  return figures;
}

describe('the event loop delay metrics', () => {
  it('leave an idle server asleep, and are measured while it serves', async () => {
    const server = await spawnServer({ dataDir: path.join(tmp, 'data') });
    try {
      const pid = server.child.pid!;
      // Serving: requests 50 ms apart for half a second, the loop's delay sampled meanwhile.
      await lagFigures(server.url);
      for (let i = 0; i < 10; i++) {
        await fetch(`${server.url}/alive`);
        await sleep(50);
      }
      const serving = await lagFigures(server.url);
      expect(Object.keys(serving).sort()).toEqual(['max', 'mean', 'min', 'p50', 'p90', 'p99', 'stddev']);
      // Node's figures are the time between its timer's firings: 10 ms and the delay.
      expect(serving.p50).toBeGreaterThanOrEqual(0.009);
      expect(serving.max).toBeGreaterThanOrEqual(serving.min!);

      // Idle: sampling stops within two idle periods of the last request; then the main thread
      // sleeps. Always on, it woke ~100 times a second.
      await sleep(2 * LAG_IDLE_MS + 300);
      const before = wakeupsOf(pid);
      await sleep(2_000);
      expect(wakeupsOf(pid) - before).toBeLessThan(10);
    } finally {
      server.child.kill('SIGTERM');
      await server.exited;
    }
  });

  it('record a stall of the loop while the server is busy, and stop sampling once it is idle', async () => {
    const lag = new EventLoopLag(100);
    try {
      expect(lag.isSampling).toBe(false);
      lag.busy();
      expect(lag.isSampling).toBe(true);
      await sleep(35);
      const stalled = performance.now();
      while (performance.now() - stalled < 80) {
        // the loop is blocked
      }
      await sleep(35);
      const figures = lag.read();
      expect(figures.max).toBeGreaterThanOrEqual(0.08);
      expect(figures.min).toBeGreaterThan(0);
      // Work keeps it sampling past an idle period; none, and it stops within two.
      await sleep(60);
      lag.busy();
      await sleep(60);
      expect(lag.isSampling).toBe(true);
      await sleep(250);
      expect(lag.isSampling).toBe(false);
      // What was sampled before it stopped is read once; then nothing was: zeros, not an empty histogram's extremes.
      expect(lag.read().max).toBeGreaterThan(0);
      expect(Object.values(lag.read())).toEqual([0, 0, 0, 0, 0, 0, 0]);
      lag.busy();
      expect(lag.isSampling).toBe(true);
    } finally {
      lag.stop();
    }
    expect(lag.isSampling).toBe(false);
  });
});
