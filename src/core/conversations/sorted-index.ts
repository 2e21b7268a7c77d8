/** The order of items by (key, id): a record's created_at or updated_at, ties by id. */
export function compareByKeyThenId(keyA: string, idA: string, keyB: string, idB: string): number {
  return keyA < keyB ? -1 : keyA > keyB ? 1 : idA < idB ? -1 : idA > idB ? 1 : 0;
}

/**
 * Items kept sorted by (key, id) so that a page after a cursor is found by binary search and
 * read in O(limit). Used for conversations by created_at and by updated_at.
 */
export class SortedIndex<T extends { id: string }> {
  private items: T[] = [];

  constructor(private readonly keyOf: (item: T) => string) {}

  insert(item: T): void {
    this.items.splice(this.position(this.keyOf(item), item.id), 0, item);
  }

  /**
   * Many items at once (start-up): one sort instead of an insertion each, and none when they
   * are already in order (as a snapshot of this order, or ids that sort like their times, give them).
   */
  insertAll(items: readonly T[]): void {
    const all = [...this.items, ...items];
    if (!this.inOrder(all)) all.sort((a, b) => this.compare(a, b));
    this.items = all;
  }

  private compare(a: T, b: T): number {
    return compareByKeyThenId(this.keyOf(a), a.id, this.keyOf(b), b.id);
  }

  private inOrder(items: readonly T[]): boolean {
    for (let i = 1; i < items.length; i++) if (this.compare(items[i - 1]!, items[i]!) > 0) return false;
    return true;
  }

  remove(item: T, key = this.keyOf(item)): void {
    const at = this.position(key, item.id);
    if (this.items[at] === item) this.items.splice(at, 1);
    else {
      const fallback = this.items.indexOf(item);
      if (fallback >= 0) this.items.splice(fallback, 1);
    }
  }

  /** Re-place an item whose key changed from `oldKey`. */
  update(item: T, oldKey: string): void {
    this.remove(item, oldKey);
    this.insert(item);
  }

  /**
   * Up to `limit` items strictly after the cursor in the given order that pass `filter`, and
   * whether more remain.
   */
  page(options: { order: 'asc' | 'desc'; after?: { key: string; id: string }; limit: number; filter?: (item: T) => boolean }): { items: T[]; more: boolean } {
    const { order, after, limit, filter } = options;
    const out: T[] = [];
    if (order === 'asc') {
      let at = after ? this.position(after.key, after.id) : 0;
      if (after && this.items[at] && this.keyOf(this.items[at]!) === after.key && this.items[at]!.id === after.id) at += 1;
      for (; at < this.items.length; at++) {
        const item = this.items[at]!;
        if (filter && !filter(item)) continue;
        if (out.length === limit) return { items: out, more: true };
        out.push(item);
      }
    } else {
      let at = after ? this.position(after.key, after.id) - 1 : this.items.length - 1;
      for (; at >= 0; at--) {
        const item = this.items[at]!;
        if (filter && !filter(item)) continue;
        if (out.length === limit) return { items: out, more: true };
        out.push(item);
      }
    }
    return { items: out, more: false };
  }

  get size(): number {
    return this.items.length;
  }

  /** All items, in order. */
  ordered(): readonly T[] {
    return this.items;
  }

  /** First position whose (key, id) is >= (key, id). */
  private position(key: string, id: string): number {
    let low = 0;
    let high = this.items.length;
    while (low < high) {
      const mid = (low + high) >>> 1;
      const item = this.items[mid]!;
      const itemKey = this.keyOf(item);
      if (itemKey < key || (itemKey === key && item.id < id)) low = mid + 1;
      else high = mid;
    }
    return low;
  }
}
