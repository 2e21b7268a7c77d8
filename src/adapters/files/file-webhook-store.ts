import fs from 'node:fs';
import path from 'node:path';
import type { SecretBox } from '../../core/secrets/secret-box.js';
import { z } from 'zod';
import { DeliveryRecord, SubscriptionState, type WebhookStore } from '../../core/webhooks/subscription-state.js';
import { DamagedDataError, StorageFullError, type Damage } from '../../core/errors.js';
import { appendLine } from './append-line.js';
import { isOutOfSpace } from './disk-space.js';
import { writeFileAtomic } from './atomic-write.js';

const STATE_SUFFIX = '.json';
const DELIVERIES_SUFFIX = '.deliveries.jsonl';

export interface FileWebhookStoreOptions {
  /** `<dataDir>/webhooks`. */
  dir: string;
  /** Seals callback secrets at rest. */
  box: SecretBox;
  fsync?: boolean;
  /** Delivered records kept per subscription (the file is compacted past twice this many). */
  historyLimit?: number;
  /** What a failed write throws (default: StorageFullError when the disk is full, else the error). */
  storageError?: (error: unknown) => unknown;
}

/** The subscription as written: the secret sealed with the SecretBox. */
const DiskState = SubscriptionState.extend({ format: z.literal(1) });
type DiskState = z.infer<typeof DiskState>;

/**
 * `<dir>/<subscription id>.json` holds a subscription with its cursor and the attempt in
 * progress, rewritten atomically (temp file + rename) on every change, so they always agree.
 * `<dir>/<subscription id>.deliveries.jsonl` is its delivery log: one line per delivered event,
 * appended, trimmed to the newest `historyLimit` lines once it holds twice that many.
 */
export class FileWebhookStore implements WebhookStore {
  private readonly historyLimit: number;
  /** Per subscription: lines in its delivery log and the last seq there (read once, then kept). */
  private readonly logTails = new Map<string, { lines: number; lastSeq: number }>();
  /** Subscriptions whose state file is damaged: not loaded, their files left as found. */
  private readonly quarantined = new Map<string, DamagedDataError>();

  constructor(private readonly options: FileWebhookStoreOptions) {
    this.historyLimit = options.historyLimit ?? 1_000;
    fs.mkdirSync(options.dir, { recursive: true, mode: 0o700 });
  }

  loadAll(): SubscriptionState[] {
    const states: SubscriptionState[] = [];
    for (const name of fs.readdirSync(this.options.dir)) {
      const file = path.join(this.options.dir, name);
      if (name.endsWith('.tmp')) fs.rmSync(file, { force: true });
      else if (name.endsWith(STATE_SUFFIX)) {
        try {
          states.push(this.readState(name, file));
        } catch (error) {
          if (!(error instanceof DamagedDataError)) throw error;
          this.quarantined.set(name.slice(0, -STATE_SUFFIX.length), error);
        }
      }
    }
    // Delivery logs whose subscription is gone (a crash during removal); those of damaged ones stay.
    const ids = new Set([...states.map((state) => state.id), ...this.quarantined.keys()]);
    for (const name of fs.readdirSync(this.options.dir)) {
      if (name.endsWith(DELIVERIES_SUFFIX) && !ids.has(name.slice(0, -DELIVERIES_SUFFIX.length))) fs.rmSync(path.join(this.options.dir, name), { force: true });
    }
    return states;
  }

  /** Subscriptions left out at load because their state file is damaged. */
  damaged(): { id: string; damage: Damage; path: string }[] {
    return [...this.quarantined].map(([id, error]) => ({ id, damage: error.damage, path: error.path }));
  }

  private readState(name: string, file: string): SubscriptionState {
    const damaged = (reason: string) => new DamagedDataError({ file: name, line: null, reason }, file);
    let value: unknown;
    try {
      value = JSON.parse(fs.readFileSync(file, 'utf8'));
    } catch (error) {
      throw damaged(`not valid JSON (${(error as Error).message})`);
    }
    const parsed = DiskState.safeParse(value);
    if (!parsed.success) {
      const issue = parsed.error.issues[0]!;
      throw damaged(`not a valid subscription state (${issue.path.join('.') || 'state'}: ${issue.message})`);
    }
    const disk = parsed.data;
    if (`${disk.id}${STATE_SUFFIX}` !== name) throw damaged('not a subscription state of this name');
    try {
      return this.unseal(disk);
    } catch {
      throw damaged("its sealed secret cannot be decrypted with this server's secret key");
    }
  }

  save(state: SubscriptionState): void {
    this.writeAtomically(this.stateFile(state.id), JSON.stringify(this.seal(state)));
  }

  remove(subscriptionId: string): void {
    // The state first: a leftover delivery log without one is cleaned at load.
    fs.rmSync(this.stateFile(subscriptionId), { force: true });
    fs.rmSync(this.deliveriesFile(subscriptionId), { force: true });
    this.logTails.delete(subscriptionId);
  }

  appendDelivery(subscriptionId: string, record: DeliveryRecord): void {
    const tail = this.tail(subscriptionId);
    if (record.seq <= tail.lastSeq) return;
    try {
      appendLine(this.deliveriesFile(subscriptionId), JSON.stringify(record));
    } catch (error) {
      throw this.storageError(error);
    }
    tail.lines += 1;
    tail.lastSeq = record.seq;
    if (tail.lines >= 2 * this.historyLimit) {
      const kept = this.readAll(subscriptionId).slice(-this.historyLimit);
      this.writeAtomically(this.deliveriesFile(subscriptionId), kept.map((line) => `${JSON.stringify(line)}\n`).join(''));
      tail.lines = kept.length;
    }
  }

  readDeliveries(subscriptionId: string, options: { afterSeq: number; limit: number }): DeliveryRecord[] {
    const records = this.readAll(subscriptionId);
    let low = 0;
    let high = records.length;
    while (low < high) {
      const mid = (low + high) >>> 1;
      if (records[mid]!.seq <= options.afterSeq) low = mid + 1;
      else high = mid;
    }
    return records.slice(low, low + options.limit);
  }

  private tail(subscriptionId: string): { lines: number; lastSeq: number } {
    let tail = this.logTails.get(subscriptionId);
    if (!tail) {
      const records = this.readAll(subscriptionId);
      tail = { lines: records.length, lastSeq: records[records.length - 1]?.seq ?? 0 };
      this.logTails.set(subscriptionId, tail);
    }
    return tail;
  }

  /** The delivery log, oldest first (at most twice `historyLimit` lines). A torn last line is skipped. */
  private readAll(subscriptionId: string): DeliveryRecord[] {
    let text: string;
    try {
      text = fs.readFileSync(this.deliveriesFile(subscriptionId), 'utf8');
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') return [];
      throw error;
    }
    const records: DeliveryRecord[] = [];
    for (const line of text.split('\n')) {
      if (!line) continue;
      try {
        const parsed = DeliveryRecord.safeParse(JSON.parse(line));
        if (parsed.success) records.push(parsed.data);
      } catch {
        // a line torn by a crash: that record was never complete
      }
    }
    return records;
  }

  private writeAtomically(target: string, content: string): void {
    try {
      writeFileAtomic(target, content, { mode: 0o600, fsync: this.options.fsync });
    } catch (error) {
      throw this.storageError(error);
    }
  }

  private storageError(error: unknown): unknown {
    if (this.options.storageError) return this.options.storageError(error);
    return isOutOfSpace(error) ? new StorageFullError() : error;
  }

  private seal(state: SubscriptionState): DiskState {
    return { format: 1, ...state, secret: state.secret === null ? null : this.options.box.encrypt(state.secret) };
  }

  private unseal(disk: DiskState): SubscriptionState {
    const { format: _format, ...state } = disk;
    return { ...state, secret: state.secret === null ? null : this.options.box.decrypt(state.secret) };
  }

  private stateFile(subscriptionId: string): string {
    return path.join(this.options.dir, `${subscriptionId}${STATE_SUFFIX}`);
  }

  private deliveriesFile(subscriptionId: string): string {
    return path.join(this.options.dir, `${subscriptionId}${DELIVERIES_SUFFIX}`);
  }
}
