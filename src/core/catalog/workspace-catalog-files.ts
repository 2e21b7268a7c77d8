import type { WorkspaceFiles } from '../workspace/workspace-files.js';
import type { CatalogFiles } from './catalog-files.js';

/**
 * CatalogFiles over the workspace guard: every path is pinned inside `root` (WorkspaceFiles), so
 * a skill, command or agent file that is (or goes through) a symlink out of it is refused, never
 * read. `key` is what `files` knows the root by (a conversation id).
 */
export function workspaceCatalogFiles(options: { files: WorkspaceFiles; key: string; root: string }): CatalogFiles {
  const { files, key, root } = options;
  return {
    root,
    async list(dir) {
      try {
        const page = await files.list(key, { path: dir, recursive: false, limit: 500 });
        return page.items.map((item) => ({ name: item.name, type: item.type }));
      } catch (error) {
        const code = (error as { code?: string }).code;
        if (code === 'path_not_found' || code === 'not_a_directory') return [];
        throw error;
      }
    },
    async read(file, maxBytes) {
      const opened = await files.open(key, file);
      try {
        if (opened.size > maxBytes) throw new Error(`larger than ${Math.round(maxBytes / 1024)} KiB`);
        const buffer = Buffer.alloc(maxBytes + 1);
        const bytesRead = await opened.handle.read(buffer, 0);
        if (bytesRead > maxBytes) throw new Error(`larger than ${Math.round(maxBytes / 1024)} KiB`);
        return buffer.subarray(0, bytesRead).toString('utf8');
      } finally {
        await opened.handle.close();
      }
    },
  };
}
