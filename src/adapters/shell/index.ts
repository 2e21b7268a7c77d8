import path from 'node:path';
import type { Logger } from 'pino';
import type { Config } from '../../config.js';
import type { WarmShells } from '../../core/agent/warm-shells.js';
import type { Workdirs } from '../../core/conversations/workdirs.js';
import type { ShellFactory } from '../../core/tools/shell-session.js';
import type { ProcessLauncher } from '../process/process-launcher.js';
import type { SpawnProcess } from '../process/process-spawner.js';
import { BashShellFactory } from './bash-shell.js';
import { ShellLedger } from './shell-ledger.js';
import { ConversationShells } from './conversation-shells.js';
import { createWarmShells } from './warm-shells.js';

export { BashShellFactory } from './bash-shell.js';
export { ShellLedger } from './shell-ledger.js';
export { ConversationShells } from './conversation-shells.js';

export interface Shells {
  /** What the agent's conversations get their shell from: warm ones first when kept. */
  factory: ShellFactory;
  /** Shells started ahead for the next new conversations (null when none are kept). */
  warm: WarmShells | null;
  /** Stops the warm shells (first at shutdown, before the conversations' own). */
  stopWarm(): Promise<void>;
  /** Closes the ledger (once no shell starts or ends any more). */
  close(): void;
  /** Every shell made to end with the process, nothing waited for. */
  killAllForExit(): void;
}

/**
 * The agent's persistent bash shells, wired: one factory (ConversationShells) whose shells are a
 * bash in the sandbox, noted in the data dir's shell ledger (so shells a crashed server left
 * running are stopped at the next start), with warm shells kept ahead for new conversations when
 * the config asks for them.
 */
export function createShells(
  config: Config,
  deps: {
    logger: Logger;
    launcher: ProcessLauncher;
    spawn: SpawnProcess;
    workdirs: Workdirs;
    inUse: (workdir: string) => boolean;
    /** Tests and benchmarks: shells of their own instead of bash, or bash's wrapped to be timed. */
    shells?: ShellFactory;
    wrapShells?: (shells: ShellFactory) => ShellFactory;
  },
): Shells {
  const ledger = new ShellLedger(path.join(config.dataDir, 'shells.jsonl'), path.join(config.dataDir, 'shells.json'));
  const reaped = ledger.reapOrphans();
  if (reaped > 0) deps.logger.warn({ reaped }, 'stopped shells left running by a previous server process');
  const bash = deps.shells ?? new BashShellFactory({ launcher: deps.launcher, spawn: deps.spawn, ...config.agentEnv });
  const keepWarm = config.warmShells > 0 && config.idleTimeoutMs > 0;
  const factory = new ConversationShells({
    bash: deps.wrapShells ? deps.wrapShells(bash) : bash,
    ledger,
    ...(keepWarm && { warm: (start: ShellFactory) => createWarmShells({ config, shells: start, workdirs: deps.workdirs, inUse: deps.inUse }) }),
  });
  const { warm } = factory;
  return {
    factory,
    warm,
    async stopWarm() {
      await warm?.close();
    },
    close: () => ledger.close(),
    killAllForExit: () => factory.killAllForExit(),
  };
}
