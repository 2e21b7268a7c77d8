import path from 'node:path';
import { randomUUID } from 'node:crypto';
import { isoTimestamp, systemClock, type Clock } from '../clock.js';
import { UnprocessableError } from '../errors.js';
import type { CheckpointService } from '../checkpoints/checkpoint-service.js';
import type { ForkBody } from '../checkpoints/checkpoint-schemas.js';
import type { IntentStore } from '../checkpoints/checkpoint-store.js';
import type { EventLog } from '../events/event-log.js';
import type { AgentEvent, NewEvent } from '../schemas/event.js';
import type { Conversation } from '../schemas/conversation.js';
import type { ConversationRecord } from './conversation-record.js';
import type { ConversationService } from './conversation-service.js';
import type { ConversationStore } from './conversation-store.js';
import { zeroUsage } from '../schemas/usage.js';

interface ForkIntent {
  kind: 'fork';
  conversation_id: string;
  /** The workdir the fork created (removed when the fork is undone), or null. */
  workdir: string | null;
}

/**
 * POST /fork: a new conversation with the parent's events up to `at_seq` (new ids, the same
 * seqs), then a `fork` event of its own at `at_seq + 1` (seqs start at 1 with no gaps, so the
 * copied events keep theirs and the fork's first own event follows them), the parent's config,
 * its secrets only when asked, and its own copy of the workdir when asked.
 *
 * Complete or absent after a crash: an intent names the fork first; the record is saved last
 * (the moment the fork exists); start-up removes the events and workdir of a fork with an
 * intent and no record.
 */
export class ConversationForks {
  constructor(
    private readonly deps: {
      conversations: ConversationService;
      store: ConversationStore;
      log: EventLog;
      checkpoints: CheckpointService;
      intents: IntentStore;
      clock?: Clock;
      pausePoint?: (name: string) => Promise<void>;
    },
  ) {}

  async fork(parentId: string, body: ForkBody): Promise<Conversation> {
    const parent = this.deps.store.record(parentId);
    const last = await this.deps.log.lastSeq(parentId);
    const atSeq = body.at_seq ?? last;
    if (atSeq > last) throw new UnprocessableError('invalid_at_seq', `at_seq ${atSeq} is past the conversation's last event (seq ${last}).`, { at_seq: atSeq, last_seq: last });
    const source = body.copy_workdir ? await this.deps.checkpoints.treeAfter(parent, atSeq) : null;
    const id = randomUUID();
    const workdir = source ? path.join(this.deps.conversations.workdirBase, id) : null;
    const intent: ForkIntent = { kind: 'fork', conversation_id: id, workdir };
    this.deps.intents.write(`fork-${id}`, { ...intent });
    try {
      if (source && workdir) {
        const prepared = this.deps.conversations.workdirs.prepare(workdir, { isDefault: true });
        await this.deps.checkpoints.exportTree(source.gitDir, source.tree, prepared.workdir);
      }
      await this.copyEvents(parentId, id, atSeq);
      await this.deps.log.append(id, { kind: 'fork', source: 'system', parent_conversation_id: parentId, at_seq: atSeq, copy_workdir: Boolean(source), checkpoint_id: source?.checkpointId ?? null });
      await this.deps.pausePoint?.('fork_before_record');
      const conversation = this.deps.conversations.adopt(this.recordOf(parent, { id, workdir, title: body.title, copySecrets: body.copy_secrets }), atSeq + 1);
      this.deps.intents.remove(`fork-${id}`);
      return conversation;
    } catch (error) {
      await this.undo(intent);
      this.deps.intents.remove(`fork-${id}`);
      throw error;
    }
  }

  /** Start-up: a fork left without its record is removed (events, workdir); a finished one forgets its intent. */
  async recover(): Promise<void> {
    // A conversation the fork wrote no record for was removed with its directory at load.
    for (const { id, intent } of this.deps.intents.list().filter(({ intent }) => intent.kind === "fork")) {
      const fork = intent as unknown as ForkIntent;
      if (!this.deps.store.has(fork.conversation_id)) await this.undo(fork);
      this.deps.intents.remove(id);
    }
  }

  private async undo(intent: ForkIntent): Promise<void> {
    await this.deps.log.drop(intent.conversation_id);
    if (intent.workdir) await this.deps.conversations.workdirs.remove(intent.workdir);
  }

  private async copyEvents(fromId: string, toId: string, atSeq: number): Promise<void> {
    let cursor = 0;
    while (cursor < atSeq) {
      const page = await this.deps.log.read(fromId, { order: 'asc', cursorSeq: cursor, limit: Math.min(1000, atSeq - cursor) });
      if (page.length === 0) break;
      for (const { event } of page) {
        if (event.seq > atSeq) break;
        const copied = await this.deps.log.append(toId, bodyOf(event));
        if (copied.event.seq !== event.seq) throw new Error(`fork: event ${event.seq} was copied as ${copied.event.seq}`);
      }
      cursor = page[page.length - 1]!.event.seq;
    }
  }

  private recordOf(parent: Readonly<ConversationRecord>, options: { id: string; workdir: string | null; title: string | null | undefined; copySecrets: boolean }): ConversationRecord {
    const now = isoTimestamp((this.deps.clock ?? systemClock).now());
    return {
      ...structuredClone({ ...parent, secrets: {}, retired_secrets: [] }),
      id: options.id,
      title: options.title !== undefined ? options.title : parent.title,
      status: 'idle',
      workdir: options.workdir ?? parent.workdir,
      // Only a workdir made for the fork may be removed with it (`delete_workdir=true`).
      workdir_created: options.workdir !== null,
      pending_actions: [],
      current_run_id: null,
      usage: zeroUsage(),
      created_at: now,
      updated_at: now,
      secrets: options.copySecrets ? { ...parent.secrets } : {},
      // Secrets not copied stay masked in the fork (its events, files and outputs may hold their values).
      retired_secrets: [...(parent.retired_secrets ?? []), ...(options.copySecrets ? [] : Object.entries(parent.secrets))],
    };
  }
}

/** An event as it is appended: its envelope (id, seq, conversation, time) is the log's to give. */
function bodyOf(event: AgentEvent): NewEvent {
  const { id: _id, seq: _seq, conversation_id: _conversation, timestamp: _timestamp, ...body } = event;
  return body as NewEvent;
}
