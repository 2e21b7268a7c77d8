import fs from 'node:fs';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import type { ConversationRecord, ConversationRepository } from '../core/conversations/conversation-record.js';
import type { SecretBox } from '../core/secrets/secret-box.js';

const FILE = 'conversation.json';
const LOAD_CONCURRENCY = 64;

/** The record as written to disk: secret values and the LLM key sealed with the SecretBox. */
type DiskRecord = Omit<ConversationRecord, 'secrets' | 'llm'> & {
  llm: (Omit<NonNullable<ConversationRecord['llm']>, 'api_key'> & { api_key: string | null }) | null;
  secrets: Record<string, string>;
};

/** `<dir>/<id>/conversation.json`, written with temp file + rename. */
export class FileConversationRepository implements ConversationRepository {
  constructor(
    private readonly dir: string,
    private readonly box: SecretBox,
    private readonly options: { fsync?: boolean } = {},
  ) {
    fs.mkdirSync(dir, { recursive: true });
  }

  async loadAll(): Promise<ConversationRecord[]> {
    const ids = (await fs.promises.readdir(this.dir, { withFileTypes: true })).filter((entry) => entry.isDirectory()).map((entry) => entry.name);
    const records: ConversationRecord[] = [];
    for (let i = 0; i < ids.length; i += LOAD_CONCURRENCY) {
      const batch = await Promise.all(ids.slice(i, i + LOAD_CONCURRENCY).map((id) => this.load(id)));
      for (const record of batch) if (record) records.push(record);
    }
    return records;
  }

  save(record: ConversationRecord): void {
    const dir = path.join(this.dir, record.id);
    fs.mkdirSync(dir, { recursive: true });
    const target = path.join(dir, FILE);
    const temp = `${target}.${randomBytes(6).toString('hex')}.tmp`;
    const fd = fs.openSync(temp, 'w', 0o600);
    try {
      fs.writeSync(fd, JSON.stringify(this.seal(record)));
      if (this.options.fsync) fs.fsyncSync(fd);
    } finally {
      fs.closeSync(fd);
    }
    fs.renameSync(temp, target);
  }

  remove(id: string): void {
    const dir = path.join(this.dir, id);
    // The record goes first: a crash midway leaves a directory without a record, cleaned at load.
    fs.rmSync(path.join(dir, FILE), { force: true });
    fs.rmSync(dir, { recursive: true, force: true });
  }

  private async load(id: string): Promise<ConversationRecord | undefined> {
    const dir = path.join(this.dir, id);
    let text: string;
    try {
      text = await fs.promises.readFile(path.join(dir, FILE), 'utf8');
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
      // Half-deleted or never completed: nothing was acknowledged for it.
      await fs.promises.rm(dir, { recursive: true, force: true });
      return undefined;
    }
    for (const leftover of await fs.promises.readdir(dir)) {
      if (leftover.endsWith('.tmp')) await fs.promises.rm(path.join(dir, leftover), { force: true });
    }
    return this.unseal(JSON.parse(text) as DiskRecord);
  }

  private seal(record: ConversationRecord): DiskRecord {
    const secrets: Record<string, string> = {};
    for (const [name, value] of Object.entries(record.secrets)) secrets[name] = this.box.encrypt(value);
    const llm = record.llm ? { ...record.llm, api_key: record.llm.api_key ? this.box.encrypt(record.llm.api_key) : null } : null;
    return { ...record, llm, secrets };
  }

  private unseal(disk: DiskRecord): ConversationRecord {
    const secrets: Record<string, string> = {};
    for (const [name, value] of Object.entries(disk.secrets ?? {})) secrets[name] = this.box.decrypt(value);
    const llm = disk.llm ? { ...disk.llm, api_key: disk.llm.api_key ? this.box.decrypt(disk.llm.api_key) : null } : null;
    return { ...disk, llm, secrets };
  }
}
