import fs from 'node:fs';
import path from 'node:path';
import type { CheckpointRecord } from '../../core/checkpoints/checkpoint-schemas.js';
import type { CheckpointStore } from '../../core/checkpoints/checkpoint-store.js';
import { AppendFiles } from '../files/append-line.js';

const FILE = 'checkpoints.jsonl';
/** Checkpoint files kept open between appends (a run takes one per step; the least recently used closed first). */
const OPEN_FILES = 64;

/**
 * `<dir>/<id>/checkpoints.jsonl` (one line per checkpoint) beside the shadow repository
 * `<id>/shadow.git`: both go when the conversation is deleted. A torn last line (a crash
 * mid-append) is dropped; a checkpoint is only listed once its line is whole.
 *
 * Memory holds each conversation's newest checkpoint only (what the next one is compared with):
 * a run takes one per step, and keeping them all held every conversation's whole list for the
 * process's life. `list` (an API read, a rewind, a fork) reads the file.
 *
 * `dir` is the data dir's conversations (their directories go with them), or with several
 * instances a directory of its own on the storage they share (`ownDirectory`: this store removes
 * a deleted conversation's checkpoints itself). Only the instance running a conversation writes
 * its checkpoints; one that takes it over reads them again (`evict`).
 */
export class FileCheckpointStore implements CheckpointStore {
  /** The newest checkpoint of each conversation whose file was read (and a torn line cut off), null when it has none. */
  private readonly newest = new Map<string, CheckpointRecord | null>();
  private readonly files = new AppendFiles({ max: OPEN_FILES });

  constructor(
    private readonly conversationsDir: string,
    private readonly options: { ownDirectory?: boolean } = {},
  ) {}

  append(record: CheckpointRecord): void {
    // Read once first: a torn line left by a crash is cut off before a whole one follows it.
    if (!this.newest.has(record.conversation_id)) this.last(record.conversation_id);
    this.files.append(this.fileOf(record.conversation_id), JSON.stringify(record));
    this.newest.set(record.conversation_id, record);
  }

  /** Read from the file once (a torn last line cut off: only this instance, the conversation's, appends to it), then kept. */
  last(conversationId: string): CheckpointRecord | undefined {
    if (!this.newest.has(conversationId)) this.newest.set(conversationId, this.read(conversationId, { repair: true }).at(-1) ?? null);
    return this.newest.get(conversationId) ?? undefined;
  }

  /** From the file; a torn last line is not a checkpoint (left for the writer to cut off). */
  list(conversationId: string): readonly CheckpointRecord[] {
    return this.read(conversationId, { repair: false });
  }

  private read(conversationId: string, options: { repair: boolean }): CheckpointRecord[] {
    const records: CheckpointRecord[] = [];
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
    if (options.repair && torn.length > 0) fs.truncateSync(file, Buffer.byteLength(text) - Buffer.byteLength(torn));
    return records;
  }

  gitDirOf(conversationId: string): string {
    return path.join(this.conversationsDir, conversationId, 'shadow.git');
  }

  /** The conversation was deleted: its checkpoints go (with its directory, or here when they have one of their own). */
  forget(conversationId: string): void {
    this.newest.delete(conversationId);
    this.files.close(this.fileOf(conversationId));
    if (this.options.ownDirectory) fs.rmSync(path.join(this.conversationsDir, conversationId), { recursive: true, force: true });
  }

  /** Another instance may have taken checkpoints of this conversation: read them again when next asked. */
  evict(conversationId: string): void {
    this.newest.delete(conversationId);
    this.files.close(this.fileOf(conversationId));
  }

  /** The server stops: the files kept open are closed. */
  close(): void {
    this.files.closeAll();
  }

  /** The conversation went idle: its newest checkpoint is read from the file again when next needed. */
  release(conversationId: string): void {
    this.newest.delete(conversationId);
    this.files.close(this.fileOf(conversationId));
  }

  private fileOf(conversationId: string): string {
    return path.join(this.conversationsDir, conversationId, FILE);
  }
}
