/**
 * One page of a resumable walk, and its opaque cursor. The cursor holds the last path the page
 * consumed and a fingerprint of the query, so a page_id is refused when replayed against a
 * different listing or search.
 */
import { createHash } from 'node:crypto';
import { InvalidRequestError } from '../errors.js';
import { decodePageId, encodePageId } from '../pagination.js';
import type { ResumableWalkItem } from './walk-entry.js';

export interface WalkPageOptions<T> {
  walk: AsyncGenerator<ResumableWalkItem>;
  limit: number;
  /** Entries examined before a page stops short; the next page carries on from there. */
  budget: number;
  /** The page item for an entry, or undefined when the entry does not belong in the page. */
  toItem: (item: ResumableWalkItem) => T | undefined;
}

export interface WalkPage<T> {
  items: T[];
  /** Path (relative to the walk's start) to resume after, or null when the walk is complete. */
  resumeAfter: string | null;
}

export async function collectWalkPage<T>(options: WalkPageOptions<T>): Promise<WalkPage<T>> {
  const items: T[] = [];
  let lastConsumed: string | null = null;
  let examined = 0;
  try {
    for await (const entry of options.walk) {
      const item = options.toItem(entry);
      if (item !== undefined) {
        // One match past the limit proves there is a next page; it is not consumed.
        if (items.length === options.limit) return { items, resumeAfter: lastConsumed };
        items.push(item);
      }
      lastConsumed = entry.relativePath;
      examined += 1;
      if (examined >= options.budget) return { items, resumeAfter: lastConsumed };
    }
  } finally {
    await options.walk.return(undefined);
  }
  return { items, resumeAfter: null };
}

interface WalkCursor {
  q: string;
  a: string;
}

/** A short fingerprint of what a page answers (route, directory, flags, pattern). */
export function queryFingerprint(query: Record<string, unknown>): string {
  return createHash('sha256').update(JSON.stringify(query)).digest('base64url').slice(0, 16);
}

export function encodeWalkCursor(options: { fingerprint: string; resumeAfter: string | null }): string | null {
  return options.resumeAfter === null ? null : encodePageId({ q: options.fingerprint, a: options.resumeAfter });
}

/** The segments to resume after; [] without a page_id. */
export function decodeWalkCursor(options: { fingerprint: string; pageId: string | undefined }): string[] {
  if (options.pageId === undefined) return [];
  const cursor = decodePageId(options.pageId, isWalkCursor);
  if (cursor.q !== options.fingerprint) {
    throw new InvalidRequestError('invalid_page_id', 'page_id belongs to a different listing or search; start again without it.', { page_id: options.pageId });
  }
  return cursor.a.split('/');
}

function isWalkCursor(value: unknown): value is WalkCursor {
  if (typeof value !== 'object' || value === null) return false;
  const { q, a } = value as Partial<WalkCursor>;
  return typeof q === 'string' && typeof a === 'string' && a.length > 0;
}
