import { createHash, randomBytes, randomUUID } from 'node:crypto';
import { isoTimestamp, systemClock, type Clock } from '../clock.js';
import { AppError, NotFoundError } from '../errors.js';
import { publicKey, type ApiKey, type CreatedApiKey, type CreateKeyBody, type KeyRecord, type UpdateKeyBody } from './api-key.js';
import type { KeyStore } from './key-store.js';
import type { Principal } from './principal.js';

const SECRET_PREFIX = 'agd_';
const SHOWN_PREFIX_LENGTH = 12;
/** last_used_at is written at most this often per key: not a write per request. */
const LAST_USED_EVERY_MS = 60_000;

export function hashSecret(secret: string): string {
  return createHash('sha256').update(secret, 'utf8').digest('hex');
}

/** Why a secret did not authenticate: the audit log and the 401's message say which. */
export type KeyRefusal = 'unknown' | 'expired' | 'rotated';

export type KeyCheck = { principal: Principal; key: ApiKey } | { refused: KeyRefusal; keyId: string | null };

/** API keys: made with a random secret shown once and kept as a hash; rotated with a grace period. */
export class KeyService {
  private readonly clock: Clock;

  constructor(
    private readonly store: KeyStore,
    options: { clock?: Clock } = {},
  ) {
    this.clock = options.clock ?? systemClock;
  }

  /** Only the master key may hand out `keys:admin`; an admin may name any owner, others only their own. */
  async create(caller: Principal, body: CreateKeyBody): Promise<CreatedApiKey> {
    if (body.scopes.includes('keys:admin') && caller.keyId !== 'master') {
      throw new AppError({ code: 'insufficient_scope', kind: 'forbidden', message: 'Only the master key may create keys with the keys:admin scope.', details: { scope: 'keys:admin' } });
    }
    const secret = newSecret();
    const now = isoTimestamp(this.clock.now());
    const record: KeyRecord = {
      id: randomUUID(),
      name: body.name,
      prefix: secret.slice(0, SHOWN_PREFIX_LENGTH),
      owner: caller.admin ? (body.owner ?? caller.owner) : caller.owner,
      scopes: [...new Set(body.scopes)],
      expires_at: body.expires_at ?? null,
      limits: body.limits ?? null,
      allowed_models: body.allowed_models ?? null,
      created_at: now,
      rotated_at: null,
      previous_valid_until: null,
      last_used_at: null,
      secret_hash: hashSecret(secret),
      previous_hash: null,
    };
    await this.store.put(record);
    return { ...publicKey(record), secret };
  }

  async list(owner?: string): Promise<ApiKey[]> {
    const records = await this.store.list();
    return records.filter((record) => owner === undefined || record.owner === owner).sort((a, b) => (a.created_at < b.created_at ? -1 : a.created_at > b.created_at ? 1 : a.id < b.id ? -1 : 1)).map(publicKey);
  }

  async get(id: string): Promise<ApiKey> {
    return publicKey(await this.record(id));
  }

  async update(caller: Principal, id: string, body: UpdateKeyBody): Promise<ApiKey> {
    if (body.scopes?.includes('keys:admin') && caller.keyId !== 'master') {
      throw new AppError({ code: 'insufficient_scope', kind: 'forbidden', message: 'Only the master key may give a key the keys:admin scope.', details: { scope: 'keys:admin' } });
    }
    const record = await this.record(id);
    const next: KeyRecord = {
      ...record,
      ...(body.name !== undefined && { name: body.name }),
      ...(body.scopes !== undefined && { scopes: [...new Set(body.scopes)] }),
      ...(body.expires_at !== undefined && { expires_at: body.expires_at }),
      ...(body.limits !== undefined && { limits: body.limits }),
      ...(body.allowed_models !== undefined && { allowed_models: body.allowed_models }),
    };
    await this.store.put(next);
    return publicKey(next);
  }

  async remove(id: string): Promise<void> {
    if (!(await this.store.remove(id))) throw new NotFoundError('key', id);
  }

  /** A new secret; the one before keeps working for `graceS` seconds (0: stops at once). */
  async rotate(id: string, graceS: number): Promise<CreatedApiKey> {
    const record = await this.record(id);
    const secret = newSecret();
    const now = this.clock.now();
    const next: KeyRecord = {
      ...record,
      prefix: secret.slice(0, SHOWN_PREFIX_LENGTH),
      secret_hash: hashSecret(secret),
      // Kept even with no grace: a use of the old secret is then refused, and audited, as a rotated key's.
      previous_hash: record.secret_hash,
      previous_valid_until: isoTimestamp(now + graceS * 1000),
      rotated_at: isoTimestamp(now),
    };
    await this.store.put(next);
    return { ...publicKey(next), secret };
  }

  /** The key a secret belongs to, when it is valid now. */
  async authenticate(secret: string): Promise<KeyCheck> {
    if (!secret.startsWith(SECRET_PREFIX)) return { refused: 'unknown', keyId: null };
    const hash = hashSecret(secret);
    const record = await this.store.findByHash(hash);
    if (!record) return { refused: 'unknown', keyId: null };
    const now = this.clock.now();
    if (record.expires_at !== null && Date.parse(record.expires_at) <= now) return { refused: 'expired', keyId: record.id };
    const rotated = record.secret_hash !== hash;
    if (rotated && (record.previous_valid_until === null || Date.parse(record.previous_valid_until) <= now)) return { refused: 'rotated', keyId: record.id };
    if (record.last_used_at === null || Date.parse(record.last_used_at) + LAST_USED_EVERY_MS <= now) {
      record.last_used_at = isoTimestamp(now);
      await this.store.put(record);
    }
    const scopes = new Set(record.scopes);
    const principal: Principal = {
      keyId: record.id,
      owner: record.owner,
      scopes,
      admin: scopes.has('keys:admin'),
      limits: record.limits,
      allowedModels: record.allowed_models,
      rotated,
    };
    return { principal, key: publicKey(record) };
  }

  private async record(id: string): Promise<KeyRecord> {
    const record = await this.store.get(id);
    if (!record) throw new NotFoundError('key', id);
    return record;
  }
}

function newSecret(): string {
  return SECRET_PREFIX + randomBytes(32).toString('base64url');
}
