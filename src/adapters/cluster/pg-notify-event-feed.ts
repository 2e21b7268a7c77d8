/**
 * The event feed over PostgreSQL LISTEN/NOTIFY, for deployments without NATS. A notification
 * sent inside the append's transaction is delivered only if it commits, and in commit order;
 * its payload is limited to 8,000 bytes, so it carries the position, not the event.
 */
import type { Sql } from 'postgres';
import type { EventFeed, FeedNotice } from './event-feed.js';
import type { NoticeSeal } from './notice-seal.js';

const CHANNEL = 'agentd_events';

export class PgNotifyEventFeed implements EventFeed {
  readonly name = 'postgres' as const;
  private unlisten: (() => Promise<void>) | null = null;

  constructor(
    private readonly sql: Sql,
    private readonly seal: NoticeSeal,
    private readonly onForged: () => void = () => {},
  ) {}

  async publish(notice: FeedNotice): Promise<void> {
    await this.sql`SELECT pg_notify(${CHANNEL}, ${this.seal.seal({ globalCursor: notice.globalCursor, conversationId: notice.conversationId, seq: notice.seq })})`;
  }

  async listen(listener: (notice: FeedNotice) => void): Promise<void> {
    const { unlisten } = await this.sql.listen(CHANNEL, (payload) => {
      // Any database session may NOTIFY this channel: only a notice that verifies is believed.
      const notice = this.seal.open(payload);
      if (notice) listener(notice);
      else this.onForged();
    });
    this.unlisten = unlisten;
  }

  async close(): Promise<void> {
    await this.unlisten?.();
  }
}
