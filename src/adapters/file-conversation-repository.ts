import fs from 'node:fs';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import { ConversationRecord, type ConversationRepository, type LoadedConversations } from '../core/conversations/conversation-record.js';
import type { ConversationSummary } from '../core/conversations/summary-store.js';
import type { SecretBox } from '../core/secrets/secret-box.js';
import { sealConversationRecord, unsealConversationRecord, type SealedConversationRecord } from './sealed-conversation-record.js';
import { DamagedDataError, StorageFullError } from '../core/errors.js';
import { isOutOfSpace } from './disk-space.js';
import { RecordSnapshot, stampOf, type SnapshotEntry } from './record-snapshot.js';

const FILE = 'conversation.json';
/** The conversation's event log (file-event-log), beside its record: its stamp says whether a snapshot's summary of it still holds. */
const LOG_FILE = 'events.jsonl';
const LOAD_CONCURRENCY = 64;
/** Beside the record: the file the next save writes (the record before the last save), and the name it has during a save. */
const SPARE = '.spare.tmp';
const PREVIOUS = '.previous.tmp';


/**
 * `<dir>/<id>/conversation.json`, written with temp file + rename. With `snapshotFile`, all
 * records are also kept in one sealed snapshot at a clean shutdown (record-snapshot.ts): the
 * starts after it (after a crash too) take each record whose file is unchanged from it, and the
 * summary of each log that is unchanged, and read only the others.
 */
export class FileConversationRepository implements ConversationRepository {
  private readonly snapshot: RecordSnapshot | null;
  /** Saves write over the previous record's file (see saveThroughSpare) until hard links turn out impossible. */
  private spareFiles = true;

  constructor(
    private readonly dir: string,
    private readonly box: SecretBox,
    private readonly options: { fsync?: boolean; storageError?: (error: unknown) => unknown; snapshotFile?: string } = {},
  ) {
    fs.mkdirSync(dir, { recursive: true });
    this.snapshot = options.snapshotFile ? new RecordSnapshot(options.snapshotFile, box) : null;
  }

  async loadAll(options: { afterCleanStop?: boolean } = {}): Promise<LoadedConversations> {
    const snapshot = this.snapshot?.load() ?? null;
    const entries = await fs.promises.readdir(this.dir, { withFileTypes: true });
    const ids: string[] = [];
    for (const entry of entries) if (entry.isDirectory()) ids.push(entry.name);
    const loaded: LoadedConversations = { records: [], damaged: [] };
    // From the snapshot: a record whose file is as the snapshot saw it (one stat, no read, decrypt or validation).
    const unread = snapshot ? ids.filter((id) => !this.fromSnapshot(id, snapshot.get(id), loaded)) : ids;
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
    if (snapshot) loaded.summaryOf = (id) => this.summaryFromSnapshot(id, snapshot.get(id));
    // After a clean shutdown no save was cut short: nothing to sweep.
    if (!options.afterCleanStop) void this.sweepTemporaryFiles(ids);
    return loaded;
  }

  private fromSnapshot(id: string, entry: SnapshotEntry | undefined, loaded: LoadedConversations): boolean {
    if (!entry) return false;
    const stat = fs.statSync(`${this.dir}/${id}/${FILE}`, { throwIfNoEntry: false });
    if (!stat || stampOf(stat) !== entry.stamp || entry.record.id !== id) return false;
    loaded.records.push(entry.record);
    return true;
  }

  /** The summary of the conversation's log as the snapshot saw it, while the log file is unchanged (its stamp). */
  private summaryFromSnapshot(id: string, entry: SnapshotEntry | undefined): ConversationSummary | undefined {
    if (!entry?.log) return undefined;
    const stat = fs.statSync(`${this.dir}/${id}/${LOG_FILE}`, { throwIfNoEntry: false });
    if (!stat || stampOf(stat) !== entry.log.stamp) return undefined;
    return { updated_at: entry.record.updated_at, event_count: entry.log.eventCount };
  }

  /**
   * At a clean shutdown, once nothing saves records or appends events any more: the records as
   * held in memory, each with the stamp of its file (one without a file, never saved, is left
   * out), and its log's stamp and event count.
   */
  async saveSnapshot(records: Iterable<Readonly<ConversationRecord>>, summaries: ReadonlyMap<string, ConversationSummary>): Promise<void> {
    if (!this.snapshot) return;
    const all = [...records];
    const entries: [string, SnapshotEntry][] = [];
    const statOf = (file: string) => fs.promises.stat(file).catch(() => null);
    for (let i = 0; i < all.length; i += LOAD_CONCURRENCY) {
      const batch = all.slice(i, i + LOAD_CONCURRENCY);
      const stats = await Promise.all(batch.map((record) => Promise.all([statOf(`${this.dir}/${record.id}/${FILE}`), statOf(`${this.dir}/${record.id}/${LOG_FILE}`)])));
      batch.forEach((record, j) => {
        const [stat, logStat] = stats[j]!;
        if (!stat) return;
        const log = logStat && { stamp: stampOf(logStat), eventCount: summaries.get(record.id)?.event_count ?? 0 };
        entries.push([record.id, { record: record as ConversationRecord, stamp: stampOf(stat), log }]);
      });
    }
    await this.snapshot.save(entries);
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
    fs.mkdirSync(dir, { recursive: true });
    const target = path.join(dir, FILE);
    const text = Buffer.from(JSON.stringify(this.seal(record)));
    const spares = !this.options.fsync && this.spareFiles;
    if (spares && this.saveOverSpare(target, text)) return;
    const temp = `${target}.${randomBytes(6).toString('hex')}.tmp`;
    try {
      const fd = fs.openSync(temp, 'w', 0o600);
      try {
        writeAll(fd, text);
        if (this.options.fsync) fs.fsyncSync(fd);
      } finally {
        fs.closeSync(fd);
      }
      const kept = spares && this.keepAsSpare(target);
      fs.renameSync(temp, target);
      if (kept) blankQuietly(`${target}${SPARE}`);
    } catch (error) {
      // The old record stays as it was; the partial temp file goes.
      fs.rmSync(temp, { force: true });
      throw this.storageError(error);
    }
  }

  /**
   * A save without fsync, as cheap as a write in place and as safe as temp file + rename: the new
   * record is written over the file that the previous save replaced (kept by a hard link), which
   * is then renamed over the record. A new file renamed over an existing one makes ext4 write its
   * data out within the rename (auto_da_alloc: 0.25-0.35 ms at the median on this disk, 2-2.7 ms
   * at the 90th percentile); a file whose blocks are allocated has nothing to write out (0.06-0.08
   * ms for the whole save). At every step the record is the old one or the new one, whole; a crash
   * leaves the spare files (`*.tmp`), swept at the next start. False when there is no spare yet.
   */
  private saveOverSpare(target: string, text: Buffer): boolean {
    const spare = `${target}${SPARE}`;
    const previous = `${target}${PREVIOUS}`;
    let fd: number;
    try {
      fd = fs.openSync(spare, fs.constants.O_WRONLY | fs.constants.O_NOFOLLOW);
    } catch {
      return false;
    }
    try {
      try {
        writeAll(fd, text, 0);
        fs.ftruncateSync(fd, text.length);
      } finally {
        fs.closeSync(fd);
      }
      // The record being replaced stays, as the next save's spare.
      linkReplacing(target, previous);
      fs.renameSync(spare, target);
    } catch (error) {
      // The record is as it was; the spare goes, and a later save makes another.
      fs.rmSync(spare, { force: true });
      fs.rmSync(previous, { force: true });
      if (!LINKS_UNSUPPORTED.has((error as NodeJS.ErrnoException).code ?? '')) throw this.storageError(error);
      this.spareFiles = false;
      return false;
    }
    // Saved. What the old record held (a secret since deleted, sealed) is not kept: zeros over it, its blocks stay allocated.
    try {
      blank(previous);
      fs.renameSync(previous, spare);
    } catch {
      removeQuietly(previous);
    }
    return true;
  }

  /** Before a usual save replaces the record: its file is kept as the spare of the next save (see saveOverSpare). */
  private keepAsSpare(target: string): boolean {
    try {
      fs.linkSync(target, `${target}${SPARE}`);
      return true;
    } catch (error) {
      // ENOENT: the record's first save.
      if (LINKS_UNSUPPORTED.has((error as NodeJS.ErrnoException).code ?? '')) this.spareFiles = false;
      return false;
    }
  }

  private storageError(error: unknown): unknown {
    return this.options.storageError ? this.options.storageError(error) : isOutOfSpace(error) ? new StorageFullError() : error;
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

/** What link(2) answers where the file system has no hard links. */
const LINKS_UNSUPPORTED = new Set(['EPERM', 'ENOTSUP', 'EOPNOTSUPP', 'EMLINK', 'EXDEV', 'ENOSYS']);

/** A hard link `to` → `from`'s file, in place of whatever `to` was (a save cut short left it). */
function linkReplacing(from: string, to: string): void {
  try {
    fs.linkSync(from, to);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
    fs.unlinkSync(to);
    fs.linkSync(from, to);
  }
}

/** Zeros over the file's content, its size kept (no block is freed). */
function blank(file: string): void {
  const fd = fs.openSync(file, fs.constants.O_WRONLY | fs.constants.O_NOFOLLOW);
  try {
    writeAll(fd, Buffer.alloc(fs.fstatSync(fd).size), 0);
  } finally {
    fs.closeSync(fd);
  }
}

/** blank, or the file goes (a later save makes another spare). */
function blankQuietly(file: string): void {
  try {
    blank(file);
  } catch {
    removeQuietly(file);
  }
}

/** After the record was saved: a spare that cannot be blanked or renamed goes, and nothing fails. */
function removeQuietly(file: string): void {
  try {
    fs.rmSync(file, { force: true });
  } catch {
    // left for the sweep at the next start
  }
}

function writeAll(fd: number, text: Buffer, position?: number): void {
  let written = 0;
  while (written < text.length) written += fs.writeSync(fd, text, written, text.length - written, position === undefined ? null : position + written);
}
