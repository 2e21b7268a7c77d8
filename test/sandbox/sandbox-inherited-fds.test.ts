/**
 * No descriptor the server holds without close-on-exec (one it inherited itself: a test runner's
 * or a supervisor's pipe, seen as fd 251) reaches the agent: the sandbox's entry script closes
 * every descriptor but the ones it expects (sandbox/entry-script.ts, step 0). Here the launch is
 * spawned with one more pipe, at LEAKED_FD, as such a descriptor arrives; the agent's programs,
 * its shell and the sandbox's watchdog must not hold it.
 */
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { BwrapProcessLauncher } from '../../src/adapters/sandbox/bwrap-launcher.js';
import { findInPath } from '../../src/adapters/sandbox/mounts.js';
import { NO_LIMITS } from '../../src/adapters/sandbox/resource-limits.js';
import { selectProcessLauncher } from '../../src/adapters/sandbox/select-process-launcher.js';
import type { ProcessSpec } from '../../src/adapters/process/process-launcher.js';
import { tempDir } from '../support/agentd.js';

const probeDir = tempDir('agentd-fds-probe-');
const { fallbackReason } = await selectProcessLauncher({ requested: 'auto', limits: NO_LIMITS, searchPath: process.env.PATH ?? '', hiddenPaths: [], extraReadOnlyPaths: [], stateDir: probeDir });
fs.rmSync(probeDir, { recursive: true, force: true });
if (fallbackReason) console.warn(`test/sandbox/sandbox-inherited-fds.test.ts skipped: bubblewrap cannot run here (${fallbackReason})`);

const LEAKED_FD = 6;
const searchPath = process.env.PATH ?? '/usr/bin:/bin';
const bashPath = findInPath('bash', searchPath) ?? '/bin/bash';

/**
 * Every process of the sandbox but the init: its pid and its open descriptors, one line each
 * (none where the agent may not look: the watchdog stays root when the server is). Listed by an
 * `ls` into a file, so the listing shell holds nothing more while it waits (a command
 * substitution's pipe would show).
 */
const LIST_FDS = 'for p in /proc/[0-9]*; do [ "${p#/proc/}" = 1 ] && continue; ls "$p/fd" >/tmp/fds 2>/dev/null; echo "pid ${p#/proc/} fds $(sort -n /tmp/fds | tr "\\n" " ")"; : >/tmp/fds; done';

describe.skipIf(fallbackReason !== null)('descriptors inherited by the server', () => {
  const dir = tempDir('agentd-fds-');
  const workdir = path.join(dir, 'work');
  fs.mkdirSync(workdir);
  const launcher = new BwrapProcessLauncher({ bwrapPath: findInPath('bwrap', searchPath)!, limits: NO_LIMITS, hiddenPaths: [], stateDir: path.join(dir, 'state'), searchPath });
  fs.mkdirSync(path.join(dir, 'state'), { recursive: true });

  afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

  /** Runs the prepared `spec` with an extra pipe at LEAKED_FD; `input` goes to its stdin. What it printed. */
  async function run(spec: ProcessSpec, input: string): Promise<string> {
    const prepared = launcher.prepare(spec);
    const stdio: Array<'pipe' | 'ignore'> = ['pipe', 'pipe', 'pipe', 'pipe', 'ignore', 'ignore', 'pipe'];
    if (prepared.controlFd !== undefined) stdio[prepared.controlFd] = 'pipe';
    const child = spawn(prepared.command, prepared.args, { cwd: prepared.cwd, env: prepared.env, stdio });
    let out = '';
    child.stdout!.on('data', (chunk) => (out += chunk));
    child.stdin!.end(input);
    await new Promise((resolve) => child.once('exit', resolve));
    prepared.release?.();
    return out;
  }

  function fdsOf(out: string): number[][] {
    const lines = out.split('\n').filter((line) => line.startsWith('pid '));
    expect(lines.length).toBeGreaterThan(0);
    return lines.map((line) => line.replace(/^pid \d+ fds /, '').trim().split(' ').filter(Boolean).map(Number));
  }

  it('a one-off program and the watchdog hold 0-2 only (and what they open themselves)', async () => {
    const out = await run({ command: bashPath, args: ['--norc', '--noprofile', '-c', `echo "program $$"; ${LIST_FDS}`], cwd: workdir, env: { PATH: searchPath }, sandbox: { workdir, network: false } }, '');
    const program = /^program (\d+)$/m.exec(out)![1];
    const lines = out.split('\n').filter((line) => line.startsWith('pid '));
    for (const [index, fds] of fdsOf(out).entries()) {
      expect(fds, out).not.toContain(LEAKED_FD);
      // The program holds 0-2 only. The watchdog (where it runs: without cgroups) also holds the
      // tick pipe it made itself and sleeps on (entry-script.ts, pollingWatchdog): one fd at most.
      if (lines[index]!.startsWith(`pid ${program} `)) expect(fds.filter((fd) => fd > 2), out).toEqual([]);
      else expect(fds.filter((fd) => fd > 2).length, out).toBeLessThanOrEqual(1);
    }
  });

  it("the agent's shell holds 0-3 only (stdio and its command channel); the watchdog also the control pipe", async () => {
    const out = await run({ command: bashPath, args: ['--norc', '--noprofile'], cwd: workdir, env: { PATH: searchPath }, sandbox: { workdir, network: false }, control: true }, `echo "shell $$"\nls /proc/$$/fd >/tmp/shell-fds\necho "shell-fds $(sort -n /tmp/shell-fds | tr '\\n' ' ')"\n${LIST_FDS}\nexit\n`);
    const shell = /^shell (\d+)$/m.exec(out)?.[1];
    expect(shell).toBeDefined();
    const own = /^pid (\d+) fds (.*)$/gm;
    let seen = 0;
    for (let match = own.exec(out); match; match = own.exec(out)) {
      const fds = match[2]!.trim().split(' ').filter(Boolean).map(Number);
      expect(fds).not.toContain(LEAKED_FD);
      seen += 1;
    }
    expect(seen).toBeGreaterThan(1);
    // Read by a child while the shell waits for it: only what the shell holds at rest.
    expect(/^shell-fds (.*)$/m.exec(out)?.[1]?.trim()).toBe('0 1 2 3');
  });
});
