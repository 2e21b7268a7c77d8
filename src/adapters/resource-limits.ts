/**
 * Per-process limits for everything the agent runs (AGENTD_LIMIT_*). `null` means "no limit".
 * They are rlimits, set (soft and hard, so the agent cannot raise them) by a small bash prologue
 * right before the program starts:
 * - cpuSeconds: RLIMIT_CPU, CPU time of each process (the shell itself included);
 * - memoryMb: RLIMIT_AS, the address space of each process;
 * - processes: RLIMIT_NPROC, processes and threads of the user the program runs as. The kernel
 *   does not apply it to root, which is why the bwrap sandbox runs the agent as a user of its own
 *   (see bwrap-launcher.ts) and stops the whole sandbox when it reaches the limit.
 */
export interface ResourceLimits {
  cpuSeconds: number | null;
  memoryMb: number | null;
  processes: number | null;
}

export const NO_LIMITS: ResourceLimits = Object.freeze({ cpuSeconds: null, memoryMb: null, processes: null });

export function hasLimits(limits: ResourceLimits): boolean {
  return limits.cpuSeconds !== null || limits.memoryMb !== null || limits.processes !== null;
}

/**
 * bash statements that set the limits; each one keeps a lower limit already in force (it cannot
 * raise a hard limit) instead of failing. Values are integers, so the text is safe to embed.
 */
export function ulimitStatements(limits: ResourceLimits): string {
  const statements: string[] = [];
  if (limits.cpuSeconds !== null) statements.push(`ulimit -t ${Math.trunc(limits.cpuSeconds)}`);
  if (limits.memoryMb !== null) statements.push(`ulimit -v ${Math.trunc(limits.memoryMb) * 1024}`);
  if (limits.processes !== null) statements.push(`ulimit -u ${Math.trunc(limits.processes)}`);
  return statements.map((statement) => `${statement} 2>/dev/null`).join('; ');
}
