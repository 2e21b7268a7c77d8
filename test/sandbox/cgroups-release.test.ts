/**
 * Every sandbox of a workdir shares its cgroups. A sandbox's end releases them, retrying while
 * they are busy; those retries used to go on after the workdir's next sandbox was prepared and
 * could remove the cgroup between that sandbox's mkdir and its join, failing its start ("cannot
 * join its cgroup", seen in a full run). Here on a cgroup tree made of plain directories (an
 * rmdir of a directory with a file in it fails as a busy cgroup's does), read through a fake
 * /proc/self: nothing of the host's cgroups is touched.
 */
import fs from 'node:fs';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { detectSandboxCgroups, type SandboxCgroups } from '../../src/adapters/sandbox/cgroups.js';
import { tempDir } from '../support/agentd.js';
import { sleep } from '../support/reliability.js';

let dir: string | undefined;
afterEach(() => {
  if (dir) fs.rmSync(dir, { recursive: true, force: true });
  dir = undefined;
});

/** A cgroup2 mount at `<dir>/cg` holding the server's cgroup, and a /proc/self that says so. */
function fakeCgroups() {
  dir = tempDir('agentd-cgroups-release-');
  const mount = path.join(dir, 'cg');
  const procSelf = path.join(dir, 'proc-self');
  fs.mkdirSync(mount);
  fs.mkdirSync(procSelf);
  fs.writeFileSync(path.join(mount, 'cgroup.controllers'), 'memory pids\n');
  fs.writeFileSync(path.join(procSelf, 'mountinfo'), `30 25 0:26 / ${mount} rw,nosuid - cgroup2 cgroup2 rw\n`);
  fs.writeFileSync(path.join(procSelf, 'cgroup'), '0::/\n');
  const { cgroups, reason } = detectSandboxCgroups({ limits: { memoryBytes: 1 << 30, pids: 100 }, procSelf });
  expect(cgroups, reason ?? '').not.toBeNull();
  return cgroups!;
}

/**
 * A sandbox of the workdir `key` is prepared and ends while its last process is still leaving
 * (a file keeps its cgroup's directory from being removed), so its release retries. The
 * directory, and a function that lets the process go.
 */
function endWhileBusy(cgroups: SandboxCgroups, key: string): { cgroup: string; leave: () => void } {
  const cgroup = cgroups.directories(key)[0]!;
  cgroups.joinScript(key, 'mkdir');
  fs.mkdirSync(cgroup, { recursive: true });
  fs.writeFileSync(path.join(cgroup, 'still-busy'), '');
  cgroups.release(key);
  return { cgroup, leave: () => fs.rmSync(path.join(cgroup, 'still-busy')) };
}

describe("a workdir's sandbox cgroups", () => {
  it("are not removed by an earlier sandbox's release once the next sandbox is prepared", async () => {
    const cgroups = fakeCgroups();
    const { cgroup, leave } = endWhileBusy(cgroups, 'c1000');
    await sleep(20);
    // The next sandbox of the workdir is prepared; its join finds the cgroup empty for a moment.
    cgroups.joinScript('c1000', 'mkdir');
    leave();
    await sleep(500);
    expect(fs.existsSync(cgroup), "the first sandbox's retries left the cgroup to the next sandbox").toBe(true);
    // That sandbox's own end removes it.
    cgroups.release('c1000');
    await sleep(100);
    expect(fs.existsSync(cgroup)).toBe(false);
  });

  it('are removed by the retries when no other sandbox came', async () => {
    const { cgroup, leave } = endWhileBusy(fakeCgroups(), 'c1001');
    await sleep(20);
    leave();
    await sleep(500);
    expect(fs.existsSync(cgroup)).toBe(false);
  });
});
