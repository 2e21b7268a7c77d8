import path from 'node:path';
import type { Logger } from 'pino';
import type { Config } from '../../config.js';
import { CheckpointService, type CheckpointServiceDeps } from '../../core/checkpoints/checkpoint-service.js';
import { FileCheckpointStore } from './file-checkpoint-store.js';
import { FileIntentStore } from './file-intent-store.js';
import { GitShadowRepository } from './git-shadow-repository.js';
import type { RunProcess } from '../process/process-spawner.js';
import type { ProcessLauncher } from '../process/process-launcher.js';

/**
 * Workdir checkpoints (core/checkpoints): their records, the shadow git repositories, and the
 * intents of work a crash must not leave half done (`intents`: this instance's, for forks too).
 * With several instances the checkpoints and the rewinds under way live beside the workdirs, on
 * the storage they share. With a sandbox, git runs inside the conversation's whenever it reads
 * or writes the workdir (git-shadow-repository.ts).
 */
export function createCheckpoints(options: {
  config: Config;
  logger: Logger;
  run: RunProcess;
  /** The agents' process launcher: a bubblewrap one is where git works on the workdir. */
  launcher: ProcessLauncher;
  deps: Pick<CheckpointServiceDeps, 'conversations' | 'log' | 'recorder' | 'isRunning' | 'maskText' | 'pausePoint'>;
}): { intents: FileIntentStore; store: FileCheckpointStore; checkpoints: CheckpointService } {
  const { config, logger } = options;
  const { shared, dir } = config.checkpoints;
  const intents = new FileIntentStore(path.join(config.dataDir, 'intents'));
  const store = new FileCheckpointStore(dir, { ownDirectory: shared });
  const checkpoints = new CheckpointService({
    ...options.deps,
    store,
    shadow: new GitShadowRepository({ maxFileBytes: config.checkpoints.maxFileBytes, run: options.run, ...(options.launcher.mode === 'bwrap' && { sandbox: options.launcher }) }),
    intents: shared ? new FileIntentStore(path.join(dir, '.intents'), { shared }) : intents,
    enabled: config.checkpoints.enabled,
    onError: (error, context) => logger.warn({ err: error, ...context }, 'workdir checkpoint failed; the run goes on without it'),
  });
  return { intents, store, checkpoints };
}
