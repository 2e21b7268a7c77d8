import { execFileSync } from 'node:child_process';
import path from 'node:path';

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

export class WorkdirOwner {
  private readonly owned = new Map<string, number>();

  /** Makes `uid:gid` own `workdir` and everything in it; a no-op after the first success. */
  ensure(options: { workdir: string; uid: number; gid: number }): void {
    const { workdir, uid, gid } = options;
    if (this.owned.get(workdir) === uid || isSystemPath(workdir)) return;
    execFileSync('chown', ['-R', '-P', '-h', '--', `${uid}:${gid}`, workdir], { stdio: ['ignore', 'ignore', 'pipe'], timeout: 120_000 });
    this.owned.set(workdir, uid);
  }
}

export function isSystemPath(dir: string): boolean {
  const resolved = path.resolve(dir);
  const ancestor = `${resolved === '/' ? '' : resolved}/`;
  return SHARED_DIRS.includes(resolved) || SYSTEM_TREES.some((root) => resolved === root || resolved.startsWith(`${root}/`) || root.startsWith(ancestor));
}
