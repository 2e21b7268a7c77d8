import fs from 'node:fs';
import path from 'node:path';
import type { Logger } from 'pino';
import type { Config } from '../../config.js';
import { BwrapProcessLauncher } from './bwrap-launcher.js';
import type { ProcessLauncher, SandboxMode } from '../process/process-launcher.js';
import type { SandboxNetwork } from '../../core/schemas/conversation.js';
import type { Info } from '../../core/schemas/server-status.js';
import type { LimitEnforcement, ResourceLimits } from './resource-limits.js';
import { selectProcessLauncher } from './select-process-launcher.js';

/** What /info reports and the CLI warns about. */
export interface SandboxInfo {
  mode: SandboxMode;
  /** The network policy in force (see sandbox/network.ts). */
  network: { default: SandboxNetwork; user_mode: 'pasta' | 'slirp4netns' | null; host_allowed: boolean; note: string | null };
  limits: ResourceLimits;
  /** What enforces each limit: a cgroup for the whole sandbox, an rlimit per process, ... or nothing. */
  enforcement: LimitEnforcement;
  /** Set when commands run unsandboxed on the host: one sentence for the start-up warning. */
  warning: string | null;
  /**
   * Set once a workdir the user brought could not be id-mapped (sandbox/workdir-idmap.ts), so that
   * the agent runs there as the workdir's owner: one sentence with the last reason, for /health.
   */
  idmapRefused(): string | null;
}

/**
 * The launcher every agent process goes through, chosen once at start-up (AGENTD_SANDBOX). A
 * forced `bwrap` that cannot run throws (SandboxUnavailableError): the server does not start.
 */
export async function createSandbox(config: Config, logger: Logger): Promise<{ launcher: ProcessLauncher; info: SandboxInfo }> {
  let idmapRefused: string | null = null;
  const onIdmapRefused = (workdir: string, reason: string) => {
    idmapRefused = `a workdir the client or the CLI brought could not be id-mapped (${reason}): the agent runs there as the workdir's owner (uid 0 where root owns it), without capabilities`;
    logger.warn({ workdir, reason }, 'the workdir cannot be id-mapped: the agent runs in it as its owner, not as a uid of its own');
  };
  const { launcher, fallbackReason, cgroupReason, networkHelper, networkFallbackReason, networkHelperMissing } = await selectProcessLauncher({
    requested: config.sandbox.mode,
    limits: config.sandbox.limits,
    searchPath: config.agentEnv.hostEnv.PATH ?? '',
    hiddenPaths: [config.dataDir, config.workdirBase],
    extraReadOnlyPaths: config.sandbox.readOnlyPaths,
    stateDir: path.join(config.dataDir, 'sandbox'),
    createdWorkdirBase: realpathOr(config.workdirBase),
    useCgroups: config.sandbox.cgroups,
    networkHelper: config.sandbox.network.helper,
    onIdmapRefused,
  });
  let warning: string | null = null;
  if (launcher.mode === 'none') {
    const why = fallbackReason === null ? 'AGENTD_SANDBOX=none' : `no sandbox: ${fallbackReason}`;
    warning = `${why}. The agent's shell and commands run unsandboxed on the host, as the server's user: they can read the data dir, the keys and every conversation.`;
    logger.warn({ sandbox: 'none', reason: fallbackReason }, warning);
  } else {
    logger.info({ sandbox: launcher.mode, limits: launcher.limits, enforcement: launcher.enforcement, network: config.sandbox.network.default, user_mode_network: networkHelper?.kind ?? null }, 'agent processes run in a bubblewrap sandbox');
    if (launcher instanceof BwrapProcessLauncher && launcher.seccompUnavailable !== null) {
      logger.warn({ reason: launcher.seccompUnavailable }, 'set-id bits are not filtered: the agent may leave set-uid files (owned by its own uid) in its workdir');
    }
    if (cgroupReason !== null) logger.warn({ reason: cgroupReason }, 'no cgroup limits the whole sandbox: memory is limited per process (RLIMIT_AS) only');
  }
  let note: string | null = null;
  if (launcher.mode === 'none') {
    note = 'No sandbox: agent processes share the host\'s network whatever `sandbox.network` says.';
  } else if (networkFallbackReason !== null) {
    // Honest fallback: no network rather than the host's; the operator hears about it once.
    note = `\`network: true\` gives no network: ${networkFallbackReason}.`;
    logger.warn({ reason: networkFallbackReason }, note);
    // Installing a package is the fix only when none is installed; otherwise the reason says what is missing.
    warning = networkHelperMissing ? `${note} Install passt (pasta) or slirp4netns for user-mode networking.` : note;
  }
  const network = { default: config.sandbox.network.default, user_mode: networkHelper?.kind ?? null, host_allowed: config.sandbox.network.hostAllowed, note };
  return { launcher, info: { mode: launcher.mode, network, limits: launcher.limits, enforcement: launcher.enforcement, warning, idmapRefused: () => idmapRefused } };
}

/** Workdirs are compared by their real path (conversations keep theirs so). */
function realpathOr(dir: string): string {
  try {
    return fs.realpathSync(dir);
  } catch {
    return dir;
  }
}

/** The sandbox as /info reports it: its mode, network policy, and each limit with what enforces it. */
export function sandboxReport(sandbox: SandboxInfo): Info['sandbox'] {
  const { limits, enforcement } = sandbox;
  return {
    mode: sandbox.mode,
    network: sandbox.network,
    limits: {
      cpu_s: { value: limits.cpuSeconds, enforced_by: enforcement.cpuSeconds },
      memory_mb: { value: limits.memoryMb, enforced_by: enforcement.memoryMb },
      processes: { value: limits.processes, enforced_by: enforcement.processes },
      file_mb: { value: limits.fileMb, enforced_by: enforcement.fileMb },
      tmp_mb: { value: limits.tmpMb, enforced_by: enforcement.tmpMb },
      workdir_mb: { value: limits.workdirMb, enforced_by: enforcement.workdirMb },
    },
  };
}
