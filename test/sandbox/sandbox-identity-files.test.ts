import fs from 'node:fs';
import path from 'node:path';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { BwrapProcessLauncher } from '../../src/adapters/sandbox/bwrap-launcher.js';
import { NO_LIMITS } from '../../src/adapters/sandbox/resource-limits.js';
import { SANDBOX_USER, SandboxIdentityFiles, sandboxUid } from '../../src/adapters/sandbox/identity.js';
import { tempDir } from '../support/agentd.js';

/**
 * The sandbox user's passwd and group files (adapters/sandbox/identity.ts) are written through the
 * thread pool before a sandbox starts, so that the start's own (synchronous) preparation finds them
 * written and creates no file on the event loop. Files only in the test's temp directory.
 */
let dir: string;
afterEach(() => {
  vi.restoreAllMocks();
  fs.rmSync(dir, { recursive: true, force: true });
});

/** Counts the synchronous file writes made while `work` runs. */
function syncWrites<T>(work: () => T): { result: T; writes: number } {
  const write = vi.spyOn(fs, 'writeFileSync');
  const rename = vi.spyOn(fs, 'renameSync');
  try {
    const result = work();
    return { result, writes: write.mock.calls.length + rename.mock.calls.length };
  } finally {
    write.mockRestore();
    rename.mockRestore();
  }
}

describe('the sandbox identity files', () => {
  it('prepare writes them off the event loop; forWorkdir then writes nothing', async () => {
    dir = tempDir();
    const files = new SandboxIdentityFiles(path.join(dir, 'state'));
    const workdir = path.join(dir, 'work', 'conversation-a');
    await files.prepare(workdir);
    const { result: identity, writes } = syncWrites(() => files.forWorkdir(workdir));
    expect(writes).toBe(0);
    const uid = sandboxUid(workdir);
    expect(identity.uid).toBe(uid);
    expect(fs.readFileSync(identity.files.passwd, 'utf8')).toContain(`${SANDBOX_USER}:x:${uid}:${uid}:agentd sandbox:${workdir}:/bin/bash\n`);
    expect(fs.readFileSync(identity.files.group, 'utf8')).toContain(`${SANDBOX_USER}:x:${uid}:\n`);
    expect(files.held).toBe(2);
    // No temporary file is left beside them.
    expect(fs.readdirSync(path.join(dir, 'state')).filter((name) => name.endsWith('.tmp'))).toEqual([]);
  });

  it('without prepare, forWorkdir writes them itself (the path a start no longer takes)', () => {
    dir = tempDir();
    const files = new SandboxIdentityFiles(path.join(dir, 'state'));
    const { writes } = syncWrites(() => files.forWorkdir(path.join(dir, 'work', 'conversation-b')));
    expect(writes).toBe(4);
  });

  it('two starts of one workdir at once write the same files; a forget that overtakes a write leaves none', async () => {
    dir = tempDir();
    const state = path.join(dir, 'state');
    const files = new SandboxIdentityFiles(state);
    const workdir = path.join(dir, 'work', 'conversation-c');
    await Promise.all([files.prepare(workdir), files.prepare(workdir)]);
    const uid = sandboxUid(workdir);
    expect(fs.readdirSync(state).sort()).toEqual(['gitconfig', `group-${uid}`, `passwd-${uid}`]);

    const other = path.join(dir, 'work', 'conversation-d');
    const otherUid = sandboxUid(other);
    const writing = files.prepare(other);
    files.forget(other);
    await writing;
    expect(fs.readdirSync(state).filter((name) => name.endsWith(`-${otherUid}`) || name.includes(`-${otherUid}.`))).toEqual([]);
    expect(files.held).toBe(2);

    // Deleted while its files are being written, then a new conversation in the same workdir at
    // once: the new start's files are there (the undoing of the first write came before them).
    const again = files.prepare(other);
    files.forget(other);
    const renewed = files.prepare(other);
    await Promise.all([again, renewed]);
    const identity = files.forWorkdir(other);
    expect(fs.readFileSync(identity.files.passwd, 'utf8')).toContain(`${SANDBOX_USER}:x:${otherUid}:`);
    expect(fs.readFileSync(identity.files.group, 'utf8')).toContain(`${SANDBOX_USER}:x:${otherUid}:`);
    expect(files.held).toBe(4);
    // Nothing is kept about writes once they are done (a server's life of deleted conversations).
    expect((files as unknown as { writing: Map<string, unknown> }).writing.size).toBe(0);
  });

  it("a root server's sandbox start writes them in beforeStart, before the launch is prepared", async () => {
    dir = tempDir();
    const workdir = path.join(dir, 'work', 'conversation-e');
    fs.mkdirSync(workdir, { recursive: true });
    const launcher = new BwrapProcessLauncher({ bwrapPath: '/usr/bin/bwrap', limits: NO_LIMITS, hiddenPaths: [], stateDir: path.join(dir, 'state'), searchPath: process.env.PATH ?? '/usr/bin:/bin', runningAsRoot: true, cgroups: null, networkHelper: null });
    expect(launcher.held.identityFiles).toBe(0);
    await launcher.beforeStart({ workdir, network: false });
    expect(launcher.held.identityFiles).toBe(2);
    const { writes } = syncWrites(() => launcher.prepare({ command: 'bash', args: [], cwd: workdir, env: {}, sandbox: { workdir, network: false }, setupLater: true }));
    expect(writes).toBe(0);
  });
});
