import { createHmac, timingSafeEqual } from 'node:crypto';
import type { FeedNotice } from './event-feed.js';

/**
 * Signs the notices instances send each other (NATS, LISTEN/NOTIFY) with a key every instance
 * derives from the shared AGENTD_SECRET_KEY, so that a process that can reach the feed but does
 * not hold the key cannot put an event into live streams or move an instance's position.
 */
export class NoticeSeal {
  constructor(private readonly key: Buffer) {}

  sign(notice: FeedNotice): string {
    return createHmac('sha256', this.key).update(canonical(notice)).digest('base64url');
  }

  /** The notice as sent, or null when its MAC is missing or wrong (or it is not a notice). */
  open(payload: string): FeedNotice | null {
    let parsed: unknown;
    try {
      parsed = JSON.parse(payload);
    } catch {
      return null;
    }
    if (!isSealedNotice(parsed)) return null;
    const { mac } = parsed;
    const notice: FeedNotice = { globalCursor: parsed.globalCursor, conversationId: parsed.conversationId, seq: parsed.seq, ...(parsed.json !== undefined && { json: parsed.json }) };
    const expected = Buffer.from(this.sign(notice));
    const given = Buffer.from(mac);
    return given.length === expected.length && timingSafeEqual(given, expected) ? notice : null;
  }

  /** The notice with its MAC, as a payload to send. */
  seal(notice: FeedNotice): string {
    return JSON.stringify({ ...notice, mac: this.sign(notice) });
  }
}

function canonical(notice: FeedNotice): string {
  return JSON.stringify([notice.globalCursor, notice.conversationId, notice.seq, notice.json ?? null]);
}

function isSealedNotice(value: unknown): value is FeedNotice & { mac: string } {
  if (typeof value !== 'object' || value === null) return false;
  const v = value as Record<string, unknown>;
  return (
    Number.isSafeInteger(v.globalCursor) &&
    typeof v.conversationId === 'string' &&
    Number.isSafeInteger(v.seq) &&
    (v.json === undefined || typeof v.json === 'string') &&
    typeof v.mac === 'string'
  );
}
