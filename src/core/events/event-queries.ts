import { InvalidRequestError, NotFoundError } from '../errors.js';
import { decodePageId, encodePageId } from '../pagination.js';
import type { EventKind, EventSource } from '../schemas/event.js';
import type { EventFilter, EventLog, StoredEvent } from './event-log.js';

export interface EventListQuery {
  kinds?: EventKind[] | undefined;
  sources?: EventSource[] | undefined;
  afterSeq?: number | undefined;
  since?: string | undefined;
  order: 'asc' | 'desc';
  pageId?: string | undefined;
  limit: number;
}

interface EventCursor {
  s: number;
  o: 'asc' | 'desc';
}

const isCursor = (value: unknown): value is EventCursor =>
  typeof value === 'object' &&
  value !== null &&
  Number.isInteger((value as EventCursor).s) &&
  ((value as EventCursor).o === 'asc' || (value as EventCursor).o === 'desc');

/** Reading a conversation's events: pages, counts and single events, straight off the log. */
export class EventQueries {
  constructor(
    private readonly log: EventLog,
    private readonly assertConversation: (id: string) => void,
  ) {}

  /** The firehose's last cursor: `/events/stream?after_seq=<it>` sends only what happens next. */
  firehoseHead(): Promise<number> {
    return this.log.globalHead();
  }

  async list(conversationId: string, query: EventListQuery): Promise<{ items: StoredEvent[]; next_page_id: string | null }> {
    this.assertConversation(conversationId);
    const cursor = query.pageId ? decodePageId(query.pageId, isCursor) : undefined;
    if (cursor && cursor.o !== query.order) {
      throw new InvalidRequestError('invalid_page_id', 'page_id was issued for the other order; pass the same `order` as the first page.');
    }
    const items = await this.log.read(conversationId, { ...toFilter(query), order: query.order, cursorSeq: cursor?.s, limit: query.limit + 1 });
    const more = items.length > query.limit;
    if (more) items.length = query.limit;
    const last = items[items.length - 1];
    return { items, next_page_id: more && last ? encodePageId({ s: last.event.seq, o: query.order }) : null };
  }

  async count(conversationId: string, query: Omit<EventListQuery, 'order' | 'pageId' | 'limit'>): Promise<number> {
    this.assertConversation(conversationId);
    return this.log.count(conversationId, toFilter(query));
  }

  async get(conversationId: string, eventId: string): Promise<StoredEvent> {
    this.assertConversation(conversationId);
    const found = await this.log.findById(conversationId, eventId);
    if (!found) throw new NotFoundError('event', eventId);
    return found;
  }
}

function toFilter(query: Omit<EventListQuery, 'order' | 'pageId' | 'limit'>): EventFilter {
  return {
    kinds: query.kinds,
    sources: query.sources,
    afterSeq: query.afterSeq,
    sinceMs: query.since === undefined ? undefined : Date.parse(query.since),
  };
}
