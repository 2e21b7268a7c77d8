/**
 * Limits for everything the agent runs (AGENTD_LIMIT_*). `null` means "no limit".
 * - cpuSeconds: RLIMIT_CPU, CPU time of each process (the shell itself included);
 * - memoryMb: memory of the whole sandbox (all its processes and its /tmp) when a cgroup enforces
 *   it (sandbox/cgroups.ts); otherwise RLIMIT_AS, the address space of each process;
 * - processes: processes and threads of the sandbox: a cgroup's pids.max where one is in force,
 *   RLIMIT_NPROC of the user the program runs as, and the sandbox's watchdog. The kernel does not
 *   apply RLIMIT_NPROC to root, which is why the bwrap sandbox runs the agent as a user of its
 *   own (see bwrap-launcher.ts);
 * - fileMb: RLIMIT_FSIZE, the largest file a process may write;
 * - tmpMb: the size of the sandbox's private /tmp (also its /var/tmp and /dev/shm);
 * - workdirMb: the workdir's disk usage; past it the running command is stopped (workdir-guard.ts).
 * The rlimits are set (soft and hard, so the agent cannot raise them) by a small bash prologue
 * right before the program starts.
 */
export interface ResourceLimits {
  cpuSeconds: number | null;
  memoryMb: number | null;
  processes: number | null;
  fileMb: number | null;
  tmpMb: number | null;
  workdirMb: number | null;
}

export const NO_LIMITS: ResourceLimits = Object.freeze({ cpuSeconds: null, memoryMb: null, processes: null, fileMb: null, tmpMb: null, workdirMb: null });

/** What enforces a limit: a cgroup (the whole sandbox), an rlimit (each process), the sandbox's tmpfs size, the server watching the workdir, or nothing. */
export type EnforcedBy = 'cgroup' | 'rlimit' | 'tmpfs' | 'server' | 'none';

export type LimitName = keyof ResourceLimits;

export type LimitEnforcement = Readonly<Record<LimitName, EnforcedBy>>;

export interface UlimitOptions {
  /** false when a cgroup limits the sandbox's memory: RLIMIT_AS is then left alone. Default true. */
  addressSpace?: boolean;
}

export function hasRlimits(limits: ResourceLimits, options: UlimitOptions = {}): boolean {
  return ulimitStatements(limits, options) !== '';
}

/**
 * bash statements that set the rlimits; each one keeps a lower limit already in force (it cannot
 * raise a hard limit) instead of failing. Values are integers, so the text is safe to embed.
 */
export function ulimitStatements(limits: ResourceLimits, options: UlimitOptions = {}): string {
  const statements: string[] = [];
  if (limits.cpuSeconds !== null) statements.push(`ulimit -t ${Math.trunc(limits.cpuSeconds)}`);
  if (limits.memoryMb !== null && options.addressSpace !== false) statements.push(`ulimit -v ${Math.trunc(limits.memoryMb) * 1024}`);
  if (limits.processes !== null) statements.push(`ulimit -u ${Math.trunc(limits.processes)}`);
  // bash counts -f in blocks of 1024 bytes.
  if (limits.fileMb !== null) statements.push(`ulimit -f ${Math.trunc(limits.fileMb) * 1024}`);
  return statements.map((statement) => `${statement} 2>/dev/null`).join('; ');
}
