import fs from 'node:fs';
import path from 'node:path';
import type { Config } from './config.js';
import type { Workdirs } from './core/conversations/workdirs.js';
import { WarmShells } from './core/agent/warm-shells.js';
import type { ShellFactory } from './core/tools/shell-session.js';

/**
 * The next default conversation's shell (core/agent/warm-shells.ts). The last workdir made for it
 * is noted in <data dir>/warm-workdir: one a crash left behind (empty, in the workdir base, no
 * conversation's) is removed at the next start.
 */
export function composeWarmShells(options: { config: Config; shells: ShellFactory; workdirs: Workdirs; inUse: (workdir: string) => boolean }): WarmShells {
  const { config } = options;
  const note = path.join(config.dataDir, 'warm-workdir');
  try {
    const left = fs.readFileSync(note, 'utf8');
    if (path.dirname(left) === fs.realpathSync(config.workdirBase) && !options.inUse(left)) fs.rmdirSync(left);
  } catch {
    // none left, or not empty (kept), or gone
  }
  fs.rmSync(note, { force: true });
  return new WarmShells({
    shells: options.shells,
    workdirs: options.workdirs,
    workdirBase: config.workdirBase,
    network: config.sandbox.network.default,
    idleTimeoutMs: config.idleTimeoutMs,
    remember: (workdir) => (workdir === null ? fs.rmSync(note, { force: true }) : fs.writeFileSync(note, workdir)),
  });
}
