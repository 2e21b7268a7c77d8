import fs from 'node:fs';
import { writeFileAtomic } from '../files/index.js';
import { KeyRecord } from '../../core/access/api-key.js';
import type { KeyStore } from '../../core/access/key-store.js';

/** The keys in one file of the data dir (`keys.json`, mode 0600), held in memory, replaced whole at each change. */
export class FileKeyStore implements KeyStore {
  private readonly byId = new Map<string, KeyRecord>();
  private readonly byHash = new Map<string, KeyRecord>();

  constructor(
    private readonly file: string,
    private readonly options: { fsync: boolean },
  ) {
    let text: string | null = null;
    try {
      text = fs.readFileSync(file, 'utf8');
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
    }
    if (text !== null) for (const record of KeyRecord.array().parse(JSON.parse(text))) this.hold(record);
  }

  async list(): Promise<KeyRecord[]> {
    return [...this.byId.values()].map((record) => ({ ...record }));
  }

  async get(id: string): Promise<KeyRecord | undefined> {
    const record = this.byId.get(id);
    return record && { ...record };
  }

  async findByHash(hash: string): Promise<KeyRecord | undefined> {
    const record = this.byHash.get(hash);
    return record && { ...record };
  }

  async put(record: KeyRecord): Promise<void> {
    this.drop(record.id);
    this.hold({ ...record });
    this.save();
  }

  async remove(id: string): Promise<boolean> {
    if (!this.drop(id)) return false;
    this.save();
    return true;
  }

  private hold(record: KeyRecord): void {
    this.byId.set(record.id, record);
    this.byHash.set(record.secret_hash, record);
    if (record.previous_hash) this.byHash.set(record.previous_hash, record);
  }

  private drop(id: string): boolean {
    const old = this.byId.get(id);
    if (!old) return false;
    this.byId.delete(id);
    this.byHash.delete(old.secret_hash);
    if (old.previous_hash) this.byHash.delete(old.previous_hash);
    return true;
  }

  private save(): void {
    writeFileAtomic(this.file, JSON.stringify([...this.byId.values()]), { mode: 0o600, fsync: this.options.fsync, syncDirectory: this.options.fsync });
  }
}
