import type { ConversationService } from '../conversations/conversation-service.js';
import type { ConversationStore } from '../conversations/conversation-store.js';
import type { EventQueries } from '../events/event-queries.js';
import type { MultitaskStrategy } from '../schemas/event.js';
import type { ConversationTemplate, ScheduleMessage } from './schedule-schemas.js';
import type { z } from 'zod';

type Message = z.infer<typeof ScheduleMessage>;

/** The fire being delivered, as the target conversation records it. */
export interface FireMark {
  schedule_id: string;
  fire_id: string;
  scheduled_for: string;
}

/** How a run a fire started has ended, as far as its conversation's log says: `open` until it has. */
export type RunEnd = 'open' | 'failed' | 'ended' | 'gone';

/** State updates looked through for a run's end: a run further back than this is not judged. */
const RUN_END_LOOKBACK = 100;

export interface ScheduleTargetsDeps {
  conversations: ConversationService;
  store: ConversationStore;
  events: EventQueries;
  /**
   * Several instances: the conversation as the shared database holds it now (undefined when there
   * is none), for one this instance's records do not have yet (made on another instance a moment ago).
   */
  stored?: ((conversationId: string) => Promise<{ owner?: string | null | undefined } | undefined>) | undefined;
}

/** How fires reach conversations: through the conversations' own service, as a client's message would. */
export class ScheduleTargets {
  constructor(private readonly deps: ScheduleTargetsDeps) {}

  /** Whether this instance's records hold the conversation. */
  knows(conversationId: string): boolean {
    return this.deps.store.has(conversationId);
  }

  /**
   * Whether the conversation exists: in this instance's records, or else in the shared database.
   * A database that cannot say (down, or the row damaged) does not make it gone.
   */
  async exists(conversationId: string): Promise<boolean> {
    if (this.knows(conversationId)) return true;
    if (!this.deps.stored) return false;
    return this.deps.stored(conversationId).then(
      (stored) => stored !== undefined,
      () => true,
    );
  }

  /** Who the conversation belongs to (null for one from before owners); the caller knows it exists. */
  async ownerOf(conversationId: string): Promise<string | null> {
    if (this.knows(conversationId) || !this.deps.stored) return this.deps.store.record(conversationId).owner ?? null;
    return (await this.deps.stored(conversationId))?.owner ?? null;
  }

  /** The run in progress in the conversation, if any (none known for one this instance has no record of). */
  runningRun(conversationId: string): string | null {
    if (!this.knows(conversationId)) return null;
    const record = this.deps.store.record(conversationId);
    return record.status === 'running' || record.status === 'waiting_for_confirmation' || record.status === 'waiting_for_input' ? (record.current_run_id ?? null) : null;
  }

  /**
   * How the run ended, from the conversation's newest state updates: `failed` in error, `ended`
   * otherwise, `open` while it runs or waits (or this instance does not have the conversation
   * yet), `gone` when the conversation is, or its log is unreadable, or the run too far back to tell.
   */
  async runEnd(conversationId: string, runId: string): Promise<RunEnd> {
    if (!(await this.exists(conversationId))) return 'gone';
    const updates = await this.deps.events.list(conversationId, { kinds: ['state_update'], order: 'desc', limit: RUN_END_LOOKBACK }).catch(() => null);
    // Not in this instance's records yet: looked at again later. In them but unreadable (quarantined): never judged.
    if (!updates) return this.knows(conversationId) ? 'gone' : 'open';
    const last = updates.items.find(({ event }) => event.kind === 'state_update' && event.run_id === runId)?.event;
    if (!last || last.kind !== 'state_update') return updates.next_page_id === null ? 'open' : 'gone';
    if (last.status === 'running' || last.status === 'waiting_for_confirmation' || last.status === 'waiting_for_input') return 'open';
    return last.status === 'error' ? 'failed' : 'ended';
  }

  /** A new conversation from the template, marked with the fire; it belongs to the schedule's owner. */
  async create(template: ConversationTemplate, message: Message, options: { mark: FireMark; owner: string | null }): Promise<string> {
    const { mark } = options;
    const { on_complete: _, metadata, ...fields } = template;
    const { conversation } = await this.deps.conversations.create({
      ...fields,
      ...(message.llm && { llm: message.llm }),
      ...(message.tools && { tools: message.tools }),
      max_iterations_per_run: fields.max_iterations_per_run ?? 500,
      confirmation_mode: false,
      metadata: { ...metadata, schedule_id: mark.schedule_id, fire_id: mark.fire_id },
    }, options.owner === null ? {} : { owner: options.owner });
    return conversation.id;
  }

  /** The conversation a fire created (recovery after a crash), if any. */
  createdBy(fireId: string): string | null {
    for (const record of this.deps.store.all()) if (record.metadata?.fire_id === fireId) return record.id;
    return null;
  }

  /** Records the `schedule_fire` event, then sends the message (a run starts or the running run takes it). */
  async deliver(conversationId: string, message: Message, options: { mark: FireMark; strategy: MultitaskStrategy }): Promise<string | null> {
    await this.deps.conversations.append(conversationId, { kind: 'schedule_fire', source: 'system', ...options.mark });
    return this.send(conversationId, message, options.strategy);
  }

  async send(conversationId: string, message: Message, strategy: MultitaskStrategy): Promise<string | null> {
    const sent = await this.deps.conversations.postMessage(conversationId, { content: message.content, run: true, multitask_strategy: strategy, ...(message.output_schema && { output_schema: message.output_schema }) });
    return sent.run_id ?? null;
  }

  /**
   * After a crash between claim and start: whether the fire's event is in the conversation, and
   * whether its message followed it (then the run it started, or the conversation's latest).
   */
  async delivered(conversationId: string, fireId: string): Promise<{ marked: boolean; sent: boolean; runId: string | null }> {
    const marks = await this.deps.events.list(conversationId, { kinds: ['schedule_fire'], order: 'desc', limit: 50 });
    const mark = marks.items.find(({ event }) => event.kind === 'schedule_fire' && event.fire_id === fireId);
    if (!mark) return { marked: false, sent: false, runId: null };
    const next = await this.deps.events.list(conversationId, { afterSeq: mark.event.seq, kinds: ['message'], sources: ['user'], order: 'asc', limit: 1 });
    const record = this.deps.store.record(conversationId);
    return { marked: true, sent: next.items.length > 0, runId: record.current_run_id ?? null };
  }

  async delete(conversationId: string): Promise<void> {
    if (this.knows(conversationId)) await this.deps.conversations.delete(conversationId, { deleteWorkdir: true });
  }
}
