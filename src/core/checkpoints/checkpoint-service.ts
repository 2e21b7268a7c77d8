import { randomUUID } from 'node:crypto';
import { isoTimestamp, systemClock, type Clock } from '../clock.js';
import { thisTurnDone } from '../after-this-turn.js';
import { ConflictError, NotFoundError, UnprocessableError } from '../errors.js';
import { decodePageId, encodePageId, type Page } from '../pagination.js';
import type { ConversationRecord } from '../conversations/conversation-record.js';
import type { ConversationStore } from '../conversations/conversation-store.js';
import type { EventRecorder } from '../events/event-recorder.js';
import type { EventLog } from '../events/event-log.js';
import type { EventOf } from '../schemas/event.js';
import type { Checkpoint, CheckpointRecord, CheckpointTrigger, FileChange, RewindBody } from './checkpoint-schemas.js';
import type { CheckpointStore, IntentStore } from './checkpoint-store.js';
import { EMPTY_TREE, type ShadowRepository, type ShadowTarget } from './shadow-repository.js';
import { KeyedQueue } from './keyed-queue.js';

const MAX_FILES_LISTED = 1000;
const MAX_DIFF_CHARS = 256 * 1024;
const FILE_EDITOR_WRITES = new Set(['create', 'str_replace', 'insert', 'undo_edit']);
const isIndexCursor = (value: unknown): value is { i: number } => typeof value === 'object' && value !== null && Number.isInteger((value as { i: number }).i);

export interface CheckpointServiceDeps {
  conversations: ConversationStore;
  log: EventLog;
  /** Appends (masked, read by the history fold) the `rewind` events. */
  recorder: EventRecorder;
  store: CheckpointStore;
  shadow: ShadowRepository;
  intents: IntentStore;
  /** False: checkpoints are off (AGENTD_CHECKPOINTS=false). */
  enabled: boolean;
  /** Whether a run is in progress (rewind waits for none). */
  isRunning: (conversationId: string) => boolean;
  maskText: (conversationId: string, text: string) => string;
  clock?: Clock;
  onError?: (error: unknown, context: Record<string, unknown>) => void;
  /** Tests only: a named crash point (the server waits there forever). */
  pausePoint?: (name: string) => Promise<void>;
}

/** What the agent runtime asks of checkpoints: before a run, before a file-changing tool call, after a run. */
export interface RunCheckpoints {
  atRunStart(record: Readonly<ConversationRecord>, runId: string): Promise<void>;
  beforeTool(record: Readonly<ConversationRecord>, runId: string, call: { name: string; args: Record<string, unknown>; seq?: number | undefined }): Promise<void>;
  /** The files the run changed (null when it has no start checkpoint). */
  atRunEnd(record: Readonly<ConversationRecord>, runId: string): Promise<string[] | null>;
  /** A rewind of the conversation is under way (no run may start meanwhile). */
  isRewinding(conversationId: string): boolean;
}

interface RewindIntent {
  kind: 'rewind';
  conversation_id: string;
  checkpoint_id: string;
  files: boolean;
  conversation: boolean;
  to_seq: number;
  to_tree: string;
  undo_checkpoint_id: string;
}

/**
 * Checkpoints of each conversation's workdir (trees in its shadow repository, records in its
 * store), the changes since one, and rewinds to one. All work on one conversation's shadow is
 * serialised. A rewind is complete or absent after a crash: an intent written before it starts
 * is rolled forward at start-up (restoring a tree again changes nothing that is already right).
 */
export class CheckpointService implements RunCheckpoints {
  private readonly queue = new KeyedQueue();
  /** Rewinds of one conversation, one at a time. */
  private readonly rewinds = new KeyedQueue();
  /** Conversations with a rewind under way (from its checks to its event). */
  private readonly rewinding = new Map<string, number>();
  private readonly runStarts = new Map<string, Promise<CheckpointRecord | null>>();

  constructor(private readonly deps: CheckpointServiceDeps) {}

  private get clock(): Clock {
    return this.deps.clock ?? systemClock;
  }

  /** Why checkpoints cannot be used here, or null. */
  async unavailable(): Promise<string | null> {
    if (!this.deps.enabled) return 'checkpoints are turned off on this server (AGENTD_CHECKPOINTS=false)';
    const available = await this.deps.shadow.available();
    return available.ok ? null : available.reason;
  }

  /**
   * Taken once the run's first LLM request is on its way: begun after this turn of the event loop
   * (afterThisTurn), not among the steps that lead to the request, nor before undici writes it
   * (its walk of the workdir would delay it). Known at once: the run's first file-changing tool
   * call waits for it.
   */
  async atRunStart(record: Readonly<ConversationRecord>, runId: string): Promise<void> {
    const taken = thisTurnDone().then(() => this.quietly(record, async () => this.take(record, { seq: (await this.deps.log.lastSeq(record.id)) + 1, runId, trigger: 'run_start' })));
    this.runStarts.set(runId, taken);
    await taken;
  }

  async beforeTool(record: Readonly<ConversationRecord>, runId: string, call: { name: string; args: Record<string, unknown>; seq?: number | undefined }): Promise<void> {
    if (!changesFiles(call.name, call.args)) return;
    await this.runStarts.get(runId);
    const seq = call.seq ?? (await this.deps.log.lastSeq(record.id)) + 1;
    await this.quietly(record, () => this.take(record, { seq, runId, trigger: 'tool' }));
  }

  async atRunEnd(record: Readonly<ConversationRecord>, runId: string): Promise<string[] | null> {
    const start = await (this.runStarts.get(runId) ?? Promise.resolve(null));
    this.runStarts.delete(runId);
    if (!start) return null;
    const seq = (await this.deps.log.lastSeq(record.id)) + 1;
    const end = await this.quietly(record, () => this.take(record, { seq, runId, trigger: 'run_end' }));
    if (!end) return null;
    const changed = await this.quietly(record, () => this.queue.run(record.id, () => this.deps.shadow.changes(this.target(record), start.tree, end.tree)));
    return changed ? changed.slice(0, MAX_FILES_LISTED).map((change) => change.path) : null;
  }

  /** The conversation is deleted: what the shadow repository keeps in memory about it goes (its files go with its directory). */
  forget(conversationId: string): void {
    this.deps.shadow.forget?.(this.deps.store.gitDirOf(conversationId));
  }

  list(conversationId: string, query: { order: 'asc' | 'desc'; pageId?: string | undefined; limit: number }): Page<Checkpoint> {
    this.deps.conversations.record(conversationId);
    const all = this.deps.store.list(conversationId);
    const ordered = query.order === 'asc' ? all : [...all].reverse();
    const start = query.pageId ? decodePageId(query.pageId, isIndexCursor).i : 0;
    const items = ordered.slice(start, start + query.limit).map((record) => this.toPublic(record));
    return { items, next_page_id: start + query.limit < ordered.length ? encodePageId({ i: start + query.limit }) : null };
  }

  find(conversationId: string, checkpointId: string): CheckpointRecord {
    const found = this.deps.store.list(conversationId).find((checkpoint) => checkpoint.id === checkpointId);
    if (!found) throw new NotFoundError('checkpoint', checkpointId);
    return found;
  }

  /** Files that differ between a checkpoint (default: the first) and the workdir now, with unified diffs. */
  async changes(conversationId: string, query: { sinceCheckpoint?: string | undefined; pageId?: string | undefined; limit: number }): Promise<Page<FileChange>> {
    const record = this.deps.conversations.record(conversationId);
    await this.requireAvailable();
    const base = query.sinceCheckpoint ? this.find(conversationId, query.sinceCheckpoint) : this.deps.store.list(conversationId)[0];
    if (!base) return { items: [], next_page_id: null };
    const target = this.target(record);
    return this.queue.run(conversationId, async () => {
      const now = await this.deps.shadow.snapshot(target);
      const changed = await this.deps.shadow.changes(target, base.tree, now);
      const start = query.pageId ? decodePageId(query.pageId, isIndexCursor).i : 0;
      const page = changed.slice(start, start + query.limit);
      const diffs = await this.deps.shadow.diffs(target, base.tree, now, page.map((change) => change.path));
      const items = page.map((change) => ({ ...change, path: this.deps.maskText(conversationId, change.path), diff: this.deps.maskText(conversationId, capDiff(diffs.get(change.path) ?? '')) }));
      return { items, next_page_id: start + query.limit < changed.length ? encodePageId({ i: start + query.limit }) : null };
    });
  }

  /** Restore the workdir and/or the LLM history to a checkpoint; a checkpoint taken first undoes it. */
  async rewind(conversationId: string, body: RewindBody): Promise<{ event: EventOf<'rewind'>; undo_checkpoint: Checkpoint }> {
    const record = this.deps.conversations.record(conversationId);
    if (!body.files && !body.conversation) throw new UnprocessableError('nothing_to_rewind', 'Set `files`, `conversation` or both to true.');
    if (this.deps.isRunning(conversationId)) throw new ConflictError('run_in_progress', 'A run is in progress: pause it before rewinding.');
    if (record.status === 'waiting_for_confirmation') throw new ConflictError('confirmation_pending', 'Actions are waiting for confirmation: approve or reject them before rewinding.');
    // From here until the event is recorded no run may start (see isRewinding).
    this.rewinding.set(conversationId, (this.rewinding.get(conversationId) ?? 0) + 1);
    try {
      await this.requireAvailable();
      const checkpoint = this.find(conversationId, body.checkpoint_id);
      return await this.rewinds.run(conversationId, async () => {
        const seq = (await this.deps.log.lastSeq(conversationId)) + 1;
        const undo = await this.take(record, { seq, runId: null, trigger: 'rewind' });
        const intent: RewindIntent = { kind: 'rewind', conversation_id: conversationId, checkpoint_id: checkpoint.id, files: body.files, conversation: body.conversation, to_seq: checkpoint.seq, to_tree: checkpoint.tree, undo_checkpoint_id: undo.id };
        this.deps.intents.write(`rewind-${undo.id}`, { ...intent });
        await this.deps.pausePoint?.('rewind_before_restore');
        const event = await this.complete(record, intent, undo.tree);
        return { event, undo_checkpoint: this.toPublic(undo) };
      });
    } finally {
      const left = (this.rewinding.get(conversationId) ?? 1) - 1;
      if (left > 0) this.rewinding.set(conversationId, left);
      else this.rewinding.delete(conversationId);
    }
  }

  isRewinding(conversationId: string): boolean {
    return this.rewinding.has(conversationId);
  }

  /**
   * The tree of the workdir as of just after event `atSeq`: the first checkpoint taken after it
   * (every file-changing step takes one first), or the workdir now when none was.
   */
  async treeAfter(record: Readonly<ConversationRecord>, atSeq: number): Promise<{ tree: string; checkpointId: string; gitDir: string }> {
    await this.requireAvailable();
    let found = this.deps.store.list(record.id).find((checkpoint) => checkpoint.seq > atSeq);
    if (!found) found = await this.take(record, { seq: (await this.deps.log.lastSeq(record.id)) + 1, runId: null, trigger: 'fork' });
    return { tree: found.tree, checkpointId: found.id, gitDir: this.deps.store.gitDirOf(record.id) };
  }

  /** Write a conversation's checkpoint tree into an empty directory (a fork's workdir). */
  async exportTree(gitDir: string, tree: string, intoDir: string): Promise<void> {
    await this.deps.shadow.exportTree(gitDir, tree, intoDir);
  }

  /**
   * Start-up (or, with several instances, taking `conversationId` over from one that died):
   * rewinds a crash interrupted are finished (their intent says what to do).
   */
  async recover(conversationId?: string): Promise<void> {
    for (const { id, intent } of this.deps.intents.list()) {
      if (intent.kind !== 'rewind') continue;
      const rewind = intent as unknown as RewindIntent;
      if (conversationId !== undefined && rewind.conversation_id !== conversationId) continue;
      if (!this.deps.conversations.has(rewind.conversation_id)) {
        this.deps.intents.remove(id);
        continue;
      }
      const record = this.deps.conversations.record(rewind.conversation_id);
      const recorded = await this.deps.log.read(record.id, { order: 'desc', kinds: ['rewind'], limit: 20 });
      if (recorded.some(({ event }) => event.kind === 'rewind' && event.undo_checkpoint_id === rewind.undo_checkpoint_id)) {
        this.deps.intents.remove(id);
        continue;
      }
      const now = rewind.files ? await this.queue.run(record.id, () => this.deps.shadow.snapshot(this.target(record))) : EMPTY_TREE;
      await this.complete(record, rewind, now);
    }
  }

  private async complete(record: Readonly<ConversationRecord>, intent: RewindIntent, fromTree: string): Promise<EventOf<'rewind'>> {
    if (intent.files) await this.queue.run(record.id, () => this.deps.shadow.restore(this.target(record), fromTree, intent.to_tree));
    await this.deps.pausePoint?.('rewind_before_event');
    const { event } = await this.deps.recorder.append(record.id, {
      kind: 'rewind',
      source: 'user',
      checkpoint_id: intent.checkpoint_id,
      files: intent.files,
      conversation: intent.conversation,
      to_seq: intent.to_seq,
      undo_checkpoint_id: intent.undo_checkpoint_id,
    });
    this.deps.intents.remove(`rewind-${intent.undo_checkpoint_id}`);
    return event as EventOf<'rewind'>;
  }

  /** Take a checkpoint now: the workdir's tree, what changed since the previous one, a record. */
  private take(record: Readonly<ConversationRecord>, options: { seq: number; runId: string | null; trigger: CheckpointTrigger }): Promise<CheckpointRecord> {
    const target = this.target(record);
    return this.queue.run(record.id, async () => {
      const previous = this.deps.store.last(record.id);
      const tree = await this.deps.shadow.snapshot(target);
      const changed = previous ? await this.deps.shadow.changes(target, previous.tree, tree) : [];
      const commit = previous && previous.tree === tree ? previous.commit : await this.deps.shadow.keep(target, tree, `${options.trigger} before seq ${options.seq}`);
      const checkpoint: CheckpointRecord = {
        id: randomUUID(),
        conversation_id: record.id,
        seq: options.seq,
        run_id: options.runId,
        created_at: isoTimestamp(this.clock.now()),
        files_changed: changed.slice(0, MAX_FILES_LISTED).map((change) => change.path),
        trigger: options.trigger,
        tree,
        commit,
      };
      this.deps.store.append(checkpoint);
      return checkpoint;
    });
  }

  /** A checkpoint of the agent's own steps never stops the run: a failure is logged and skipped. */
  private async quietly<T>(record: Readonly<ConversationRecord>, work: () => Promise<T>): Promise<T | null> {
    if ((await this.unavailable()) !== null) return null;
    try {
      return await work();
    } catch (error) {
      this.deps.onError?.(error, { conversation_id: record.id, stage: 'checkpoint' });
      return null;
    }
  }

  private async requireAvailable(): Promise<void> {
    const reason = await this.unavailable();
    if (reason !== null) throw new UnprocessableError('checkpoints_unavailable', `Checkpoints are not available: ${reason}.`);
  }

  /** As listed: the paths the agent chose, a secret used as a file name included, masked like event text. */
  private toPublic(record: CheckpointRecord): Checkpoint {
    return { id: record.id, seq: record.seq, run_id: record.run_id, created_at: record.created_at, files_changed: record.files_changed.map((file) => this.deps.maskText(record.conversation_id, file)), trigger: record.trigger };
  }

  private target(record: Readonly<ConversationRecord>): ShadowTarget {
    return { gitDir: this.deps.store.gitDirOf(record.id), workdir: record.workdir };
  }
}

/** bash may change anything; file_editor changes files except when it only views them. */
export function changesFiles(name: string, args: Record<string, unknown>): boolean {
  if (name === 'bash') return true;
  if (name === 'file_editor') return FILE_EDITOR_WRITES.has(String(args.command));
  return false;
}

function capDiff(diff: string): string {
  if (diff.length <= MAX_DIFF_CHARS) return diff;
  return `${diff.slice(0, MAX_DIFF_CHARS)}\n[... diff cut: ${diff.length - MAX_DIFF_CHARS} more characters ...]\n`;
}
