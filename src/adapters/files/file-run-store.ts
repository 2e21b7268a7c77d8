import fs from 'node:fs';
import path from 'node:path';
import { Run, type RunStore } from '../../core/agent/run-record.js';
import { DamagedDataError, StorageFullError } from '../../core/errors.js';
import { AppendFiles } from './append-line.js';
import { isOutOfSpace } from './disk-space.js';

const FILE = 'runs.jsonl';
/** Run files kept open between saves (the least recently saved closed first). */
const OPEN_FILES = 64;

/**
 * `<conversationsDir>/<id>/runs.jsonl`: one line per saved state of a run, appended; loading
 * keeps the newest state of each run. Loaded lazily (or by `list` at start-up) and cached per
 * conversation until the conversation is released after its idle timeout. A torn last line (a crash mid-append) is cut off; any other line that is not a
 * run is damage (DamagedDataError, nothing written).
 */
/** The runs of every conversation known to have none (never changed: a save replaces it with a Map of the conversation's own). */
const NO_RUNS: ReadonlyMap<string, Run> = new Map();

export class FileRunStore implements RunStore {
  private readonly cache = new Map<string, ReadonlyMap<string, Run>>();
  /** Saved at every step of a run: the files of the conversations running now stay open. */
  private readonly files = new AppendFiles({ max: OPEN_FILES });

  constructor(
    private readonly conversationsDir: string,
    private readonly options: {
      storageError?: (error: unknown) => unknown;
      /** A conversation's runs found damaged when first read (right after a clean stop, start-up does not read them): it is quarantined. */
      onDamaged?: (conversationId: string, error: DamagedDataError) => void;
    } = {},
  ) {}

  save(run: Run): void {
    const loaded = this.load(run.conversation_id);
    const runs = loaded === NO_RUNS ? new Map<string, Run>() : (loaded as Map<string, Run>);
    const file = this.fileOf(run.conversation_id);
    try {
      this.files.append(file, JSON.stringify(run));
    } catch (error) {
      throw this.options.storageError ? this.options.storageError(error) : isOutOfSpace(error) ? new StorageFullError() : error;
    }
    runs.set(run.id, { ...run });
    this.cache.set(run.conversation_id, runs);
  }

  list(conversationId: string): Run[] {
    return [...this.load(conversationId).values()];
  }

  /** An idle conversation's runs leave memory (read from the file again on next use): the cache holds only conversations in use. */
  release(conversationId: string): void {
    this.cache.delete(conversationId);
    this.files.close(this.fileOf(conversationId));
  }

  /** The server stops: the files kept open are closed. */
  close(): void {
    this.files.closeAll();
  }

  drop(conversationId: string): void {
    this.cache.delete(conversationId);
    this.files.close(this.fileOf(conversationId));
    fs.rmSync(this.fileOf(conversationId), { force: true });
  }

  private load(conversationId: string): ReadonlyMap<string, Run> {
    const cached = this.cache.get(conversationId);
    if (cached) return cached;
    try {
      return this.read(conversationId);
    } catch (error) {
      if (error instanceof DamagedDataError) this.options.onDamaged?.(conversationId, error);
      throw error;
    }
  }

  private read(conversationId: string): ReadonlyMap<string, Run> {
    const runs = new Map<string, Run>();
    const file = this.fileOf(conversationId);
    // Most conversations have no runs: checked without the cost of an ENOENT exception (all are read at start-up).
    let text = '';
    try {
      if (fs.statSync(file, { throwIfNoEntry: false })) text = fs.readFileSync(file, 'utf8');
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
    }
    const lines = text.split('\n');
    // After the last newline: empty, or a line torn by a crash (never acknowledged).
    const torn = lines.pop()!;
    lines.forEach((line, i) => {
      let value: unknown;
      try {
        value = JSON.parse(line);
      } catch {
        throw new DamagedDataError({ file: FILE, line: i + 1, reason: 'not valid JSON' }, file);
      }
      const run = Run.safeParse(value);
      if (!run.success || run.data.conversation_id !== conversationId) {
        throw new DamagedDataError({ file: FILE, line: i + 1, reason: 'not a run of this conversation' }, file);
      }
      runs.set(run.data.id, run.data);
    });
    if (torn.length > 0) fs.truncateSync(file, Buffer.byteLength(text) - Buffer.byteLength(torn));
    // A conversation without runs (most of them) costs no Map of its own: all share NO_RUNS (replaced by the first save),
    // so that start-up's integrity check and the recovery after it stat each conversation's file once, not twice.
    this.cache.set(conversationId, runs.size > 0 ? runs : NO_RUNS);
    return runs;
  }

  private fileOf(conversationId: string): string {
    return path.join(this.conversationsDir, conversationId, FILE);
  }
}
