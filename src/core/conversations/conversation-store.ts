import { isoTimestamp, systemClock, type Clock } from '../clock.js';
import { ConversationQuarantinedError, NotFoundError, type DamagedDataError } from '../errors.js';
import type { LlmUsage, PendingAction, SandboxNetwork } from '../schemas/conversation.js';
import { addUsageTo } from '../schemas/usage.js';
import type { ConversationStatus } from '../schemas/event.js';
import type { AppendedEvent, EventLog } from '../events/event-log.js';
import type { EventReader } from '../events/event-recorder.js';
import type { ConfigChange, ConversationRecord, ConversationRepository } from './conversation-record.js';
import { HeldConversations } from './held-conversations.js';
import { keepNewestOfGrowing } from './newest-of-growing.js';
import { SettledOnDisk } from './settled-on-disk.js';
import { loadConversations } from './load-conversations.js';
import type { ConversationSummary, SavedSummaries } from './summary-store.js';
import { holdUserKeyed, userKeyed } from './user-keyed.js';
import { titleFromMessage } from './conversation-title.js';

export type { ListConversationsQuery } from './conversation-index.js';
export type { ConfigChange } from './conversation-record.js';

type ProjectPermissions = NonNullable<ConversationRecord['project_permissions']>;

/**
 * The one owner of conversation records: they are held and read as HeldConversations has them,
 * persisted through the repository, and changed only through the named transitions below
 * (`startRunning`, `setStatus`, `addUsage`, `configure`, ...). Others get records to read. The
 * store is also the log reader that keeps each conversation's summary (`updated_at`, `event_count`).
 */
export class ConversationStore extends HeldConversations {
  /** Which records' files hold a settled status with nothing pending (a run end to the same status need not save). */
  private readonly onDisk = new SettledOnDisk();
  /** Records added and not persisted yet (their first save is `persist`'s). */
  private readonly unpersisted = new WeakSet<ConversationRecord>();
  /** Project rules read ahead of a run, kept with their record by its next save (see holdProjectPermissions). */
  private readonly heldRules = new WeakMap<ConversationRecord, ProjectPermissions>();
  private loaded = false;
  /** Loaded right after a clean stop (LoadedConversations.rightAfterCleanStop): no run can be open, no store was written since. */
  loadedAfterCleanStop = false;

  constructor(
    private readonly deps: {
      repository: ConversationRepository;
      log: EventLog;
      clock?: Clock;
      /** Whether conversations may use the host's network (`sandbox.network: "host"`). */
      hostNetworkAllowed?: boolean;
      /** Read a conversation's other stores at load (its runs; right after a clean stop, on first use instead): each throws DamagedDataError when damaged. */
      integrityChecks?: readonly ((conversationId: string) => void)[];
      /** Save the record with each usage added (instances sharing a database list each other's conversations from it). */
      persistUsage?: boolean;
      /** Save the record when a run starts, whatever it held before (instances sharing a database list each other's statuses from it). */
      persistRunStart?: boolean;
    },
  ) {
    super();
  }

  private get clock(): Clock {
    return this.deps.clock ?? systemClock;
  }

  /**
   * The summary reader: each stored event moves its conversation's `updated_at` and `event_count`;
   * an untitled conversation takes its title from the first user message (from any client: the CLI
   * sends no title).
   */
  readonly summaryReader: EventReader = {
    name: 'conversation summary',
    read: ({ event }: AppendedEvent) => {
      const record = this.records.get(event.conversation_id);
      if (!record) return;
      this.eventCounts.set(record.id, event.seq);
      this.touch(record, event.timestamp);
      if (record.title === null && event.kind === 'message' && event.source === 'user') this.nameAfter(record, event.content);
    },
  };

  private nameAfter(record: ConversationRecord, content: string): void {
    const title = titleFromMessage(content);
    if (title === null || record.quarantine) return;
    this.mutable(record.id).title = title;
    // A record being created is saved with its title by `persist`.
    if (this.unpersisted.has(record)) return;
    try {
      this.save(record);
    } catch {
      // The message is stored already: its title stays in memory and is saved with the record's next change.
    }
  }

  /**
   * Load every conversation (load-conversations.ts). One whose stored data is damaged is
   * quarantined, not fatal: it is listed with status `error` and the damage, refuses everything
   * but reads of its summary and deletion, and its files are never written. Returns those.
   */
  async load(saved: SavedSummaries | null = null): Promise<{ id: string; error: DamagedDataError }[]> {
    const loaded = await loadConversations({ repository: this.deps.repository, log: this.deps.log, integrityChecks: this.deps.integrityChecks, saved, now: isoTimestamp(this.clock.now()) });
    // Held as loading counted them (a copy would walk every conversation again), with any counted before.
    for (const [id, count] of this.eventCounts) if (!loaded.eventCounts.has(id)) loaded.eventCounts.set(id, count);
    this.eventCounts = loaded.eventCounts;
    // Their files say what they hold now but for what only grows (see setStatus): onDisk takes a record it has not seen as its file has it.
    this.indexAll(loaded.records);
    this.loaded = true;
    this.loadedAfterCleanStop = loaded.rightAfterCleanStop;
    return loaded.quarantined;
  }

  /** The records loaded at start-up in the listing's orders (see ConversationIndex.addAll), once the server listens, one order per turn. */
  sortLoaded(): Promise<void> {
    return this.records.sortLoadedInTurns();
  }

  get isLoaded(): boolean {
    return this.loaded;
  }

  /**
   * The sandbox a conversation's processes get now: a conversation created with `host` while the
   * operator allowed it falls back to `true` once the operator no longer does.
   */
  sandboxOf(record: Readonly<ConversationRecord>): { network: SandboxNetwork } {
    const network = record.sandbox?.network ?? true;
    return { network: network === 'host' && !(this.deps.hostNetworkAllowed ?? false) ? true : network };
  }

  // --- Transitions: the only ways a record changes ------------------------------------------

  /** A new conversation, indexed now and persisted by `persist` (after its first message is in the log). */
  add(record: ConversationRecord): void {
    this.onDisk.unsaved(record);
    this.unpersisted.add(record);
    this.index(record);
  }

  /** The first save of a record that was added (it keeps its created_at as updated_at). */
  persist(id: string): void {
    const record = this.mutable(id);
    this.deps.repository.save(record);
    this.onDisk.saved(record);
    this.unpersisted.delete(record);
  }

  /**
   * Another instance changed (or deleted) this conversation: the record as stored now replaces
   * the one held here (undefined: it is gone). Never for a conversation that runs here. What only
   * grows (event count, updated_at, usage) keeps the newest of what is stored, what the log says
   * (`summary`) and what this instance already followed (see `follow`): the three may arrive in
   * any order.
   */
  sync(id: string, stored: ConversationRecord | undefined, summary?: ConversationSummary): void {
    const current = this.records.get(id);
    const count = Math.max(summary?.event_count ?? 0, this.eventCounts.get(id) ?? 0);
    if (current) this.unindex(current);
    if (!stored) return;
    keepNewestOfGrowing(stored, current, summary);
    this.onDisk.saved(stored);
    this.index(stored);
    this.eventCounts.set(id, count);
  }

  /**
   * An event of a conversation another instance runs, as this instance's tail of the shared log
   * saw it: its event count and updated_at follow, as the summary reader's do for local appends.
   */
  follow(event: { conversation_id: string; seq: number; timestamp: string }): void {
    const record = this.records.get(event.conversation_id);
    if (!record || record.quarantine) return;
    if (event.seq > (this.eventCounts.get(record.id) ?? 0)) this.eventCounts.set(record.id, event.seq);
    this.touch(record, event.timestamp);
  }

  /** A conversation whose events were written before its record (a fork): saved (the moment it exists), indexed, with its event count. */
  adopt(record: ConversationRecord, eventCount: number): void {
    this.deps.repository.save(record);
    this.onDisk.saved(record);
    this.index(record);
    this.eventCounts.set(record.id, eventCount);
  }

  /** The conversation is gone (or never made it): out of the index and the repository (a promise when the repository removes it later). */
  remove(id: string, options: { persisted: boolean }): void | Promise<void> {
    const record = this.records.get(id);
    if (!record) return;
    this.unindex(record);
    if (options.persisted) return this.deps.repository.remove(id);
  }

  /**
   * The conversation's status and current run, saved; a save that fails (a full disk) leaves
   * the record as it was. `running` needs the run's id; any other status clears it.
   *
   * Not saved when the file already says so (a run end `idle` again, its start saved nothing): the
   * file lags then only in updated_at and usage, which the log holds and start-up takes from it
   * (log-summary.ts). Saved anyway when other instances read the record.
   */
  setStatus(id: string, status: ConversationStatus, runId: string | null = null): void {
    const record = this.mutable(id);
    const before = { status: record.status, current_run_id: record.current_run_id };
    record.status = status;
    // A run waiting for an answer is still the current run.
    record.current_run_id = status === 'running' || status === 'waiting_for_input' ? runId : null;
    if (!this.deps.persistUsage && !this.deps.persistRunStart && !record.quarantine && this.onDisk.holds(record)) {
      this.touch(record, isoTimestamp(this.clock.now()));
      return;
    }
    this.saveOrUndo(record, before);
  }

  /**
   * A run starts: status `running` with the run's id, no actions waiting. Saved only when the
   * record on disk would be wrong without it (actions waiting, a question) or other instances read
   * it (`persistRunStart`): a run in progress is on disk anyway, in its run record and its
   * `state_update` event, which recovery reads. This spares a rename before the run's 202.
   */
  startRunning(id: string, runId: string): void {
    const record = this.mutable(id);
    const before = { status: record.status, current_run_id: record.current_run_id, pending_actions: record.pending_actions };
    const save = this.deps.persistRunStart || record.pending_actions.length > 0 || !SETTLED.has(record.status) || record.current_run_id !== null;
    record.status = 'running';
    record.current_run_id = runId;
    record.pending_actions = [];
    if (!save) {
      this.touch(record, isoTimestamp(this.clock.now()));
      return;
    }
    this.saveOrUndo(record, before);
  }

  /** Actions waiting for approval (saved with the status that follows them). */
  setPendingActions(id: string, actions: PendingAction[]): void {
    this.mutable(id).pending_actions = actions;
  }

  /** A run that could not start: status, pending actions and current run as they were, saved when the disk lets it. */
  restore(id: string, before: Pick<ConversationRecord, 'status' | 'pending_actions'>): void {
    const record = this.mutable(id);
    Object.assign(record, before, { current_run_id: null });
    this.save(record);
  }

  /** Recording a run's end failed: the conversation must not look running (saved when the disk lets it). */
  failRunning(id: string): void {
    const record = this.mutable(id);
    if (record.status !== 'running') return;
    record.status = 'error';
    record.current_run_id = null;
    try {
      this.save(record);
    } catch {
      // still full: the state on disk catches up with the next save (a restart pauses the run)
    }
  }

  /**
   * Adds an LLM call's usage to the conversation's totals: in memory, saved with the next change,
   * or at once with `persistUsage` (several instances: the others list it from the database).
   * Returns the totals.
   */
  addUsage(id: string, usage: LlmUsage, model?: string): Readonly<ConversationRecord['usage']> {
    const record = this.mutable(id);
    const totals = record.usage;
    addUsageTo(totals, usage, model);
    if (this.deps.persistUsage && !record.quarantine) this.save(record);
    return totals;
  }

  /**
   * The project's rules, read as a message that starts a run arrives, held until the record's
   * next save writes them: the save of the title that message gives it (nameAfter), or else
   * `saveHeldRules` right after its append. One save for both, before the run starts; until then
   * the record does not show them, so nothing uses rules that are not on disk yet.
   */
  holdProjectPermissions(id: string, rules: ProjectPermissions): void {
    const record = this.records.get(id);
    if (record && !record.quarantine) this.heldRules.set(record, rules);
  }

  /** Saves the rules holdProjectPermissions held if no save wrote them yet; a save that fails lets them go (the run reads them again). */
  saveHeldRules(id: string): void {
    const record = this.records.get(id);
    if (!record || !this.heldRules.has(record)) return;
    try {
      this.save(this.mutable(id));
    } catch {
      this.heldRules.delete(record);
    }
  }

  /** Config changes already checked by the caller, saved at once. */
  configure(id: string, change: ConfigChange): void {
    const record = this.mutable(id);
    for (const [key, value] of Object.entries(change)) if (value !== undefined) (record as unknown as Record<string, unknown>)[key] = value;
    // The client choosing where settings come from is its approval to read the project's rules again.
    if (change.setting_sources !== undefined && change.project_permissions === undefined) {
      delete record.project_permissions;
      this.heldRules.delete(record);
    }
    holdUserKeyed(record);
    this.save(record);
  }

  /** The conversation's secrets and the former values that stay masked, saved. */
  setSecrets(id: string, change: Pick<ConversationRecord, 'secrets' | 'retired_secrets'>): void {
    const record = this.mutable(id);
    record.secrets = userKeyed(change.secrets);
    if (change.retired_secrets) record.retired_secrets = change.retired_secrets;
    this.secretChanges.changed(id);
    this.save(record);
  }

  /**
   * A conversation whose log turned out damaged on first use: quarantined from now on, as if it
   * had been found at start-up (status `error`, listed in /health, its files never written).
   */
  quarantineFound(id: string, error: DamagedDataError): boolean {
    // At load the record is not indexed yet: load() quarantines it itself.
    const record = this.records.get(id);
    if (!record || record.quarantine) return false;
    this.views.drop(record);
    record.quarantine = error.damage;
    record.status = 'error';
    this.records.quarantinedInPlace(record);
    return true;
  }

  /** The record to change: every transition gets it here, so its view is dropped first. */
  private mutable(id: string): ConversationRecord {
    const record = this.records.get(id);
    if (!record) throw new NotFoundError('conversation', id);
    this.views.drop(record);
    this.onDisk.changing(record);
    return record;
  }

  private save(record: ConversationRecord): void {
    if (record.quarantine) throw new ConversationQuarantinedError(record.id, record.quarantine);
    this.touch(record, isoTimestamp(this.clock.now()));
    // Rules held ahead of a run join the record once a save has written them (holdProjectPermissions).
    const held = record.project_permissions ? undefined : this.heldRules.get(record);
    const written = held ? { ...record, project_permissions: held } : record;
    // A change saved during a run its start did not save (a title, the project's rules) leaves the
    // file's status as it was: the run's end to that status saves nothing more (see setStatus).
    const kept = this.onDisk.statusKeptDuringRun(record);
    this.deps.repository.save(kept === null ? written : { ...written, status: kept, current_run_id: null });
    if (kept === null) this.onDisk.saved(record);
    if (held) record.project_permissions = held;
    this.heldRules.delete(record);
  }

  /** Saves the record; a save that fails (a full disk) puts back what `before` holds. */
  private saveOrUndo(record: ConversationRecord, before: Partial<ConversationRecord>): void {
    try {
      this.save(record);
    } catch (error) {
      Object.assign(record, before);
      this.views.drop(record);
      throw error;
    }
  }
}

/** Statuses of a conversation with no run in progress and nothing it waits on: a run may start over them without a save. */
const SETTLED: ReadonlySet<ConversationStatus> = new Set(['idle', 'paused', 'finished', 'error', 'stuck']);
