import fs from 'node:fs';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import { ConversationRecord, type ConversationRepository, type LoadedConversations } from '../../core/conversations/conversation-record.js';
import type { ConversationSummary } from '../../core/conversations/summary-store.js';
import type { SecretBox } from '../../core/secrets/secret-box.js';
import { sealConversationRecord, unsealConversationRecord, type SealedConversationRecord } from './sealed-conversation-record.js';
import { DamagedDataError, StorageFullError } from '../../core/errors.js';
import { isOutOfSpace } from './disk-space.js';
import { hasStamp, RecordSnapshot, stampOf, type SavedSnapshot, type SnapshotEntry } from './record-snapshot.js';
import { compareByKeyThenId } from '../../core/conversations/sorted-index.js';
import { writeFileAtomic } from './atomic-write.js';

const FILE = 'conversation.json';
/** The conversation's event log (file-event-log), beside its record: its stamp says whether a snapshot's summary of it still holds. */
const LOG_FILE = 'events.jsonl';
const LOAD_CONCURRENCY = 64;


/**
 * `<dir>/<id>/conversation.json`, written with temp file + rename. With `snapshotFile`, all
 * records are also kept in one sealed snapshot at a clean shutdown (record-snapshot.ts): the start
 * right after it takes every record and log summary from it; the starts after a crash take each
 * record whose file is unchanged from it, and the summary of each log that is unchanged, and read
 * only the others.
 */
export class FileConversationRepository implements ConversationRepository {
  private readonly snapshot: RecordSnapshot | null;

  constructor(
    private readonly dir: string,
    private readonly box: SecretBox,
    private readonly options: { fsync?: boolean; storageError?: (error: unknown) => unknown; snapshotFile?: string; workdirBase?: string } = {},
  ) {
    fs.mkdirSync(dir, { recursive: true });
    this.snapshot = options.snapshotFile ? new RecordSnapshot(options.snapshotFile, box, options.workdirBase ?? null) : null;
  }

  async loadAll(options: { afterCleanStop?: boolean; snapshotToken?: string } = {}): Promise<LoadedConversations> {
    // The directory's stamp before the snapshot is read, and before the listing that it may spare.
    const dirStat = fs.statSync(this.dir);
    const saved = this.snapshot?.load() ?? null;
    // Unchanged since the snapshot was saved: no directory was added or removed since, and its records named them all then.
    const listed = saved && hasStamp(dirStat, saved.dirStamp) ? null : await this.list();
    const loaded: LoadedConversations = { records: [], damaged: [] };
    // Without a snapshot, every directory listed; with one, those it does not give (takeFromSnapshot).
    let unread = listed ?? [];
    if (saved) {
      const { taken, untaken, current } = this.takeFromSnapshot(saved, listed, options.snapshotToken);
      // In the snapshot's order (created_at: see saveSnapshot), which the index then need not sort.
      for (const i of taken) loaded.records.push(saved.records[i]!);
      unread = untaken;
      loaded.summaryAt = (at) => (at < taken.length ? this.summaryFromSnapshot(saved, taken[at]!, current) : undefined);
      if (current) loaded.rightAfterCleanStop = true;
    }
    // Reads overlap (the disk may be slow to answer one at a time); parsing each is synchronous.
    for (let i = 0; i < unread.length; i += LOAD_CONCURRENCY) {
      const batch = await Promise.all(unread.slice(i, i + LOAD_CONCURRENCY).map((id) => this.read(id)));
      for (const { id, text } of batch) {
        if (text === undefined) continue;
        try {
          loaded.records.push(this.parse(id, text));
        } catch (error) {
          if (!(error instanceof DamagedDataError)) throw error;
          loaded.damaged.push({ id, error });
        }
      }
    }
    // After a clean shutdown no save was cut short: nothing to sweep.
    if (!options.afterCleanStop) void this.sweepTemporaryFiles(listed ?? saved!.records.map((record) => record.id));
    return loaded;
  }

  /** The conversation directories' names (each a conversation's id, or a deleted one's leftovers). */
  private async list(): Promise<string[]> {
    const ids: string[] = [];
    for (const entry of await fs.promises.readdir(this.dir, { withFileTypes: true })) if (entry.isDirectory()) ids.push(entry.name);
    return ids;
  }

  /**
   * From the snapshot (one to trust): the place in it of each record whose directory is here
   * (`listed`; null: not listed, the directory unchanged since the snapshot) and whose file is as
   * the snapshot saw it (no read, decrypt or validation), in its order; the directories to read
   * (`untaken`: listed and not taken, or not listed and changed); and whether the snapshot is `current`:
   * written by the clean shutdown just before this start (its summaries say so, and are gone once
   * read), so that no server has saved a record or appended to a log since. A current snapshot's
   * records are taken as its logs' summaries are, without a look at their files; otherwise (a start
   * after a crash) with one stat of each file, which at many conversations is felt in the start.
   */
  private takeFromSnapshot(saved: SavedSnapshot, listed: readonly string[] | null, snapshotToken: string | undefined): { taken: number[]; untaken: string[]; current: boolean } {
    const current = saved.token === snapshotToken;
    const here = listed && new Set(listed);
    const taken: number[] = [];
    const untaken: string[] = [];
    saved.records.forEach(({ id }, i) => {
      if (here && !here.has(id)) return;
      const stat = current ? undefined : fs.statSync(`${this.dir}/${id}/${FILE}`, { throwIfNoEntry: false });
      if (current || (stat && saved.recordUnchanged(i, stat))) {
        taken.push(i);
        here?.delete(id);
      } else if (!here) untaken.push(id);
    });
    // Listed: what is left of the list, in its order.
    if (here) untaken.push(...here);
    return { taken, untaken, current };
  }

  /**
   * The summary of the log of the snapshot's i-th record as the snapshot saw it: while the log
   * file is unchanged (its stamp), or without a look at it when the snapshot is `current` (the
   * clean shutdown just before this start wrote it, as it wrote summaries.json before).
   */
  private summaryFromSnapshot(saved: SavedSnapshot, i: number, current: boolean): ConversationSummary | undefined {
    if (!saved.hadLog(i)) return undefined;
    const record = saved.records[i]!;
    if (!current) {
      const stat = fs.statSync(`${this.dir}/${record.id}/${LOG_FILE}`, { throwIfNoEntry: false });
      if (!stat || !saved.logUnchanged(i, stat)) return undefined;
    }
    return { updated_at: record.updated_at, event_count: saved.eventCount(i) };
  }

  /**
   * At a clean shutdown, once nothing saves records or appends events any more: the records as
   * held in memory, each with the stamp of its file (one without a file, never saved, is left
   * out), and its log's stamp and event count.
   */
  async saveSnapshot(records: Iterable<Readonly<ConversationRecord>>, summaries: ReadonlyMap<string, ConversationSummary>): Promise<string | undefined> {
    if (!this.snapshot) return undefined;
    // Taken first: a directory added after it changes it (the next start lists the directory).
    const dirStamp = stampOf(await fs.promises.stat(this.dir));
    const names = await fs.promises.readdir(this.dir);
    // In created_at order, as the index sorts them (as the store holds them after a start from a snapshot: then sorted already).
    const all = [...records].sort((a, b) => compareByKeyThenId(a.created_at, a.id, b.created_at, b.id));
    const entries: SnapshotEntry[] = [];
    const statOf = (file: string) => fs.promises.stat(file).catch(() => null);
    for (let i = 0; i < all.length; i += LOAD_CONCURRENCY) {
      const batch = all.slice(i, i + LOAD_CONCURRENCY);
      const stats = await Promise.all(batch.map((record) => Promise.all([statOf(`${this.dir}/${record.id}/${FILE}`), statOf(`${this.dir}/${record.id}/${LOG_FILE}`)])));
      batch.forEach((record, j) => {
        const [stat, logStat] = stats[j]!;
        if (!stat) return;
        const log = logStat && { stamp: stampOf(logStat), eventCount: summaries.get(record.id)?.event_count ?? 0 };
        entries.push({ record: record as ConversationRecord, stamp: stampOf(stat), log });
      });
    }
    // The next start skips listing the directory only if these records name all it holds (not a quarantined conversation's, say).
    const saved = new Set(entries.map(({ record }) => record.id));
    return this.snapshot.save(entries, names.every((name) => saved.has(name)) ? dirStamp : null);
  }

  /**
   * A save cut short by a crash leaves its temp file beside the record: harmless (never read),
   * removed after start-up in the background rather than by a directory listing per conversation
   * while the server is not yet serving. Only files older than this process are removed, never
   * the temp file of a save under way.
   */
  private async sweepTemporaryFiles(ids: readonly string[]): Promise<void> {
    const startedMs = Date.now() - process.uptime() * 1000;
    for (const id of ids) {
      const dir = path.join(this.dir, id);
      try {
        for (const name of await fs.promises.readdir(dir)) {
          if (!name.endsWith('.tmp')) continue;
          const file = path.join(dir, name);
          if ((await fs.promises.stat(file)).mtimeMs < startedMs) await fs.promises.rm(file, { force: true });
        }
      } catch {
        // Gone meanwhile (deleted): nothing to sweep.
      }
    }
  }

  save(record: ConversationRecord): void {
    const dir = path.join(this.dir, record.id);
    const content = JSON.stringify(this.seal(record));
    const write = () => writeFileAtomic(path.join(dir, FILE), content, { mode: 0o600, fsync: this.options.fsync });
    try {
      // The old record stays as it was when this fails; the partial temp file goes.
      try {
        write();
      } catch (error) {
        // The directory is made by the record's first save, not looked for at every save.
        if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
        fs.mkdirSync(dir, { recursive: true });
        write();
      }
    } catch (error) {
      throw this.options.storageError ? this.options.storageError(error) : isOutOfSpace(error) ? new StorageFullError() : error;
    }
  }

  /**
   * Off the event loop (a DELETE's files may take the disk a while); the DELETE awaits the
   * returned promise before it drops the log and answers. The record goes first: a
   * crash midway leaves a directory without a record, removed at the next load. The directory is
   * then moved aside in one rename and its files (the log, checkpoints, a shadow repository)
   * removed in the background; what a crash leaves of them is removed at the next load too. The
   * records snapshot goes with the first DELETE (it holds the record, secrets included).
   */
  remove(id: string): Promise<void> {
    const dir = path.join(this.dir, id);
    const removal = (async () => {
      // A failure here fails the DELETE (before the log goes), as when this was synchronous.
      await fs.promises.rm(path.join(dir, FILE), { force: true });
      await this.snapshot?.discard();
      const trash = path.join(this.dir, `.deleted-${id}-${randomBytes(4).toString('hex')}`);
      try {
        await fs.promises.rename(dir, trash);
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code !== 'ENOENT') await fs.promises.rm(dir, { recursive: true, force: true }).catch(() => undefined);
        return;
      }
      void fs.promises.rm(trash, { recursive: true, force: true }).catch(() => undefined);
    })();
    return removal;
  }

  /** A record's text; undefined (and the directory removed) when it has none. */
  private async read(id: string): Promise<{ id: string; text?: string }> {
    const dir = path.join(this.dir, id);
    try {
      // fs.readFile, not fs.promises.readFile: the same reads without a FileHandle object per file.
      const text = await new Promise<string>((resolve, reject) => fs.readFile(path.join(dir, FILE), 'utf8', (error, data) => (error ? reject(error) : resolve(data))));
      return { id, text };
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
      // Half-deleted or never completed: nothing was acknowledged for it.
      await fs.promises.rm(dir, { recursive: true, force: true });
      return { id };
    }
  }

  private parse(id: string, text: string): ConversationRecord {
    const dir = path.join(this.dir, id);
    const file = path.join(dir, FILE);
    const damaged = (reason: string) => new DamagedDataError({ file: FILE, line: null, reason }, file);
    let disk: SealedConversationRecord;
    try {
      disk = JSON.parse(text) as SealedConversationRecord;
    } catch (error) {
      throw damaged(`not valid JSON (${(error as Error).message})`);
    }
    if (typeof disk !== 'object' || disk === null || disk.id !== id || typeof disk.status !== 'string' || typeof disk.created_at !== 'string' || typeof disk.workdir !== 'string') {
      throw damaged('not a conversation record of this directory');
    }
    let unsealed: ConversationRecord;
    try {
      unsealed = this.unseal(disk);
    } catch {
      throw damaged('its sealed secrets cannot be decrypted with this server\'s secret key');
    }
    // Checked once in plain text, with the limits of the fields as a client sends them.
    const parsed = ConversationRecord.safeParse(unsealed);
    if (!parsed.success) {
      const issue = parsed.error.issues[0]!;
      throw damaged(`not a valid conversation record (${issue.path.join('.') || 'record'}: ${issue.message})`);
    }
    return parsed.data;
  }

  private seal(record: ConversationRecord): SealedConversationRecord {
    return sealConversationRecord(record, this.box);
  }

  private unseal(disk: SealedConversationRecord): ConversationRecord {
    return unsealConversationRecord(disk, this.box);
  }
}
