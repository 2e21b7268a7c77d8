import type { FileStamp } from '../workspace/project-files.js';
import type { CatalogFiles } from './catalog-files.js';
import { loadCatalog, type ProjectCatalog } from './project-catalog.js';
import type { AgentDefinitions } from '../schemas/catalog.js';

/**
 * Entries changed this recently may change again within the same timestamp tick without their
 * stamp changing (git's "racily clean" case): a catalog that read any of them is not kept.
 * Linux stamps files from a coarse clock (a jiffy, 1-10 ms); 2 s covers coarser filesystems.
 */
const RACY_MS = 2000;
/** Conversations whose catalog is kept (the most recently used); an idle release drops its conversation's. */
const MAX_ENTRIES = 64;

export interface CatalogCacheDeps {
  /** What is at an absolute path now (ProjectFiles.stamp). */
  stamp: (file: string) => FileStamp | null;
  /** Wall-clock ms, the clock file times are stamped with. */
  now: () => number;
  /** The server's skills directory (AGENTD_SKILLS_DIR), read for every conversation; null without one. */
  server: CatalogFiles | null;
}

interface Entry {
  /** What the catalog was read from besides files: the roots and the conversation's `agents`. */
  inputs: string;
  /** Every path the read looked at (each directory listed, each file read, and the directories on the way), with its stamp then; null: nothing there. */
  stamps: Map<string, string | null>;
  catalog: ProjectCatalog;
}

/**
 * A conversation's catalog (project-catalog.ts), read again only when something it was read
 * from changed. Reading a catalog cost a pinned walk, an open and a frontmatter parse per file at
 * every run start (bench P18); checking it costs one lstat per path it looked at.
 * Each path's stamp is taken before the path is listed or read, so a change made during the read
 * shows as a changed stamp at the next check; a read that looked at anything changed in the last
 * RACY_MS is not kept. A symlink's stamp includes its target's. The cached catalog is the one
 * the same files gave, read through the same guarded reads: what they refused stays refused.
 */
export class CatalogCache {
  private readonly entries = new Map<string, Entry>();

  constructor(private readonly deps: CatalogCacheDeps) {}

  /** The catalog of conversation `key`: its workdir's files (`project`, null when not read), the server's skills, its `agents`. */
  async load(key: string, sources: { project: CatalogFiles | null; agents: AgentDefinitions | undefined }): Promise<ProjectCatalog> {
    const { server } = this.deps;
    // Nothing to read from files: nothing worth keeping.
    if (!sources.project && !server) return loadCatalog({ ...sources, server });
    const inputs = JSON.stringify([sources.project?.root ?? null, sources.agents ?? null]);
    const cached = this.entries.get(key);
    if (cached && cached.inputs === inputs && this.unchanged(cached.stamps)) {
      // Most recently used last: the first entry is the one to evict.
      this.entries.delete(key);
      this.entries.set(key, cached);
      return cached.catalog;
    }
    const startedMs = this.deps.now();
    const stamps = new Map<string, string | null>();
    let racy = false;
    const stampPath = (root: string, relative: string) => {
      let absolute = root;
      for (const part of relative.split('/')) {
        if (part === '' || part === '.') continue;
        absolute = absolute.endsWith('/') ? `${absolute}${part}` : `${absolute}/${part}`;
        if (stamps.has(absolute)) continue;
        const stamp = this.deps.stamp(absolute);
        stamps.set(absolute, stamp?.key ?? null);
        if (stamp && stamp.changedMs >= startedMs - RACY_MS) racy = true;
      }
    };
    const watched = (files: CatalogFiles | null): CatalogFiles | null =>
      files && {
        root: files.root,
        list: (dir) => {
          stampPath(files.root, dir);
          return files.list(dir);
        },
        read: (file, maxBytes) => {
          stampPath(files.root, file);
          return files.read(file, maxBytes);
        },
      };
    const catalog = await loadCatalog({ project: watched(sources.project), server: watched(server), agents: sources.agents });
    this.entries.delete(key);
    if (!racy) {
      if (this.entries.size >= MAX_ENTRIES) this.entries.delete(this.entries.keys().next().value!);
      this.entries.set(key, { inputs, stamps, catalog });
    }
    return catalog;
  }

  /** The conversation was released after its idle timeout: its entry goes. */
  forget(key: string): void {
    this.entries.delete(key);
  }

  private unchanged(stamps: Map<string, string | null>): boolean {
    for (const [file, key] of stamps) if ((this.deps.stamp(file)?.key ?? null) !== key) return false;
    return true;
  }
}
