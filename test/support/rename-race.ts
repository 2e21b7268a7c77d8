/**
 * What the symlink-race tests share: a python3 script that exchanges two paths with
 * renameat2(RENAME_EXCHANGE) as fast as it can (run in the sandbox as the agent, or beside the
 * server), and a snapshot of a decoy directory to prove it was neither read into anything, written
 * nor given to another owner.
 */
import fs from 'node:fs';
import path from 'node:path';

export const PYTHON = '/usr/bin/python3';

/** `python3 -c RACER A B SECONDS`, or saved as a file: exchanges A and B until SECONDS have passed. */
export const RACER = `import ctypes, sys, time
libc = ctypes.CDLL(None, use_errno=True)
a, b, end = sys.argv[1].encode(), sys.argv[2].encode(), time.time() + float(sys.argv[3])
while time.time() < end:
    libc.renameat2(-100, a, -100, b, 2)
`;

/** Entries, modes, owners and contents under a directory (links read, never followed). */
export function ownedSnapshot(directory: string): string {
  const lines: string[] = [];
  const visit = (dir: string, prefix: string) => {
    for (const name of fs.readdirSync(dir).sort()) {
      const full = path.join(dir, name);
      const stats = fs.lstatSync(full);
      const meta = `${stats.mode.toString(8)} ${stats.uid}:${stats.gid}`;
      if (stats.isSymbolicLink()) lines.push(`${prefix}${name} -> ${fs.readlinkSync(full)} ${stats.uid}:${stats.gid}`);
      else if (stats.isDirectory()) {
        lines.push(`${prefix}${name}/ ${meta}`);
        visit(full, `${prefix}${name}/`);
      } else lines.push(`${prefix}${name} ${meta} ${fs.readFileSync(full, 'base64')}`);
    }
  };
  visit(directory, '');
  return lines.join('\n');
}
