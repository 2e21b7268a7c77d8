import fs from 'node:fs';
import path from 'node:path';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { BashShellFactory } from '../../src/adapters/shell/bash-shell.js';
import { HostWorkdirs } from '../../src/adapters/files/host-workdirs.js';
import { WarmShells } from '../../src/core/agent/warm-shells.js';
import type { ShellCreateOptions, ShellFactory, ShellSession } from '../../src/core/tools/shell-session.js';
import { tempDir } from '../support/agentd.js';

/**
 * When the next conversations' shells start (core/agent/warm-shells.ts): real bash shells, each
 * one's start held by the test until it lets it finish, and the refill's delay on a fake clock
 * (only setTimeout is faked: the event loop's turns run as they do).
 */
const REFILL_DELAY_MS = 100;

/** Real shells whose starts finish when the test says so, in the order they were asked for. */
class HeldShells implements ShellFactory {
  readonly asked: { workdir: string; finish: () => void }[] = [];
  /** How many of the starts have finished (their shells given to the pool). */
  finished = 0;
  private readonly real = new BashShellFactory();

  create(options: ShellCreateOptions): Promise<ShellSession> {
    const started = this.real.create(options);
    return new Promise((resolve, reject) => {
      const given = (shell: ShellSession) => {
        this.finished += 1;
        resolve(shell);
      };
      this.asked.push({ workdir: options.workdir, finish: () => void started.then(given, reject) });
    });
  }
}

/** Lets the event loop go round (immediates, I/O, promises), with no timer run. */
async function turns(count = 30): Promise<void> {
  for (let i = 0; i < count; i++) await new Promise((resolve) => setImmediate(resolve));
}

/**
 * Lets the event loop go round until `done` holds (a shell's start takes a few dozen turns of its
 * own), for up to 10 s of real time: a bound in turns alone ran out on a fast machine (5,000 idle
 * turns in ~80 ms) while a real bash start under the suite's load took longer.
 */
async function turnsUntil(done: () => boolean, what: string): Promise<void> {
  const deadline = performance.now() + 10_000;
  while (!done() && performance.now() < deadline) await new Promise((resolve) => setImmediate(resolve));
  if (!done()) throw new Error(`not seen: ${what}`);
}

let cleanup: (() => Promise<void>) | undefined;
afterEach(async () => {
  vi.useRealTimers();
  await cleanup?.();
  cleanup = undefined;
});

function warmShells(count: number): { warm: WarmShells; held: HeldShells } {
  const dir = tempDir();
  const workdirBase = path.join(dir, 'workspaces');
  const held = new HeldShells();
  const warm = new WarmShells({ shells: held, workdirs: new HostWorkdirs({ dataDir: path.join(dir, 'data'), workdirBase }), workdirBase, network: false, count, idleTimeoutMs: 600_000 });
  fs.mkdirSync(path.join(dir, 'data'));
  cleanup = async () => {
    vi.useRealTimers();
    // Any start still held finishes, so that close() finds every shell to close.
    for (const { finish } of held.asked) finish();
    await warm.close();
    fs.rmSync(dir, { recursive: true, force: true });
  };
  vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
  return { warm, held };
}

/** The `index`th start is let finish; resolves once the pool has its shell (real bash, its first sentinel answered). */
async function finishStart(held: HeldShells, index: number): Promise<void> {
  held.asked[index]!.finish();
  await turnsUntil(() => held.finished === index + 1, `start ${index} to finish`);
  await turns(3);
}

describe('the warm shells refill', () => {
  it('one start at a time, each as soon as the one before has started, until the count is ready', async () => {
    const { warm, held } = warmShells(3);
    // The first creation finds none: it starts its own, and the pool's first start waits the delay.
    expect(warm.take()).toBeNull();
    await turns();
    expect(held.asked).toHaveLength(0);
    vi.advanceTimersByTime(REFILL_DELAY_MS);
    await turnsUntil(() => held.asked.length === 1, 'the first start');
    // While it is starting, no other starts, however long it takes.
    vi.advanceTimersByTime(10 * REFILL_DELAY_MS);
    await turns();
    expect(held.asked).toHaveLength(1);
    // Started: the next starts at once (no timer), and so on until three are ready.
    await finishStart(held, 0);
    await turnsUntil(() => held.asked.length === 2, 'the second start');
    await finishStart(held, 1);
    await turnsUntil(() => held.asked.length === 3, 'the third start');
    await finishStart(held, 2);
    vi.advanceTimersByTime(10 * REFILL_DELAY_MS);
    await turns();
    expect(held.asked).toHaveLength(3);
    // Each is taken oldest first, with its workdir.
    expect(warm.take()?.workdir).toBe(held.asked[0]!.workdir);
  }, 30_000);

  it('a take that leaves one ready starts the next after the delay; a take that leaves none, at once', async () => {
    const { warm, held } = warmShells(2);
    warm.take();
    vi.advanceTimersByTime(REFILL_DELAY_MS);
    await turnsUntil(() => held.asked.length === 1, 'the first start');
    await finishStart(held, 0);
    await turnsUntil(() => held.asked.length === 2, 'the second start');
    await finishStart(held, 1);

    // One left ready: the next start is off the path of the conversation that took one.
    expect(warm.take()?.workdir).toBe(held.asked[0]!.workdir);
    await turns();
    vi.advanceTimersByTime(REFILL_DELAY_MS - 1);
    await turns();
    expect(held.asked).toHaveLength(2);
    vi.advanceTimersByTime(1);
    await turnsUntil(() => held.asked.length === 3, 'the start after the delay');
    await finishStart(held, 2);

    // Both taken, one right after the other: the second take leaves none, so the next starts now,
    // without the delay (a conversation created a moment later finds one starting, not none).
    expect(warm.take()?.workdir).toBe(held.asked[1]!.workdir);
    expect(warm.take()?.workdir).toBe(held.asked[2]!.workdir);
    await turnsUntil(() => held.asked.length === 4, 'the start at once');
    // And it brings the one after it once started, with the delay's timer (set by the first take) not run.
    await finishStart(held, 3);
    await turnsUntil(() => held.asked.length === 5, 'the next start');
  }, 30_000);

  it('primed by a server warming up, the pool fills before any creation, and the first creation takes one', async () => {
    const { warm, held } = warmShells(2);
    await turns();
    // Nothing starts before a creation unless the server asks for it.
    expect(held.asked).toHaveLength(0);
    warm.prime();
    // At once (no timer run), then one after the other until the count is ready.
    await turnsUntil(() => held.asked.length === 1, 'the first start');
    await finishStart(held, 0);
    await turnsUntil(() => held.asked.length === 2, 'the second start');
    await finishStart(held, 1);
    vi.advanceTimersByTime(10 * REFILL_DELAY_MS);
    await turns();
    expect(held.asked).toHaveLength(2);
    expect(warm.take()?.workdir).toBe(held.asked[0]!.workdir);
  }, 30_000);
});
