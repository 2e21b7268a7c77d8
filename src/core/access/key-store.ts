import type { KeyRecord } from './api-key.js';

/** Where API keys persist (files or PostgreSQL). Instances sharing a database see each other's keys at once. */
export interface KeyStore {
  list(): Promise<KeyRecord[]>;
  get(id: string): Promise<KeyRecord | undefined>;
  /** The key whose current or previous secret has this hash. */
  findByHash(hash: string): Promise<KeyRecord | undefined>;
  put(record: KeyRecord): Promise<void>;
  remove(id: string): Promise<boolean>;
}
