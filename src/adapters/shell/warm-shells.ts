import fs from 'node:fs';
import path from 'node:path';
import type { Config } from '../../config.js';
import type { Workdirs } from '../../core/conversations/workdirs.js';
import { WarmShells } from '../../core/agent/warm-shells.js';
import type { ShellFactory } from '../../core/tools/shell-session.js';

/**
 * The next default conversations' shells (core/agent/warm-shells.ts). The workdirs made for them
 * are noted in <data dir>/warm-workdir, one per line: those a crash left behind (empty, in the
 * workdir base, no conversation's) are removed at the next start.
 */
export function createWarmShells(options: { config: Config; shells: ShellFactory; workdirs: Workdirs; inUse: (workdir: string) => boolean }): WarmShells {
  const { config } = options;
  const note = path.join(config.dataDir, 'warm-workdir');
  removeLeftovers(note, config.workdirBase, options.inUse);
  fs.rmSync(note, { force: true });
  return new WarmShells({
    shells: options.shells,
    workdirs: options.workdirs,
    workdirBase: config.workdirBase,
    network: config.sandbox.network.default,
    count: config.warmShells,
    idleTimeoutMs: config.idleTimeoutMs,
    // Off the event loop: replacing a file frees its blocks, which some file systems take a while to do.
    remember: (workdirs) => (workdirs.length === 0 ? fs.promises.rm(note, { force: true }) : fs.promises.writeFile(note, `${workdirs.join('\n')}\n`)),
  });
}

function removeLeftovers(note: string, workdirBase: string, inUse: (workdir: string) => boolean): void {
  let lines: string[];
  let base: string;
  try {
    lines = fs.readFileSync(note, 'utf8').split('\n').filter(Boolean);
    base = fs.realpathSync(workdirBase);
  } catch {
    return; // none noted, or no workdir base yet
  }
  for (const line of lines) {
    try {
      const workdir = fs.realpathSync(line);
      if (path.dirname(workdir) === base && !inUse(workdir)) fs.rmdirSync(workdir);
    } catch {
      // gone, or not empty (kept)
    }
  }
}
