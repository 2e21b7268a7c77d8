import fs from 'node:fs';
import path from 'node:path';
import { Run, type RunStore } from '../core/agent/run-record.js';
import { DamagedDataError, StorageFullError } from '../core/errors.js';
import { appendLine } from './append-line.js';
import { isOutOfSpace } from './disk-space.js';

const FILE = 'runs.jsonl';

/**
 * `<conversationsDir>/<id>/runs.jsonl`: one line per saved state of a run, appended; loading
 * keeps the newest state of each run. Loaded lazily (or by `list` at start-up) and cached per
 * conversation. A torn last line (a crash mid-append) is cut off; any other line that is not a
 * run is damage (DamagedDataError, nothing written).
 */
export class FileRunStore implements RunStore {
  private readonly cache = new Map<string, Map<string, Run>>();

  constructor(
    private readonly conversationsDir: string,
    private readonly options: { storageError?: (error: unknown) => unknown } = {},
  ) {}

  save(run: Run): void {
    const runs = this.load(run.conversation_id);
    const file = this.fileOf(run.conversation_id);
    try {
      appendLine(file, JSON.stringify(run));
    } catch (error) {
      throw this.options.storageError ? this.options.storageError(error) : isOutOfSpace(error) ? new StorageFullError() : error;
    }
    runs.set(run.id, { ...run });
    this.cache.set(run.conversation_id, runs);
  }

  list(conversationId: string): Run[] {
    return [...this.load(conversationId).values()];
  }

  drop(conversationId: string): void {
    this.cache.delete(conversationId);
    fs.rmSync(this.fileOf(conversationId), { force: true });
  }

  private load(conversationId: string): Map<string, Run> {
    let runs = this.cache.get(conversationId);
    if (runs) return runs;
    runs = new Map();
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
    // A conversation without runs (most of them) costs no Map while it has none: the next read stats the file again.
    if (runs.size > 0) this.cache.set(conversationId, runs);
    return runs;
  }

  private fileOf(conversationId: string): string {
    return path.join(this.conversationsDir, conversationId, FILE);
  }
}
