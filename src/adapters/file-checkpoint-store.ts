import fs from 'node:fs';
import path from 'node:path';
import type { CheckpointRecord } from '../core/checkpoints/checkpoint-schemas.js';
import type { CheckpointStore } from '../core/checkpoints/checkpoint-store.js';
import { appendLine } from './append-line.js';

const FILE = 'checkpoints.jsonl';

/**
 * `<dir>/<id>/checkpoints.jsonl` (one line per checkpoint) beside the shadow repository
 * `<id>/shadow.git`: both go when the conversation is deleted. A torn last line (a crash
 * mid-append) is dropped; a checkpoint is only listed once its line is whole.
 *
 * `dir` is the data dir's conversations (their directories go with them), or with several
 * instances a directory of its own on the storage they share (`ownDirectory`: this store removes
 * a deleted conversation's checkpoints itself). Only the instance running a conversation writes
 * its checkpoints; one that takes it over reads them again (`evict`).
 */
export class FileCheckpointStore implements CheckpointStore {
  private readonly cache = new Map<string, CheckpointRecord[]>();

  constructor(
    private readonly conversationsDir: string,
    private readonly options: { ownDirectory?: boolean } = {},
  ) {}

  append(record: CheckpointRecord): void {
    const records = this.load(record.conversation_id);
    const file = this.fileOf(record.conversation_id);
    appendLine(file, JSON.stringify(record));
    records.push(record);
  }

  list(conversationId: string): readonly CheckpointRecord[] {
    return this.load(conversationId);
  }

  gitDirOf(conversationId: string): string {
    return path.join(this.conversationsDir, conversationId, 'shadow.git');
  }

  private load(conversationId: string): CheckpointRecord[] {
    let records = this.cache.get(conversationId);
    if (records) return records;
    records = [];
    const file = this.fileOf(conversationId);
    const text = fs.existsSync(file) ? fs.readFileSync(file, 'utf8') : '';
    const lines = text.split('\n');
    const torn = lines.pop()!;
    for (const line of lines) {
      try {
        const record = JSON.parse(line) as CheckpointRecord;
        if (record && record.conversation_id === conversationId) records.push(record);
      } catch {
        // a line that is not a checkpoint is skipped: checkpoints are an aid, never a reason to refuse the conversation
      }
    }
    if (torn.length > 0) fs.truncateSync(file, Buffer.byteLength(text) - Buffer.byteLength(torn));
    this.cache.set(conversationId, records);
    return records;
  }

  /** The conversation was deleted: its checkpoints go (with its directory, or here when they have one of their own). */
  forget(conversationId: string): void {
    this.cache.delete(conversationId);
    if (this.options.ownDirectory) fs.rmSync(path.join(this.conversationsDir, conversationId), { recursive: true, force: true });
  }

  /** Another instance may have taken checkpoints of this conversation: read them again when next asked. */
  evict(conversationId: string): void {
    this.cache.delete(conversationId);
  }

  private fileOf(conversationId: string): string {
    return path.join(this.conversationsDir, conversationId, FILE);
  }
}
