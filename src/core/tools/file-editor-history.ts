/**
 * file_editor's undo history, kept in the conversation's tool state (lost on restart). Each
 * edit records the file's previous bytes (or that it did not exist). Bounded per file and in
 * total bytes: the oldest entries are forgotten first.
 */
export const EDIT_HISTORY_STATE_KEY = 'file_editor.history';

const MAX_ENTRIES_PER_FILE = 20;
const MAX_TOTAL_BYTES = 64 * 1024 * 1024;

interface HistoryEntry {
  /** Content before the edit; null when the edit created the file. */
  previous: Buffer | null;
  sequence: number;
}

export class EditHistory {
  private readonly entries = new Map<string, HistoryEntry[]>();
  private totalBytes = 0;
  private sequence = 0;

  /** The history stored in `state`, created on first use. */
  static from(state: Map<string, unknown>): EditHistory {
    const existing = state.get(EDIT_HISTORY_STATE_KEY);
    if (existing instanceof EditHistory) return existing;
    const created = new EditHistory();
    state.set(EDIT_HISTORY_STATE_KEY, created);
    return created;
  }

  record(filePath: string, previous: Buffer | null): void {
    const list = this.entries.get(filePath) ?? [];
    list.push({ previous, sequence: ++this.sequence });
    this.entries.set(filePath, list);
    this.totalBytes += previous?.length ?? 0;
    if (list.length > MAX_ENTRIES_PER_FILE) this.forget(filePath, 0);
    while (this.totalBytes > MAX_TOTAL_BYTES && this.evictOldest()) {
      // keep evicting
    }
  }

  /** The most recent entry for the file, removed; undefined when there is nothing to undo. */
  pop(filePath: string): { previous: Buffer | null } | undefined {
    const list = this.entries.get(filePath);
    const entry = list?.pop();
    if (!entry) return undefined;
    this.totalBytes -= entry.previous?.length ?? 0;
    if (list && list.length === 0) this.entries.delete(filePath);
    return { previous: entry.previous };
  }

  depth(filePath: string): number {
    return this.entries.get(filePath)?.length ?? 0;
  }

  private forget(filePath: string, index: number): void {
    const list = this.entries.get(filePath);
    const [removed] = list?.splice(index, 1) ?? [];
    if (removed) this.totalBytes -= removed.previous?.length ?? 0;
    if (list && list.length === 0) this.entries.delete(filePath);
  }

  private evictOldest(): boolean {
    let oldest: { filePath: string; sequence: number } | undefined;
    for (const [filePath, list] of this.entries) {
      const first = list[0];
      if (first && (!oldest || first.sequence < oldest.sequence)) oldest = { filePath, sequence: first.sequence };
    }
    if (!oldest) return false;
    this.forget(oldest.filePath, 0);
    return true;
  }
}
