/**
 * The project's configuration files (core/workspace/project-files.ts) on the host's disk. They
 * may lie above the workdir (AGENTS.md up to the repository root), so they are not read through
 * the workdir's pinned file system: each read opens without blocking (a FIFO swapped in cannot
 * hang the server), checks that what it opened is a regular file, and reads at most what the
 * request allows. A symlink is refused (O_NOFOLLOW) or followed only to a target inside the
 * directory it was found in.
 */
import fs from 'node:fs';
import { open, realpath } from 'node:fs/promises';
import path from 'node:path';
import type { FileStamp, ProjectFileRead, ProjectFileRequest, ProjectFiles } from '../../core/workspace/project-files.js';

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
    try {
      const file = await this.target(request);
      if (file === null) return { kind: 'refused' };
      const noFollow = request.symlinks === 'never' ? fs.constants.O_NOFOLLOW : 0;
      const handle = await open(file, fs.constants.O_RDONLY | fs.constants.O_NONBLOCK | noFollow);
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
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') return { kind: 'missing' };
      return { kind: 'unreadable', message: (error as Error).message };
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

  /** The path to open: as given, or (`inside`) the symlink's real target when it stays inside `dir`; null when it leaves it. */
  private async target(request: ProjectFileRequest): Promise<string | null> {
    const file = path.join(request.dir, request.name);
    if (request.symlinks === 'never') return file;
    const real = await realpath(file);
    const realDir = await realpath(request.dir);
    if (real !== path.join(realDir, request.name) && !real.startsWith(`${realDir}${path.sep}`)) return null;
    return real;
  }
}

function stampOf(stats: fs.Stats): FileStamp {
  return { key: `${stats.dev}:${stats.ino}:${stats.mode}:${stats.size}:${stats.mtimeMs}:${stats.ctimeMs}`, changedMs: Math.max(stats.mtimeMs, stats.ctimeMs) };
}
