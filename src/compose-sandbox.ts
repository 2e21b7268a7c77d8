import path from 'node:path';
import type { Logger } from 'pino';
import type { Config } from './config.js';
import { BwrapProcessLauncher } from './adapters/bwrap-launcher.js';
import type { ProcessLauncher, SandboxMode } from './adapters/process-launcher.js';
import type { LimitEnforcement, ResourceLimits } from './adapters/resource-limits.js';
import { selectProcessLauncher } from './adapters/select-process-launcher.js';

/** What /info reports and the CLI warns about. */
export interface SandboxInfo {
  mode: SandboxMode;
  /** New conversations have network unless created with `sandbox: {network: false}`. */
  networkDefault: boolean;
  limits: ResourceLimits;
  /** What enforces each limit: a cgroup for the whole sandbox, an rlimit per process, ... or nothing. */
  enforcement: LimitEnforcement;
  /** Set when commands run unsandboxed on the host: one sentence for the start-up warning. */
  warning: string | null;
}

/**
 * The launcher every agent process goes through, chosen once at start-up (AGENTD_SANDBOX). A
 * forced `bwrap` that cannot run throws (SandboxUnavailableError): the server does not start.
 */
export async function composeSandbox(config: Config, logger: Logger): Promise<{ launcher: ProcessLauncher; info: SandboxInfo }> {
  const { launcher, fallbackReason, cgroupReason } = await selectProcessLauncher({
    requested: config.sandbox.mode,
    limits: config.sandbox.limits,
    searchPath: config.agentEnv.hostEnv.PATH ?? '',
    hiddenPaths: [config.dataDir, config.workdirBase],
    extraReadOnlyPaths: config.sandbox.readOnlyPaths,
    stateDir: path.join(config.dataDir, 'sandbox'),
    useCgroups: config.sandbox.cgroups,
  });
  let warning: string | null = null;
  if (launcher.mode === 'none') {
    const why = fallbackReason === null ? 'AGENTD_SANDBOX=none' : `no sandbox: ${fallbackReason}`;
    warning = `${why}. The agent's shell and commands run unsandboxed on the host, as the server's user: they can read the data dir, the keys and every conversation.`;
    logger.warn({ sandbox: 'none', reason: fallbackReason }, warning);
  } else {
    logger.info({ sandbox: launcher.mode, limits: launcher.limits, enforcement: launcher.enforcement }, 'agent processes run in a bubblewrap sandbox');
    if (launcher instanceof BwrapProcessLauncher && launcher.seccompUnavailable !== null) {
      logger.warn({ reason: launcher.seccompUnavailable }, 'set-id bits are not filtered: the agent may leave set-uid files (owned by its own uid) in its workdir');
    }
    if (cgroupReason !== null) logger.warn({ reason: cgroupReason }, 'no cgroup limits the whole sandbox: memory is limited per process (RLIMIT_AS) only');
  }
  return { launcher, info: { mode: launcher.mode, networkDefault: true, limits: launcher.limits, enforcement: launcher.enforcement, warning } };
}
