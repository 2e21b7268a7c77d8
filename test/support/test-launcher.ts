import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { BwrapProcessLauncher } from '../../src/adapters/sandbox/bwrap-launcher.js';
import type { ProcessLauncher } from '../../src/adapters/process/process-launcher.js';
import { listProcesses } from '../../src/adapters/process/process-tree.js';
import { findInPath } from '../../src/adapters/sandbox/mounts.js';

/**
 * For tests that build shells without a server: `AGENTD_SANDBOX=bwrap npx vitest run ...` runs
 * them through the bubblewrap launcher, otherwise on the host (undefined: the default launcher).
 */
export function testLauncher(): ProcessLauncher | undefined {
  if (process.env.AGENTD_SANDBOX !== 'bwrap') return undefined;
  const searchPath = process.env.PATH ?? '/usr/bin:/bin';
  const bwrapPath = findInPath('bwrap', searchPath);
  if (!bwrapPath) throw new Error('AGENTD_SANDBOX=bwrap but bwrap is not installed');
  return new BwrapProcessLauncher({
    bwrapPath,
    limits: { cpuSeconds: 600, memoryMb: 4096, processes: 1024, fileMb: null, tmpMb: 1024, workdirMb: null },
    hiddenPaths: [],
    stateDir: fs.mkdtempSync(path.join(os.tmpdir(), 'agentd-test-sandbox-')),
    searchPath,
  });
}

export const sandboxed = (): boolean => process.env.AGENTD_SANDBOX === 'bwrap';

/**
 * The host pid of a process of the shell known by its pid as the shell sees it (in a sandbox, a
 * pid of its own pid namespace: the last field of NSpid in /proc/<pid>/status). Identity on the host.
 */
export function hostPidOf(shellPid: number, innerPid: number): number {
  if (!sandboxed()) return innerPid;
  const candidates = listProcesses().map((entry) => entry.pid);
  for (const pid of candidates) {
    try {
      const status = fs.readFileSync(`/proc/${pid}/status`, 'utf8');
      const nspid = /^NSpid:\s+(.*)$/m.exec(status)?.[1]?.trim().split(/\s+/).map(Number) ?? [];
      if (nspid.length > 1 && nspid[nspid.length - 1] === innerPid && isBelow(pid, shellPid)) return pid;
    } catch {
      // gone
    }
  }
  return -1;
}

function isBelow(pid: number, ancestor: number): boolean {
  const byPid = new Map(listProcesses().map((entry) => [entry.pid, entry.ppid]));
  for (let current = byPid.get(pid); current !== undefined && current > 1; current = byPid.get(current)) if (current === ancestor) return true;
  return false;
}
