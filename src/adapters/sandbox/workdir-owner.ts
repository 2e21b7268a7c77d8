import { execFile, execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';

const execFileAsync = promisify(execFile);

/**
 * Gives a workdir to the agent's uid (server running as root), once per workdir and server
 * process: the agent holds no capability, so it works on its files as their owner. `chown -R -P`
 * (coreutils) walks the tree without following symlinks, with descriptor-relative steps, and
 * changes symlinks themselves; a chown clears the set-id bits of the files it touches. System
 * directories (and their ancestors) are never given away: an agent in such a workdir keeps only
 * what its uid may do there.
 */
const SYSTEM_TREES = ['/bin', '/boot', '/dev', '/etc', '/lib', '/lib32', '/lib64', '/libx32', '/proc', '/run', '/sbin', '/sys', '/usr', '/var/lib', '/var/log', '/var/run', '/var/spool'];
/** Shared directories whose contents may be workdirs, but which are never given away themselves. */
const SHARED_DIRS = ['/home', '/media', '/mnt', '/opt', '/root', '/srv', '/tmp', '/var/tmp'];

const CHOWN_TIMEOUT_MS = 120_000;
const ARGS = (workdir: string, uid: number, gid: number) => ['-R', '-P', '-h', '--', `${uid}:${gid}`, workdir];

export class WorkdirOwner {
  private readonly owned = new Map<string, number>();

  /**
   * Makes `uid:gid` own `workdir` and everything in it; a no-op after the first success. An empty
   * workdir (a new one, the start-up probe's) is changed here: a chown process is spawned by
   * forking the whole server, which holds its event loop (start-up's probe would pay it).
   */
  ensure(options: { workdir: string; uid: number; gid: number }): void {
    const { workdir, uid, gid } = options;
    if (this.owned.get(workdir) === uid || isSystemPath(workdir)) return;
    if (isEmptyDir(workdir)) fs.lchownSync(workdir, uid, gid);
    else execFileSync('chown', ARGS(workdir, uid, gid), { stdio: ['ignore', 'ignore', 'pipe'], timeout: CHOWN_TIMEOUT_MS });
    this.owned.set(workdir, uid);
  }

  /**
   * As ensure, without blocking the event loop for a workdir with files (their chown process runs
   * meanwhile). An empty one, the usual new one, is given away here at once: its few system calls
   * take next to nothing, where two calls through the thread pool waited behind whatever else
   * the pool was doing, on the path of the first command of a new
   * conversation's warm shell (P10).
   */
  async ensureAsync(options: { workdir: string; uid: number; gid: number }): Promise<void> {
    const { workdir, uid, gid } = options;
    if (this.owned.get(workdir) === uid || isSystemPath(workdir)) return;
    if (isEmptyDir(workdir)) fs.lchownSync(workdir, uid, gid);
    else await execFileAsync('chown', ARGS(workdir, uid, gid), { timeout: CHOWN_TIMEOUT_MS });
    this.owned.set(workdir, uid);
  }

  /** The workdir's conversation is gone: a later use of the same path gives it away again. */
  forget(workdir: string): void {
    this.owned.delete(workdir);
  }

  /** How many workdirs are known given away (tests). */
  get held(): number {
    return this.owned.size;
  }
}

/** Whether a directory has no entries, from its first one alone (a listing of every name would grow with the directory). */
function isEmptyDir(dir: string): boolean {
  const opened = fs.opendirSync(dir, { bufferSize: 1 });
  try {
    return opened.readSync() === null;
  } finally {
    opened.closeSync();
  }
}

export function isSystemPath(dir: string): boolean {
  const resolved = path.resolve(dir);
  const ancestor = `${resolved === '/' ? '' : resolved}/`;
  return SHARED_DIRS.includes(resolved) || SYSTEM_TREES.some((root) => resolved === root || resolved.startsWith(`${root}/`) || root.startsWith(ancestor));
}
