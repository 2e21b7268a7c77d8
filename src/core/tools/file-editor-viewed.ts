import type { EntryStats } from '../workspace/file-entry-stats.js';

const STATE_KEY = 'file_editor.viewed';

/** A file's identity on disk at one moment: when it changes, someone wrote the file. */
export function fileVersion(stats: Pick<EntryStats, 'mtimeMs' | 'size' | 'ino'>): string {
  return `${stats.ino}:${stats.size}:${stats.mtimeMs}`;
}

/**
 * The files the agent has viewed or written with file_editor in this conversation, with the
 * version it saw: `create` will only overwrite one of these, and an edit of a file that changed
 * since is flagged.
 */
export class ViewedFiles {
  private readonly versions = new Map<string, string>();

  static from(state: Map<string, unknown>): ViewedFiles {
    let viewed = state.get(STATE_KEY) as ViewedFiles | undefined;
    if (!viewed) {
      viewed = new ViewedFiles();
      state.set(STATE_KEY, viewed);
    }
    return viewed;
  }

  remember(absolutePath: string, version: string): void {
    this.versions.set(absolutePath, version);
  }

  has(absolutePath: string): boolean {
    return this.versions.has(absolutePath);
  }

  /** True when the file was seen before and is not the version seen then. */
  changedSince(absolutePath: string, version: string): boolean {
    const seen = this.versions.get(absolutePath);
    return seen !== undefined && seen !== version;
  }
}
