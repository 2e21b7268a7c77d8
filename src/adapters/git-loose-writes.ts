import fs from 'node:fs';
import path from 'node:path';
import { createHash, randomBytes } from 'node:crypto';
import { deflateSync } from 'node:zlib';

/**
 * The two writes of a checkpoint's commit done in this process, where they were two git
 * processes (`commit-tree`, `update-ref`; ~15 ms each on a small VM, on the path of the tool call
 * the checkpoint comes before): a commit as a loose object and a branch as a loose ref. Both are
 * git's plainest formats (gitformat-loose(5), "loose refs" in gitrepository-layout(5)); each is
 * written to a temporary name and renamed, so a reader sees it whole or not at all. Only for a
 * repository in git's default formats (SHA-1 objects, files for refs): `supportsLooseWrites` tells.
 */

/** Whether a repository keeps SHA-1 objects and refs as files (its config names no other format). */
export function supportsLooseWrites(gitDir: string): boolean {
  let config: string;
  try {
    config = fs.readFileSync(path.join(gitDir, 'config'), 'utf8');
  } catch {
    return false;
  }
  return !/^\s*(objectformat|refstorage)\s*=/im.test(config);
}

/** Writes a commit of `tree` (on `parent`, if any) by agentd with `message`; returns its id. */
export function writeCommit(gitDir: string, options: { tree: string; parent?: string | undefined; message: string; date: Date }): string {
  const seconds = Math.floor(options.date.getTime() / 1000);
  const signature = `agentd <agentd@localhost> ${seconds} +0000`;
  const body = [`tree ${options.tree}`, ...(options.parent ? [`parent ${options.parent}`] : []), `author ${signature}`, `committer ${signature}`, '', `${options.message}\n`].join('\n');
  return writeObject(gitDir, 'commit', Buffer.from(body, 'utf8'));
}

/** Points `ref` (e.g. `refs/heads/checkpoints`) at `id`. */
export function writeRef(gitDir: string, ref: string, id: string): void {
  const file = path.join(gitDir, ref);
  fs.mkdirSync(path.dirname(file), { recursive: true });
  replaceFile(gitDir, file, `${id}\n`, 0o644);
}

function writeObject(gitDir: string, type: string, content: Buffer): string {
  const whole = Buffer.concat([Buffer.from(`${type} ${content.length}\0`), content]);
  const id = createHash('sha1').update(whole).digest('hex');
  const file = path.join(gitDir, 'objects', id.slice(0, 2), id.slice(2));
  // Objects are named by their content: one already there is this one.
  if (fs.existsSync(file)) return id;
  fs.mkdirSync(path.dirname(file), { recursive: true });
  replaceFile(gitDir, file, deflateSync(whole), 0o444);
  return id;
}

/** Written beside the repository's own files (a crash leaves no half ref or object among them), then renamed into place. */
function replaceFile(gitDir: string, file: string, data: string | Buffer, mode: number): void {
  const temp = path.join(gitDir, `agentd-write-${randomBytes(6).toString('hex')}.tmp`);
  try {
    fs.writeFileSync(temp, data, { mode, flag: 'wx' });
    fs.renameSync(temp, file);
  } catch (error) {
    fs.rmSync(temp, { force: true });
    throw error;
  }
}
