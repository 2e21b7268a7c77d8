import path from 'node:path';
import type { ToolContext } from './tool.js';

/**
 * For a path that does not exist: names in the nearest existing directory that look like it
 * (file_editor's hint). Directories are read through the pinned workdir file system, so a name
 * is never listed from outside the workdir.
 */
export async function similarNames(context: Pick<ToolContext, 'workdir' | 'workdirFs'>, userPath: string): Promise<string> {
  const { workdir } = context;
  const wanted = path.basename(userPath).toLowerCase();
  let dir = path.resolve(workdir, path.dirname(userPath));
  if (!dir.startsWith(workdir)) return '';
  let entries: string[] | undefined;
  for (;;) {
    entries = await namesIn(context, path.relative(workdir, dir) || '.');
    if (entries) break;
    if (dir === workdir || !dir.startsWith(workdir)) return '';
    dir = path.dirname(dir);
  }
  const stem = wanted.replace(/\.[^.]*$/, '');
  const close = entries
    .filter((name) => {
      const lower = name.toLowerCase();
      return lower !== wanted && (lower.includes(stem) || stem.includes(lower.replace(/\.[^.]*$/, '')) || lower.replace(/\.[^.]*$/, '') === stem);
    })
    .slice(0, 5)
    .map((name) => path.relative(workdir, path.join(dir, name)) || name);
  return close.length > 0 ? ` Similar names: ${close.join(', ')}.` : '';
}

/** The names in a directory of the workdir, or undefined when it is missing or not a directory. */
async function namesIn(context: Pick<ToolContext, 'workdir' | 'workdirFs'>, relative: string): Promise<string[] | undefined> {
  const pinned = await context.workdirFs.pin(context.workdir, relative, { mustExist: true }).catch(() => undefined);
  if (!pinned) return undefined;
  try {
    const names: string[] = [];
    for await (const item of pinned.walk()) names.push(item.relativePath);
    return names;
  } catch {
    return undefined;
  } finally {
    await pinned.release();
  }
}
