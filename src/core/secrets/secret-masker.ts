/** Values shorter than this are not masked: masking "a" or "1" would shred every text. */
export const MIN_MASKED_LENGTH = 4;

/**
 * Replaces secret values with `<secret:NAME>` in text and in every string of a JSON-like value.
 * Longer values are replaced first, so a secret that contains another is masked whole.
 */
export class SecretMasker {
  private readonly pattern: RegExp | null;
  private readonly namesByValue: Map<string, string>;

  constructor(secrets: Record<string, string>) {
    const entries = Object.entries(secrets).filter(([, value]) => value.length >= MIN_MASKED_LENGTH);
    entries.sort((a, b) => b[1].length - a[1].length);
    this.namesByValue = new Map(entries.map(([name, value]) => [value, name]));
    this.pattern = entries.length > 0 ? new RegExp(entries.map(([, value]) => escapeRegExp(value)).join('|'), 'g') : null;
  }

  get empty(): boolean {
    return this.pattern === null;
  }

  maskText(text: string): string {
    if (!this.pattern || text.length < MIN_MASKED_LENGTH) return text;
    return text.replace(this.pattern, (value) => `<secret:${this.namesByValue.get(value)}>`);
  }

  /**
   * How much of the beginning of `text` is settled: text that follows cannot change how it is
   * masked. The rest could still become (part of) a secret value, so text streaming in pieces
   * holds it back (see StreamingMasker).
   */
  settledLength(text: string): number {
    const values = [...this.namesByValue.keys()];
    let cut = text.length;
    // From here on, the rest could be the beginning of a secret value...
    for (const value of values) {
      for (let at = Math.max(0, text.length - value.length + 1); at < cut; at++) {
        if (text.charCodeAt(at) === value.charCodeAt(0) && value.startsWith(text.slice(at))) {
          cut = at;
          break;
        }
      }
    }
    // ...and the cut may not split a whole one.
    for (let moved = true; moved; ) {
      moved = false;
      for (const value of values) {
        const at = text.indexOf(value, Math.max(0, cut - value.length + 1));
        if (at !== -1 && at < cut) {
          cut = at;
          moved = true;
        }
      }
    }
    return cut;
  }

  /** A copy of the value with every string masked (objects and arrays walked; other values kept). */
  maskValue<T>(value: T): T {
    if (!this.pattern) return value;
    return this.walk(value) as T;
  }

  private walk(value: unknown): unknown {
    if (typeof value === 'string') return this.maskText(value);
    if (Array.isArray(value)) return value.map((item) => this.walk(item));
    if (value !== null && typeof value === 'object') {
      const out: Record<string, unknown> = {};
      for (const [key, item] of Object.entries(value)) out[key] = this.walk(item);
      return out;
    }
    return value;
  }
}

function escapeRegExp(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}
