/**
 * The project's configuration files (core/workspace/project-files.ts) on the host's disk. They
 * may lie above the workdir (AGENTS.md up to the repository root), with the directory they are
 * found in as the root of a pinned walk (pin-path.ts): every directory on the way is held open
 * and every symlink expanded by hand, only while it stays inside that directory, and the file
 * is opened through its pinned parent with O_NOFOLLOW. A directory the agent swaps for a link
 * to the data dir between the check and the open changes nothing: the open never goes through
 * names again. Each open does not block (a FIFO swapped in cannot hang the server), checks that
 * what it opened is a regular file, and reads at most what the request allows.
 */
import fs from 'node:fs';
import { open } from 'node:fs/promises';
import path from 'node:path';
import type { FileStamp, ProjectFileRead, ProjectFileRequest, ProjectFiles } from '../../core/workspace/project-files.js';
import { InvalidPathError } from '../../core/workspace/invalid-path-error.js';
import { PathNotFoundError } from '../../core/workspace/path-not-found-error.js';
import { PathOutsideWorkdirError } from '../../core/workspace/path-outside-workdir-error.js';
import { pinInWorkdir, type PinnedPath } from './pin-path.js';

/** O_NONBLOCK: a FIFO opens without waiting for a writer, and is then refused as not a regular file. */
const READ_FLAGS = fs.constants.O_RDONLY | fs.constants.O_NOFOLLOW | fs.constants.O_NONBLOCK;

export class HostProjectFiles implements ProjectFiles {
  async gitRoot(dir: string): Promise<string | null> {
    for (let current = dir; ; current = path.dirname(current)) {
      if (fs.existsSync(path.join(current, '.git'))) return current;
      if (path.dirname(current) === current) return null;
    }
  }

  exists(dir: string, name: string): boolean {
    return fs.existsSync(path.join(dir, name));
  }

  present(dir: string, name: string): boolean {
    try {
      return fs.lstatSync(path.join(dir, name), { throwIfNoEntry: false }) !== undefined;
    } catch {
      // Not a plain "no such entry" (a component is a file, no permission): let the full read say what it is.
      return true;
    }
  }

  async read(request: ProjectFileRequest): Promise<ProjectFileRead> {
    // Most projects have none of the files asked for (CLAUDE.md, .claude/settings.local.json, ...):
    // a missing one is answered by one lstat, a few microseconds, instead of an open or a realpath
    // queued to the thread pool. Nothing at the path means the open (or realpath) below could
    // only fail with ENOENT too; anything there, a dangling symlink included, takes the full read.
    if (!this.present(request.dir, request.name)) return { kind: 'missing' };
    const pinned = await this.pin(request);
    if (pinned.kind !== 'pinned') return pinned;
    try {
      const handle = await open(pinned.path.at(), READ_FLAGS);
      try {
        const stats = await handle.stat();
        if (!stats.isFile() || (request.oversize === 'refuse' && stats.size > request.maxBytes)) return { kind: 'refused' };
        const buffer = Buffer.alloc(request.maxBytes);
        let length = 0;
        while (length < buffer.length) {
          const { bytesRead } = await handle.read(buffer, length, buffer.length - length, length);
          if (bytesRead === 0) break;
          length += bytesRead;
        }
        return { kind: 'text', text: buffer.subarray(0, length).toString('utf8') };
      } finally {
        await handle.close();
      }
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code;
      if (code === 'ENOENT') return { kind: 'missing' };
      // A link where the walk found a file: planted since (a swap), or `never` kept the final link to refuse it here.
      if (code === 'ELOOP' && request.symlinks === 'inside') return { kind: 'refused' };
      return { kind: 'unreadable', message: (error as Error).message };
    } finally {
      await pinned.path.release();
    }
  }

  stamp(file: string): FileStamp | null {
    try {
      const entry = fs.lstatSync(file, { throwIfNoEntry: false });
      if (!entry) return null;
      const own = stampOf(entry);
      if (!entry.isSymbolicLink()) return own;
      // A link's own stamp does not change when its target does: the target's is part of it.
      const target = fs.statSync(file, { throwIfNoEntry: false });
      const through = target ? stampOf(target) : { key: 'dangling', changedMs: 0 };
      return { key: `${own.key}>${through.key}`, changedMs: Math.max(own.changedMs, through.changedMs) };
    } catch (error) {
      // Not plainly absent (no permission, a loop): changed at no known time, so never trusted.
      return { key: `error:${(error as NodeJS.ErrnoException).code ?? 'unknown'}`, changedMs: Number.POSITIVE_INFINITY };
    }
  }

  /**
   * `name` resolved inside `dir` with its parent held open: `inside` follows links that stay in
   * `dir`; `never` keeps a final link as it is, for the O_NOFOLLOW open to refuse.
   */
  private async pin(request: ProjectFileRequest): Promise<{ kind: 'pinned'; path: PinnedPath } | Exclude<ProjectFileRead, { kind: 'text' }>> {
    try {
      return { kind: 'pinned', path: await pinInWorkdir(request.dir, request.name, { mustExist: true, keepFinalSymlink: request.symlinks === 'never' }) };
    } catch (error) {
      if (error instanceof PathNotFoundError) return { kind: 'missing' };
      if (error instanceof PathOutsideWorkdirError || error instanceof InvalidPathError) return { kind: 'refused' };
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') return { kind: 'missing' };
      return { kind: 'unreadable', message: (error as Error).message };
    }
  }
}

function stampOf(stats: fs.Stats): FileStamp {
  return { key: `${stats.dev}:${stats.ino}:${stats.mode}:${stats.size}:${stats.mtimeMs}:${stats.ctimeMs}`, changedMs: Math.max(stats.mtimeMs, stats.ctimeMs) };
}
