import { CUT_MARKER } from '../tools/tool-output.js';

/** The most prefix bits a masker has (128 KiB): enough to stay sparse for 16,384 values. */
const MAX_PREFIX_BITS = 1 << 20;
/** Values shorter than this are not masked: masking "a" or "1" would shred every text. */
export const MIN_MASKED_LENGTH = 4;
/**
 * The markers put where text was cut (captured, so split() keeps them): the commands API's, and
 * the line-numbered one of tool output.
 */
const TRUNCATION_MARKER = new RegExp(`(\\n\\[\\.\\.\\. \\d+ characters truncated \\.\\.\\.\\]\\n|${CUT_MARKER.source.slice(1, -1)})`);

/**
 * A hash of the 4 characters at `at`: the key of the prefix index (a hit is confirmed with
 * startsWith). The multiply-xor mixing spreads similar text apart (a plain `h * 31 + c` makes
 * "Aa" and "BB" collide, so ordinary text would keep landing in busy buckets), and the result
 * stays within 30 bits so V8 keeps it a small integer.
 */
function prefixKey(text: string, at: number): number {
  let hash = Math.imul(text.charCodeAt(at), 0x9e3779b1);
  hash = Math.imul(hash ^ text.charCodeAt(at + 1), 0x85ebca6b);
  hash = Math.imul(hash ^ text.charCodeAt(at + 2), 0xc2b2ae35);
  hash = Math.imul(hash ^ text.charCodeAt(at + 3), 0x27d4eb2f);
  return (hash ^ (hash >>> 15)) & 0x3fffffff;
}

function nextPowerOfTwo(n: number): number {
  let power = 1;
  while (power < n) power *= 2;
  return power;
}

/** A SecretMasker being made a step at a time (SecretMasker.inSteps). */
export interface MaskerInSteps {
  /** Up to `count` more values' work; whether any is left. */
  step(count: number): boolean;
  /** The masker, with what is left done now. */
  finish(): SecretMasker;
}

/**
 * Replaces secret values with `<secret:NAME>` in text and in every string of a JSON-like value.
 * At each position the longest value wins, so a secret that contains another is masked whole.
 * Values are indexed by their first 4 characters: masking is one scan of the text with a map
 * lookup per position, however many secrets there are (the log scrubber holds every
 * conversation's).
 */
export class SecretMasker {
  private readonly namesByValue = new Map<string, string>();
  private readonly byPrefix = new Map<number, string[]>();
  /**
   * One bit per prefix key (modulo its size), set for the keys of the values held: a position
   * whose bit is clear holds no value, without a map lookup. Sized at about 64 bits per value, so
   * that it stays sparse (few false hits) and small enough to stay in the CPU's cache: scanning
   * text costs about the same with one value as with ten thousand.
   */
  private readonly prefixBits: Uint32Array;
  private readonly prefixMask: number;
  /** The values while they are being indexed (`inSteps`), in the order given; how many of them are. */
  private pending: [string, string][];
  private indexed = 0;

  /** Secrets as a name → value map, or as (name, value) pairs (several values may share a name). */
  constructor(secrets: Record<string, string> | Iterable<readonly [string, string]>, options: { indexLater?: boolean } = {}) {
    const pairs = Symbol.iterator in secrets ? [...(secrets as Iterable<readonly [string, string]>)] : Object.entries(secrets);
    // In the order given, not longest first: indexValue puts each value before any shorter one of its bucket.
    this.pending = pairs.filter(([, value]) => value.length >= MIN_MASKED_LENGTH) as [string, string][];
    const bits = Math.min(MAX_PREFIX_BITS, Math.max(1 << 10, nextPowerOfTwo(this.pending.length * 64)));
    this.prefixBits = new Uint32Array(bits >>> 5);
    this.prefixMask = bits - 1;
    if (!options.indexLater) this.index(this.pending.length);
  }

  /**
   * A masker of many values made a step at a time (the log's masker of every conversation's
   * secrets: tens of ms in one go with 10,000 of them): each step collects up to `count` more
   * values from `source`, or once they are all in, indexes up to `count` of them. `finish` does
   * what is left at once, for when the masker is needed before its last step.
   */
  static inSteps(source: Iterator<readonly [string, string]>): MaskerInSteps {
    const pairs: (readonly [string, string])[] = [];
    let masker: SecretMasker | null = null;
    const step = (count: number): boolean => {
      if (masker) return masker.index(count);
      for (let i = 0; i < count; i++) {
        const next = source.next();
        if (next.done) {
          masker = new SecretMasker(pairs, { indexLater: true });
          return true;
        }
        pairs.push(next.value);
      }
      return true;
    };
    return {
      step,
      finish: () => {
        while (step(Number.POSITIVE_INFINITY));
        return masker!;
      },
    };
  }

  /** Indexes up to `count` more of the pending values, in order; whether any are left. */
  private index(count: number): boolean {
    const end = Math.min(this.indexed + count, this.pending.length);
    for (let i = this.indexed; i < end; i++) {
      const [name, value] = this.pending[i]!;
      this.indexValue(name, value);
    }
    this.indexed = end;
    if (end < this.pending.length) return true;
    this.pending = [];
    this.indexed = 0;
    return false;
  }

  /**
   * More values, each indexed where a masker made with them all would have it (longest first in
   * its bucket; a value held already takes the new name, as the last of the pairs would): the log's
   * masker of every conversation takes a conversation's values as it gains them.
   */
  add(pairs: Iterable<readonly [string, string]>): void {
    // Those still pending first, in their order.
    this.index(this.pending.length);
    for (const [name, value] of pairs) if (value.length >= MIN_MASKED_LENGTH) this.indexValue(name, value);
  }

  /** One value, in its bucket before any shorter one. A value held twice keeps its first place and takes the last name, as a Map built from the pairs would. */
  private indexValue(name: string, value: string): void {
    if (this.namesByValue.has(value)) {
      this.namesByValue.set(value, name);
      return;
    }
    this.namesByValue.set(value, name);
    const key = prefixKey(value, 0);
    const bit = key & this.prefixMask;
    this.prefixBits[bit >>> 5]! |= 1 << (bit & 31);
    const values = this.byPrefix.get(key);
    if (!values) return void this.byPrefix.set(key, [value]);
    const shorter = values.findIndex((held) => held.length < value.length);
    values.splice(shorter < 0 ? values.length : shorter, 0, value);
  }

  /** How many values it masks. */
  get size(): number {
    return this.namesByValue.size;
  }

  /**
   * How many values its prefix bits were sized for (about 64 bits each): past it, text scans find
   * more false hits, which a masker made again with all the values would not. Unbounded once they
   * are as many as they can be.
   */
  get capacity(): number {
    const bits = this.prefixMask + 1;
    return bits >= MAX_PREFIX_BITS ? Number.POSITIVE_INFINITY : bits / 64;
  }

  get empty(): boolean {
    return this.namesByValue.size === 0;
  }

  maskText(text: string): string {
    if (this.namesByValue.size === 0 || text.length < MIN_MASKED_LENGTH) return text;
    // Every marker starts a line with `[`: most texts are passed over without running the pattern.
    if (text.includes('\n[') && TRUNCATION_MARKER.test(text)) return this.maskAroundCuts(text);
    return this.maskWhole(text);
  }

  /**
   * Output cut in the middle (`[... N characters truncated ...]`, `[lines A-B of N cut; …]`) may have cut a secret too: the
   * piece before a cut can end with the start of a value and the piece after it begin with the
   * end of one, neither of which is a whole value. Each piece is masked on its own, and such a
   * partial value beside a cut is masked as well.
   */
  private maskAroundCuts(text: string): string {
    const parts = text.split(TRUNCATION_MARKER);
    return parts
      .map((part, index) => {
        if (index % 2 === 1) return part; // the marker's own text
        let start = '';
        let end = '';
        let middle = part;
        if (index > 0) {
          const partial = this.partialAtStart(middle);
          if (partial) {
            start = `<secret:${partial.name}>`;
            middle = middle.slice(partial.length);
          }
        }
        if (index < parts.length - 1) {
          const partial = this.partialAtEnd(middle);
          if (partial) {
            end = `<secret:${partial.name}>`;
            middle = middle.slice(0, middle.length - partial.length);
          }
        }
        return start + this.maskWhole(middle) + end;
      })
      .join('');
  }

  /** The longest end of `text` that is the beginning (not all) of a value, with its name. */
  private partialAtEnd(text: string): { length: number; name: string } | null {
    let best: { length: number; name: string } | null = null;
    for (const [value, name] of this.namesByValue) {
      for (let length = Math.min(value.length - 1, text.length); length > (best?.length ?? 0); length--) {
        if (text.endsWith(value.slice(0, length))) {
          best = { length, name };
          break;
        }
      }
    }
    return best;
  }

  /** The longest beginning of `text` that is the end (not all) of a value, with its name. */
  private partialAtStart(text: string): { length: number; name: string } | null {
    let best: { length: number; name: string } | null = null;
    for (const [value, name] of this.namesByValue) {
      for (let length = Math.min(value.length - 1, text.length); length > (best?.length ?? 0); length--) {
        if (text.startsWith(value.slice(value.length - length))) {
          best = { length, name };
          break;
        }
      }
    }
    return best;
  }

  private maskWhole(text: string): string {
    if (text.length < MIN_MASKED_LENGTH) return text;
    let out = '';
    let copied = 0;
    let at = 0;
    const bits = this.prefixBits;
    const mask = this.prefixMask;
    while (at <= text.length - MIN_MASKED_LENGTH) {
      const key = prefixKey(text, at);
      const bit = key & mask;
      if ((bits[bit >>> 5]! & (1 << (bit & 31))) === 0) {
        at += 1;
        continue;
      }
      const candidates = this.byPrefix.get(key);
      const value = candidates?.find((candidate) => text.startsWith(candidate, at));
      if (value === undefined) {
        at += 1;
        continue;
      }
      out += `${text.slice(copied, at)}<secret:${this.namesByValue.get(value)}>`;
      at += value.length;
      copied = at;
    }
    return copied === 0 ? text : out + text.slice(copied);
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
    if (this.namesByValue.size === 0) return value;
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
