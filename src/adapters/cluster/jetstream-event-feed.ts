/**
 * The event feed over NATS JetStream: each append is published to
 * `agentd.<cluster>.events.<conversation>` in one stream per cluster (`AGENTD_EVENTS_<cluster>`,
 * deduplicated by event position, kept for a bounded time), and every instance reads it with an
 * ordered consumer from "new". JetStream rather than core NATS so that an instance reconnecting
 * after a network blip is handed what it missed. `<cluster>` is the database's id
 * (migrations.ts): positions are numbered per database, so two clusters sharing a NATS server
 * must neither read each other's notices nor have theirs dropped as duplicates of the other's.
 */
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { DeliverPolicy, jetstream, jetstreamManager, type ConsumerMessages } from '@nats-io/jetstream';
import type { EventFeed, FeedNotice } from './event-feed.js';
import { natsConnectionOptions, type NatsAccess } from './nats-options.js';
import type { NoticeSeal } from './notice-seal.js';

/** JetStream's default max message size is 1 MiB; larger events travel as a bare notice. */
const MAX_INLINE_BYTES = 512 * 1024;

export class JetStreamEventFeed implements EventFeed {
  readonly name = 'nats' as const;
  private messages: ConsumerMessages | null = null;

  private constructor(
    private readonly connection: NatsConnection,
    private readonly stream: string,
    private readonly prefix: string,
    private readonly seal: NoticeSeal,
    private readonly onForged: () => void,
  ) {}

  static async connect(access: NatsAccess, options: { cluster: string; seal: NoticeSeal; onForged?: () => void; maxAgeS?: number }): Promise<JetStreamEventFeed> {
    const name = options.cluster.replace(/[^A-Za-z0-9]/g, '');
    const stream = `AGENTD_EVENTS_${name}`;
    const prefix = `agentd.${name}.events.`;
    const connection = await connect({ ...natsConnectionOptions(access), name: 'agentd', maxReconnectAttempts: -1, reconnectTimeWait: 500 });
    const manager = await jetstreamManager(connection);
    const config = { subjects: [`${prefix}>`], max_age: (options.maxAgeS ?? 3600) * 1_000_000_000, duplicate_window: 120 * 1_000_000_000 };
    try {
      await manager.streams.info(stream);
    } catch {
      try {
        await manager.streams.add({ name: stream, ...config });
      } catch (error) {
        // Another instance created it meanwhile.
        await manager.streams.info(stream).catch(() => {
          throw error;
        });
      }
    }
    return new JetStreamEventFeed(connection, stream, prefix, options.seal, options.onForged ?? (() => {}));
  }

  async publish(notice: FeedNotice): Promise<void> {
    const inline = notice.json !== undefined && Buffer.byteLength(notice.json) <= MAX_INLINE_BYTES;
    const { json, ...bare } = notice;
    const payload = this.seal.seal(inline && json !== undefined ? { ...bare, json } : bare);
    await jetstream(this.connection).publish(`${this.prefix}${notice.conversationId}`, payload, { msgID: String(notice.globalCursor) });
  }

  async listen(listener: (notice: FeedNotice) => void): Promise<void> {
    const consumer = await jetstream(this.connection).consumers.get(this.stream, { deliver_policy: DeliverPolicy.New });
    this.messages = await consumer.consume();
    const messages = this.messages;
    void (async () => {
      for await (const message of messages) {
        // A notice that does not verify was not sent by an instance holding the key: dropped.
        const notice = this.seal.open(message.string());
        if (notice) listener(notice);
        else this.onForged();
      }
    })();
  }

  async ping(): Promise<void> {
    await this.connection.flush();
  }

  async close(): Promise<void> {
    await this.messages?.close();
    await this.connection.drain().catch(() => this.connection.close());
  }
}
