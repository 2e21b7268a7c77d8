// WorkdirOwner gives a workdir to the agent's uid (a server running as root): an empty workdir
// with one call in this process, one with files through `chown -R -P -h`, which changes symlinks
// themselves and never what they point to. ensureAsync (a shell started ahead, before its first
// command) gives an empty workdir away without the thread pool: it was two calls there, waiting
// behind whatever else the pool did, on the path of a new conversation's first command.
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { WorkdirOwner } from '../../src/adapters/sandbox/workdir-owner.js';
import { tempDir } from '../support/agentd.js';

const asRoot = process.getuid?.() === 0;
if (!asRoot) console.warn('workdir-owner: skipped: giving files away needs root');

const AGENT = { uid: 1_777_000_123, gid: 1_777_000_123 };
const dirs: string[] = [];
afterEach(() => {
  for (const dir of dirs.splice(0)) fs.rmSync(dir, { recursive: true, force: true });
});

describe.skipIf(!asRoot)('WorkdirOwner', () => {
  it('gives an empty workdir away, once', () => {
    const workdir = tempDir();
    dirs.push(workdir);
    const owner = new WorkdirOwner();
    owner.ensure({ workdir, ...AGENT });
    expect([fs.statSync(workdir).uid, fs.statSync(workdir).gid]).toEqual([AGENT.uid, AGENT.gid]);
    // Known given away: taken back by hand, it is not given again by this owner.
    fs.chownSync(workdir, 0, 0);
    owner.ensure({ workdir, ...AGENT });
    expect(fs.statSync(workdir).uid).toBe(0);
  });

  it.each(['ensure', 'ensureAsync'] as const)('gives a workdir with files away (%s, through chown -R), a symlink itself but not what it points to', async (method) => {
    const workdir = tempDir();
    const outside = tempDir();
    dirs.push(workdir, outside);
    const decoy = path.join(outside, 'decoy');
    fs.writeFileSync(decoy, 'not the agent\'s');
    fs.mkdirSync(path.join(workdir, 'src'));
    fs.writeFileSync(path.join(workdir, 'src', 'a.txt'), 'a');
    fs.symlinkSync(decoy, path.join(workdir, 'link'));
    await new WorkdirOwner()[method]({ workdir, ...AGENT });
    for (const file of ['.', 'src', 'src/a.txt']) expect(fs.statSync(path.join(workdir, file)).uid, file).toBe(AGENT.uid);
    expect(fs.lstatSync(path.join(workdir, 'link')).uid).toBe(AGENT.uid);
    expect(fs.statSync(decoy).uid).toBe(0);
  });
});

describe.skipIf(!asRoot)('WorkdirOwner.ensureAsync', () => {
  it('gives an empty workdir away while every thread of the pool is busy', async () => {
    const workdir = tempDir();
    const fifos = tempDir();
    dirs.push(workdir, fifos);
    // Each thread of libuv's pool held by an open of a FIFO for reading (it waits for a writer).
    const threads = Number(process.env.UV_THREADPOOL_SIZE ?? 4);
    const paths = Array.from({ length: threads }, (_, i) => path.join(fifos, `fifo-${i}`));
    for (const fifo of paths) execFileSync('mkfifo', [fifo]);
    const held = paths.map((fifo) => fs.promises.open(fifo, 'r'));
    try {
      const outcome = await Promise.race([
        new WorkdirOwner().ensureAsync({ workdir, ...AGENT }).then(() => 'given'),
        new Promise((resolve) => setTimeout(() => resolve('waited for the pool'), 2_000)),
      ]);
      expect(outcome).toBe('given');
      expect([fs.statSync(workdir).uid, fs.statSync(workdir).gid]).toEqual([AGENT.uid, AGENT.gid]);
    } finally {
      // A writer (a read-write open never waits) lets each reader's open return, also one still
      // queued behind other work of the pool: the writers stay open until every reader is in.
      const writers = paths.map((fifo) => fs.openSync(fifo, 'r+'));
      try {
        for (const handle of await Promise.all(held)) await handle.close();
      } finally {
        for (const fd of writers) fs.closeSync(fd);
      }
    }
  });
});
