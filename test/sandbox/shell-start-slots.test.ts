/**
 * Shell start-ups take turns (StartSlots): a burst of sandboxed shells started together each ran
 * out of its 10 s start-up time while they shared the machine (test/reliability-load: "could not
 * start bash" for 42 of 100 conversations; 68 of 100 with the bwrap sandbox's network). Here a
 * launcher that takes half a second to start each shell, and marks when two starts overlap.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { BashShellFactory } from '../../src/adapters/shell/bash-shell.js';
import { HostProcessLauncher, type PreparedProcess, type ProcessLauncher, type ProcessSpec } from '../../src/adapters/process/process-launcher.js';
import { StartSlots } from '../../src/adapters/shell/start-slots.js';
import type { ShellSession } from '../../src/core/tools/shell-session.js';

let dir: string;
beforeEach(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'agentd-start-slots-'));
});
afterEach(() => fs.rmSync(dir, { recursive: true, force: true }));

/** Starts each program half a second late; a start that finds another one under way writes to `overlaps`. */
class SlowStartLauncher implements ProcessLauncher {
  private readonly host = new HostProcessLauncher();
  readonly mode = this.host.mode;
  readonly limits = this.host.limits;
  readonly enforcement = this.host.enforcement;

  constructor(private readonly paths: { lock: string; overlaps: string }) {}

  prepare(spec: ProcessSpec): PreparedProcess {
    const script = 'mkdir -- "$1" 2>/dev/null || echo overlap >> "$2"; sleep 0.5; rmdir -- "$1" 2>/dev/null; shift 2; exec "$@"';
    return { ...this.host.prepare(spec), command: 'bash', args: ['-c', script, 'slow-start', this.paths.lock, this.paths.overlaps, spec.command, ...spec.args] };
  }
}

async function startShells(concurrentStarts: number, count: number): Promise<{ shells: ShellSession[]; overlaps: number }> {
  const paths = { lock: path.join(dir, `lock-${concurrentStarts}`), overlaps: path.join(dir, `overlaps-${concurrentStarts}`) };
  // Each start has 3 s from its slot; eight in turn take 4 s or more in all.
  const factory = new BashShellFactory({ launcher: new SlowStartLauncher(paths), concurrentStarts, startTimeoutMs: 3000 });
  const shells = await Promise.all(
    Array.from({ length: count }, (_, i) => {
      const workdir = path.join(dir, `w${concurrentStarts}-${i}`);
      fs.mkdirSync(workdir);
      return factory.create({ conversationId: `c${i}`, workdir, env: {} });
    }),
  );
  const overlaps = fs.existsSync(paths.overlaps) ? fs.readFileSync(paths.overlaps, 'utf8').split('\n').filter(Boolean).length : 0;
  return { shells, overlaps };
}

describe('shell start-up slots', () => {
  it('starts a burst of shells one at a time with one slot, each within its own start-up time, all of them working', async () => {
    const { shells, overlaps } = await startShells(1, 8);
    try {
      expect(overlaps).toBe(0);
      const answers = await Promise.all(shells.map((shell, i) => shell.run(`echo shell-${i}`, { timeoutMs: 10_000, idleTimeoutMs: 10_000 })));
      expect(answers.map((answer) => answer.output.trim())).toEqual(shells.map((_, i) => `shell-${i}`));
    } finally {
      await Promise.all(shells.map((shell) => shell.close()));
    }
  }, 30_000);

  it('control: with a slot for each, the same starts overlap (the probe sees overlapping starts)', async () => {
    const { shells, overlaps } = await startShells(8, 8);
    try {
      expect(overlaps).toBeGreaterThan(0);
    } finally {
      await Promise.all(shells.map((shell) => shell.close()));
    }
  }, 30_000);

  it('StartSlots: never more than its limit at once, waiters served in order, a failed piece of work frees its slot', async () => {
    const slots = new StartSlots(2);
    let running = 0;
    let most = 0;
    const order: number[] = [];
    const work = (i: number) =>
      slots.run(async () => {
        running++;
        most = Math.max(most, running);
        await new Promise((resolve) => setTimeout(resolve, 5));
        running--;
        order.push(i);
        if (i === 1) throw new Error('start failed');
        return i;
      });
    const results = await Promise.allSettled(Array.from({ length: 7 }, (_, i) => work(i)));
    expect(most).toBe(2);
    expect(order.slice(2)).toEqual([2, 3, 4, 5, 6]);
    expect(results.filter((result) => result.status === 'rejected')).toHaveLength(1);
    expect(slots.queued).toBe(0);
    expect(await slots.run(async () => 'again')).toBe('again');
    expect(() => new StartSlots(0)).toThrow(RangeError);
  });
});
