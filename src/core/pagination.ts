import { InvalidRequestError } from './errors.js';

/** Opaque page cursors: base64url JSON, validated on the way back in. */
export function encodePageId(value: Record<string, unknown>): string {
  return Buffer.from(JSON.stringify(value), 'utf8').toString('base64url');
}

export function decodePageId<T>(pageId: string, isValid: (value: unknown) => value is T): T {
  let value: unknown;
  try {
    value = JSON.parse(Buffer.from(pageId, 'base64url').toString('utf8'));
  } catch {
    value = undefined;
  }
  if (!isValid(value)) throw new InvalidRequestError('invalid_page_id', 'page_id is not a cursor this server issued.', { page_id: pageId });
  return value;
}

export interface Page<T> {
  items: T[];
  next_page_id: string | null;
}

/** A keyset cursor: the sort key and id of the last item of the previous page. */
export interface KeyCursor {
  k: string;
  i: string;
}

export const isKeyCursor = (value: unknown): value is KeyCursor =>
  typeof value === 'object' && value !== null && typeof (value as KeyCursor).k === 'string' && typeof (value as KeyCursor).i === 'string';
