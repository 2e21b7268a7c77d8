import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import type { SandboxInfo } from '../../src/adapters/sandbox/index.js';

/** What the figures were measured on: they only compare within one run on one machine. */
export interface MachineInfo {
  cpu: string;
  cores: number;
  memoryGiB: number;
  node: string;
  os: string;
}

export function machineInfo(): MachineInfo {
  const cpus = os.cpus();
  return {
    cpu: cpuModel() ?? cpus[0]?.model ?? 'unknown',
    cores: os.availableParallelism(),
    memoryGiB: Math.round((os.totalmem() / 1024 ** 3) * 10) / 10,
    node: process.version,
    os: `${os.type()} ${os.release()} ${os.arch()}`,
  };
}

function cpuModel(): string | undefined {
  try {
    const line = fs.readFileSync('/proc/cpuinfo', 'utf8').split('\n').find((text) => text.startsWith('model name'));
    return line?.split(':')[1]?.trim();
  } catch {
    return undefined;
  }
}

/** The 1-minute load average, as text (other work on the machine skews every figure). */
export function loadAverage(): string {
  return os.loadavg().map((value) => value.toFixed(2)).join(' / ');
}

/**
 * Waits until the kernel has written out every dirty page (`sync`): what an earlier step wrote
 * (a populated data dir, another benchmark's million events) is then not flushed during the
 * next measurement, where its writeback would slow whichever start it lands on.
 */
export function flushDirtyPages(): void {
  spawnSync('sync', { stdio: 'ignore' });
}

/** How the server runs its shells here (the benchmarks that time them say so). */
export function shellsRunAs(sandbox: SandboxInfo): string {
  if (sandbox.mode === 'none') return `on the host, unsandboxed${sandbox.warning ? ` (${sandbox.warning.split('.')[0]})` : ''}`;
  return `in the server's ${sandbox.mode} sandbox, network ${sandbox.network.user_mode ? `through ${sandbox.network.user_mode}` : 'off'}, spawned by its spawner`;
}
