/**
 * The changes of the set of secret values the conversations hold (a record added or removed, its
 * secrets set), numbered: an index of every value (the log's, SecretService.maskAny) made at one
 * revision takes the values of the conversations changed since, rather than being made again.
 */
export class SecretChanges {
  /** Bumped at each change. */
  revision = 0;
  /** Whose secrets changed at each of the last revisions, the oldest first (null: many at once, a load). */
  private changes: (string | null)[] = [];

  /** The conversation's secrets changed (null: many conversations' at once, a load). */
  changed(id: string | null): void {
    this.revision += 1;
    this.changes.push(id);
    if (this.changes.length >= 2 * KEPT) this.changes = this.changes.slice(-KEPT);
  }

  /**
   * The conversations whose secrets changed after `revision` (added, their secrets set, removed);
   * null when that is further back than is kept, or many changed at once.
   */
  since(revision: number): string[] | null {
    const count = this.revision - revision;
    if (count < 0 || count > this.changes.length) return null;
    const changes = this.changes.slice(this.changes.length - count);
    return changes.includes(null) ? null : (changes as string[]);
  }
}

/** Changes kept for `since` (between one and two times this many). */
const KEPT = 1000;
