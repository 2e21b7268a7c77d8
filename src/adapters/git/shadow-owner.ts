import fs from 'node:fs';
import path from 'node:path';

/**
 * Who owns a shadow repository whose git runs in the conversation's sandbox (git-program.ts):
 * that git runs as the agent's uid, so the repository is the agent's too, and what the server
 * writes there itself (a commit, a ref) is given back. The repository lives in the data dir,
 * which no sandbox sees: the uid owns files it can only reach through the server's own git.
 * Nothing changes when the server is not root (the sandbox runs as the server's uid).
 */
export class ShadowOwner {
  /** The uid each repository was last given to. */
  private readonly given = new Map<string, number>();

  /** `runsAs`: who the sandbox of a workdir runs as (ProcessLauncher.runsAs); null: the server's own user. */
  constructor(private readonly runsAs: (workdir: string) => { uid: number; gid: number } | null) {}

  /** Gives the whole repository to the uid the sandbox of `workdir` runs as, unless it already is. */
  ensure(gitDir: string, workdir: string): void {
    const owner = this.ownerOf(workdir);
    if (owner === null || this.given.get(gitDir) === owner.uid) return;
    const head = fs.lstatSync(path.join(gitDir, 'HEAD'), { throwIfNoEntry: false });
    if (head?.uid !== owner.uid) giveAll(gitDir, owner);
    this.given.set(gitDir, owner.uid);
  }

  /** Gives entries the server just wrote in the repository (relative paths) to its owner. */
  give(gitDir: string, workdir: string, entries: readonly string[]): void {
    const owner = this.ownerOf(workdir);
    if (owner === null) return;
    for (const entry of entries) {
      const file = path.join(gitDir, entry);
      const stats = fs.lstatSync(file, { throwIfNoEntry: false });
      if (stats && stats.uid !== owner.uid) fs.lchownSync(file, owner.uid, owner.gid);
    }
  }

  forget(gitDir: string): void {
    this.given.delete(gitDir);
  }

  /** The sandbox's uid when the server is root and that uid is not its own; else null. */
  private ownerOf(workdir: string): { uid: number; gid: number } | null {
    if (process.geteuid?.() !== 0) return null;
    const owner = this.runsAs(workdir);
    return owner === null || owner.uid === 0 ? null : owner;
  }
}

/** lchown of every entry under `dir` and of `dir` itself; links are given, never followed. */
function giveAll(dir: string, owner: { uid: number; gid: number }): void {
  for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
    const file = path.join(dir, entry.name);
    if (entry.isDirectory()) giveAll(file, owner);
    else fs.lchownSync(file, owner.uid, owner.gid);
  }
  fs.lchownSync(dir, owner.uid, owner.gid);
}
