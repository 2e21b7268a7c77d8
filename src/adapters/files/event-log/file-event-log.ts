import fs from 'node:fs';
import path from 'node:path';
import { randomUUID } from 'node:crypto';
import { isoTimestamp, systemClock, type Clock } from '../../../core/clock.js';
import type { AgentEvent, EventKind, NewEvent } from '../../../core/schemas/event.js';
import type { AppendedEvent, EventFilter, EventLog, EventPageQuery, FirehoseEntry, StoredEvent, SubscribeFrom } from '../../../core/events/event-log.js';
import { UNLIMITED, type EventSubscription, type SubscriptionLimits } from '../../../core/events/event-subscription.js';
import { LocalSubscriptions } from '../../../core/events/local-subscriptions.js';
import { ConversationLogFile } from './conversation-log-file.js';
import { KINDS_DIR } from './kind-index.js';
import { FirehoseIndex } from './firehose-index.js';
import { idPrefixOf, kindCode, sourceCode, type IndexEntry } from './index-entry.js';
import { DamagedDataError, StorageFullError } from '../../../core/errors.js';
import { isOutOfSpace } from '../disk-space.js';
import { mergeSeqs, take } from './seq-lists.js';

export interface FileEventLogOptions {
  /** Directory holding one sub-directory per conversation. */
  conversationsDir: string;
  /** The firehose index file. */
  firehoseFile: string;
  /** fsync after every append: survives power loss, not only a process crash. Slower. */
  fsync?: boolean;
  /** How many conversations' files are kept open at once (least recently used are closed). */
  maxOpen?: number;
  /** A conversation's files unused this long are closed (reopened, checking only the tail, on the next call). */
  idleCloseMs?: number;
  clock?: Clock;
  /** What a failed write throws (default: StorageFullError when the disk is full, else the error). */
  storageError?: (error: unknown) => unknown;
  /**
   * A log found damaged when it is first opened (start-up no longer reads every log, so damage
   * made while the server was stopped is found on first use): told once per conversation.
   */
  onDamaged?: (conversationId: string, error: DamagedDataError) => void;
}

const defaultStorageError = (error: unknown): unknown => (isOutOfSpace(error) ? new StorageFullError() : error);
/** Conversations whose files are being closed at once at shutdown (each a few requests to the thread pool). */
const CLOSE_CONCURRENCY = 16;

/**
 * The file-backed EventLog: `<conversationsDir>/<id>/events.jsonl` + `events.idx`, and a firehose
 * index. Writes are synchronous system calls made inside `append`, so appends are stored in call
 * order (the per-conversation queue is the call order itself) and subscriptions go live in one
 * synchronous step (see LocalSubscriptions).
 */
export class FileEventLog implements EventLog {
  private readonly open = new Map<string, ConversationLogFile>();
  private readonly firehose: FirehoseIndex;
  private readonly fsync: boolean;
  private readonly maxOpen: number;
  private readonly idleCloseMs: number;
  /** When each open conversation's files were last used (the `open` map is in that order too). */
  private readonly lastUsed = new Map<string, number>();
  private idleTimer: NodeJS.Timeout | null = null;
  private readonly clock: Clock;
  private readonly storageError: (error: unknown) => unknown;
  /** Conversations whose log was read in full and checked in this process (later opens check the tail only). */
  private readonly verified = new Set<string>();
  /** close() was called: the files are being (or were) closed, nothing may open them again. */
  private closed = false;
  /** Conversations whose log is damaged: never opened again, so never written. */
  private readonly damaged = new Map<string, DamagedDataError>();
  private readonly subscriptions: LocalSubscriptions;

  constructor(private readonly options: FileEventLogOptions) {
    this.fsync = options.fsync ?? false;
    this.maxOpen = options.maxOpen ?? 512;
    this.idleCloseMs = options.idleCloseMs ?? 60_000;
    this.clock = options.clock ?? systemClock;
    this.storageError = options.storageError ?? defaultStorageError;
    fs.mkdirSync(options.conversationsDir, { recursive: true });
    this.firehose = FirehoseIndex.open(options.firehoseFile, { fsync: this.fsync });
    this.subscriptions = new LocalSubscriptions({
      after: (conversationId, afterSeq, limit) => this.readNow(conversationId, { order: 'asc', cursorSeq: afterSeq, limit }),
      globalAfter: (afterCursor, limit) => this.readGlobalNow(afterCursor, limit),
    });
  }

  async append(conversationId: string, input: NewEvent): Promise<AppendedEvent> {
    const appended = this.appendNow(conversationId, input);
    this.subscriptions.publish(appended);
    return appended;
  }

  async read(conversationId: string, query: EventPageQuery): Promise<StoredEvent[]> {
    return this.readNow(conversationId, query);
  }

  async count(conversationId: string, filter: EventFilter): Promise<number> {
    return this.countNow(conversationId, filter);
  }

  async findById(conversationId: string, eventId: string): Promise<StoredEvent | undefined> {
    return this.findNow(conversationId, eventId);
  }

  async lastSeq(conversationId: string): Promise<number> {
    return this.file(conversationId).count;
  }

  async readGlobal(afterCursor: number, limit: number): Promise<FirehoseEntry[]> {
    return this.readGlobalNow(afterCursor, limit);
  }

  async globalHead(): Promise<number> {
    return this.firehose.head;
  }

  subscribe(from: SubscribeFrom, limits: SubscriptionLimits = UNLIMITED): EventSubscription {
    // A damaged conversation's subscription fails at once (the caller turns that into an error), not at its first read.
    if (from.conversationId !== null) this.file(from.conversationId);
    return this.subscriptions.subscribe(from, limits);
  }

  async drop(conversationId: string): Promise<void> {
    this.dropNow(conversationId);
    this.subscriptions.closeConversation(conversationId);
  }

  /** Close a conversation's files now (they reopen, checking only the tail, on the next call). */
  release(conversationId: string): void {
    const file = this.open.get(conversationId);
    if (!file) return;
    if (!file.close()) this.verified.delete(conversationId); // its kind index is behind: checked whole on reopen
    this.open.delete(conversationId);
    this.lastUsed.delete(conversationId);
  }

  /** One timer while any files are open (none when all are closed): it closes those left idle. */
  private armIdleTimer(): void {
    if (this.idleTimer || this.open.size === 0) return;
    const [oldestId] = this.open.keys();
    const dueIn = Math.max(0, (this.lastUsed.get(oldestId!) ?? 0) + this.idleCloseMs - Date.now());
    this.idleTimer = setTimeout(() => {
      this.idleTimer = null;
      const cutoff = Date.now() - this.idleCloseMs;
      for (const id of [...this.open.keys()]) {
        if ((this.lastUsed.get(id) ?? 0) > cutoff) break;
        this.release(id);
      }
      this.armIdleTimer();
    }, dueIn + 10);
    this.idleTimer.unref();
  }

  /**
   * At shutdown, the last call: the open files are closed and their kind indexes written through
   * the thread pool, CLOSE_CONCURRENCY conversations at a time, so that the main thread never
   * waits for the disk (a thousand conversations' first kind files, made in batches on the main
   * thread, held the loop on a busy disk: P13). The log cannot be used afterwards.
   */
  async close(): Promise<void> {
    this.closed = true;
    const files = [...this.open.values()];
    this.open.clear();
    this.lastUsed.clear();
    let next = 0;
    const worker = async () => {
      while (next < files.length) await files[next++]!.closeAsync().catch(() => false);
    };
    await Promise.all(Array.from({ length: CLOSE_CONCURRENCY }, worker));
    this.closeNow();
  }

  private appendNow(conversationId: string, input: NewEvent): AppendedEvent {
    const file = this.file(conversationId);
    const event = {
      id: randomUUID(),
      seq: file.count + 1,
      conversation_id: conversationId,
      timestamp: isoTimestamp(file.nextTimestamp(this.clock.now())),
      ...input,
    } as AgentEvent;
    const json = JSON.stringify(event);
    const before = file.state();
    try {
      file.append(event, json);
    } catch (error) {
      throw this.storageError(error);
    }
    let globalCursor: number;
    try {
      globalCursor = this.firehose.append(conversationId, event.seq);
    } catch (error) {
      file.rollback(before);
      throw this.storageError(error);
    }
    return { event, json, globalCursor };
  }

  private readNow(conversationId: string, query: EventPageQuery): StoredEvent[] {
    const file = this.file(conversationId);
    const { low, high } = this.bounds(file, query);
    if (low > high) return [];
    const matches = this.matcher(query);
    const picked: IndexEntry[] = [];
    if (query.kinds?.length) {
      // Only the events of those kinds are looked at (the per-kind seq files), in order, a page's worth at a time.
      const seqs = this.kindSeqs(file, query.kinds, low, high, query.order);
      for (;;) {
        const batch = take(seqs, query.limit - picked.length);
        if (batch.length === 0) break;
        const entries = file.entriesOf(query.order === 'asc' ? batch : batch.reverse());
        for (const entry of query.order === 'asc' ? entries : entries.reverse()) if (matches(entry)) picked.push(entry);
        if (picked.length >= query.limit) break;
      }
    } else {
      const visit = (seq: number, entry: IndexEntry) => {
        if (seq < low || seq > high) return false;
        if (matches(entry)) picked.push(entry);
        return picked.length < query.limit;
      };
      if (query.order === 'asc') file.scan(low, 1, visit);
      else file.scan(high, -1, visit);
    }
    // Lines are read in log order, so that adjacent ones come in one read.
    const lines = file.readLines(query.order === 'asc' ? picked : picked.reverse());
    if (query.order === 'desc') lines.reverse();
    return lines.map((json) => ({ event: JSON.parse(json) as AgentEvent, json }));
  }

  private countNow(conversationId: string, filter: EventFilter): number {
    const file = this.file(conversationId);
    const { low, high } = this.bounds(file, filter);
    if (low > high) return 0;
    if (!filter.kinds?.length && !filter.sources?.length) return high - low + 1;
    if (filter.kinds?.length && !filter.sources?.length) {
      let n = 0;
      for (const kind of new Set(filter.kinds.map(kindCode))) n += file.kinds.countIn(kind, low, high);
      return n;
    }
    const matches = this.matcher(filter);
    let n = 0;
    if (filter.kinds?.length) {
      const seqs = this.kindSeqs(file, filter.kinds, low, high, 'asc');
      for (let batch = take(seqs, 1024); batch.length > 0; batch = take(seqs, 1024)) for (const entry of file.entriesOf(batch)) if (matches(entry)) n += 1;
      return n;
    }
    file.scan(low, 1, (seq, entry) => {
      if (seq > high) return false;
      if (matches(entry)) n += 1;
      return true;
    });
    return n;
  }

  private findNow(conversationId: string, eventId: string): StoredEvent | undefined {
    const file = this.file(conversationId);
    const prefix = idPrefixOf(eventId);
    let found: StoredEvent | undefined;
    file.scan(file.count, -1, (_seq, entry) => {
      if (!entry.idPrefix.equals(prefix)) return true;
      const [json] = file.readLines([entry]);
      const event = JSON.parse(json!) as AgentEvent;
      if (event.id === eventId) found = { event, json: json! };
      return found === undefined;
    });
    return found;
  }

  private readGlobalNow(afterCursor: number, limit: number): FirehoseEntry[] {
    const out: FirehoseEntry[] = [];
    let cursor = afterCursor;
    while (out.length < limit && cursor < this.firehose.head) {
      const records = this.firehose.read(cursor, limit - out.length);
      if (records.length === 0) break;
      for (const record of records) {
        cursor = record.globalCursor;
        const stored = this.readOne(record.conversationId, record.seq);
        if (stored) out.push({ globalCursor: record.globalCursor, stored });
      }
    }
    return out;
  }

  private dropNow(conversationId: string): void {
    this.verified.delete(conversationId);
    this.damaged.delete(conversationId);
    this.open.get(conversationId)?.kinds.discard();
    this.release(conversationId);
    const dir = this.dirOf(conversationId);
    fs.rmSync(path.join(dir, 'events.jsonl'), { force: true });
    fs.rmSync(path.join(dir, 'events.idx'), { force: true });
    fs.rmSync(path.join(dir, KINDS_DIR), { recursive: true, force: true });
  }

  quarantine(conversationId: string, error: DamagedDataError): void {
    this.damaged.set(conversationId, error);
    this.release(conversationId);
  }

  private closeNow(): void {
    for (const file of this.open.values()) file.close();
    this.open.clear();
    this.lastUsed.clear();
    if (this.idleTimer) clearTimeout(this.idleTimer);
    this.idleTimer = null;
    this.firehose.close();
  }

  private readOne(conversationId: string, seq: number): StoredEvent | undefined {
    // A quarantined conversation's events are left out of the firehose.
    if (this.damaged.has(conversationId)) return undefined;
    if (!fs.existsSync(path.join(this.dirOf(conversationId), 'events.jsonl'))) return undefined;
    const file = this.file(conversationId);
    const entry = file.entry(seq);
    if (!entry) return undefined;
    const [json] = file.readLines([entry]);
    return { event: JSON.parse(json!) as AgentEvent, json: json! };
  }

  private bounds(file: ConversationLogFile, query: EventFilter & { cursorSeq?: number | undefined; order?: 'asc' | 'desc' }) {
    let low = Math.max(1, (query.afterSeq ?? 0) + 1);
    let high = file.count;
    if (query.sinceMs !== undefined) low = Math.max(low, file.firstSeqAtOrAfter(query.sinceMs));
    if (query.cursorSeq !== undefined) {
      if (query.order === 'desc') high = Math.min(high, query.cursorSeq - 1);
      else low = Math.max(low, query.cursorSeq + 1);
    }
    return { low, high };
  }

  private kindSeqs(file: ConversationLogFile, kinds: readonly EventKind[], low: number, high: number, order: 'asc' | 'desc'): Iterator<number> {
    return mergeSeqs(
      [...new Set(kinds.map(kindCode))].map((kind) => file.kinds.seqs(kind, low, high, order)),
      order,
    );
  }

  private matcher(filter: EventFilter): (entry: IndexEntry) => boolean {
    const kinds = filter.kinds?.length ? new Set(filter.kinds.map(kindCode)) : undefined;
    const sources = filter.sources?.length ? new Set(filter.sources.map(sourceCode)) : undefined;
    return (entry) => (!kinds || kinds.has(entry.kind)) && (!sources || sources.has(entry.source));
  }

  private dirOf(conversationId: string): string {
    return path.join(this.options.conversationsDir, conversationId);
  }

  private file(conversationId: string): ConversationLogFile {
    if (this.closed) throw new Error('the event log is closed');
    this.lastUsed.set(conversationId, Date.now());
    const cached = this.open.get(conversationId);
    if (cached) {
      this.open.delete(conversationId);
      this.open.set(conversationId, cached);
      return cached;
    }
    const known = this.damaged.get(conversationId);
    if (known) throw known;
    let file: ConversationLogFile;
    try {
      file = ConversationLogFile.open(this.dirOf(conversationId), { fsync: this.fsync, verify: !this.verified.has(conversationId) });
    } catch (error) {
      if (error instanceof DamagedDataError) {
        this.damaged.set(conversationId, error);
        this.options.onDamaged?.(conversationId, error);
      }
      throw error;
    }
    this.verified.add(conversationId);
    this.open.set(conversationId, file);
    if (this.open.size > this.maxOpen) {
      const [oldestId] = this.open.keys();
      this.release(oldestId!);
    }
    this.armIdleTimer();
    return file;
  }
}
