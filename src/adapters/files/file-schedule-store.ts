import fs from 'node:fs';
import path from 'node:path';
import { appendLine } from './append-line.js';
import { writeFileAtomic } from './atomic-write.js';
import { DamagedDataError, type Damage } from '../../core/errors.js';
import type { ScheduleFire } from '../../core/schedules/schedule-schemas.js';
import type { ScheduleRecord, ScheduleStore, StoredFire } from '../../core/schedules/schedule-store.js';

const FIRES_SUFFIX = '.fires.jsonl';

/**
 * Schedules in the data dir (one instance): `schedules/<id>.json` written whole and renamed into
 * place, and `schedules/<id>.fires.jsonl`, one line per claim or outcome (a fire's last line wins).
 * A fire's claim line is written (and synced, with AGENTD_FSYNC) before its run starts.
 * A schedule file that does not read back is quarantined: left out, its files kept as found.
 */
export class FileScheduleStore implements ScheduleStore {
  private readonly records = new Map<string, ScheduleRecord>();
  private readonly firesOf = new Map<string, Map<string, StoredFire>>();
  private readonly leased = new Set<string>();
  private readonly quarantined = new Map<string, DamagedDataError>();
  private readonly listeners: (() => void)[] = [];

  constructor(
    private readonly dir: string,
    private readonly options: { fsync: boolean },
  ) {
    fs.mkdirSync(dir, { recursive: true, mode: 0o700 });
    const names = fs.readdirSync(dir);
    for (const name of names.filter((candidate) => candidate.endsWith('.json'))) {
      try {
        const record = readRecord(dir, name);
        this.records.set(record.schedule.id, record);
      } catch (error) {
        if (!(error instanceof DamagedDataError)) throw error;
        this.quarantined.set(name.slice(0, -'.json'.length), error);
      }
    }
    // A quarantined schedule's fires are not loaded: nothing finishes or appends to them.
    for (const name of names.filter((candidate) => candidate.endsWith(FIRES_SUFFIX))) {
      const id = name.slice(0, -FIRES_SUFFIX.length);
      if (!this.quarantined.has(id)) this.firesOf.set(id, readFires(path.join(dir, name)));
    }
  }

  damaged(): { id: string; damage: Damage; path: string }[] {
    return [...this.quarantined].map(([id, error]) => ({ id, damage: error.damage, path: error.path }));
  }

  async nextWake(): Promise<number | null> {
    let next: number | null = null;
    for (const { schedule } of this.records.values()) {
      if (schedule.status !== 'active' || schedule.next_fire_at === null) continue;
      const at = Date.parse(schedule.next_fire_at);
      if (next === null || at < next) next = at;
    }
    return next;
  }

  async watch(listener: () => void): Promise<void> {
    this.listeners.push(listener);
  }

  async get(id: string): Promise<ScheduleRecord | null> {
    const record = this.records.get(id);
    return record ? structuredClone(record) : null;
  }

  async list(query: Parameters<ScheduleStore['list']>[0]): Promise<ScheduleRecord[]> {
    const out: ScheduleRecord[] = [];
    for (const id of [...this.records.keys()].sort()) {
      const record = this.records.get(id)!;
      if (query.afterId !== undefined && id <= query.afterId) continue;
      if (query.conversationId !== undefined && record.schedule.conversation_id !== query.conversationId) continue;
      if (query.status !== undefined && record.schedule.status !== query.status) continue;
      if (query.owner !== undefined && record.schedule.owner !== query.owner) continue;
      out.push(structuredClone(record));
      if (out.length >= query.limit) break;
    }
    return out;
  }

  async save(record: ScheduleRecord): Promise<void> {
    writeFileAtomic(path.join(this.dir, `${record.schedule.id}.json`), JSON.stringify(record), { fsync: this.options.fsync, syncDirectory: this.options.fsync });
    this.records.set(record.schedule.id, structuredClone(record));
    this.changed();
  }

  async delete(id: string): Promise<void> {
    this.records.delete(id);
    this.firesOf.delete(id);
    fs.rmSync(path.join(this.dir, `${id}.json`), { force: true });
    fs.rmSync(path.join(this.dir, `${id}${FIRES_SUFFIX}`), { force: true });
    this.changed();
  }

  async takeDue(options: Parameters<ScheduleStore['takeDue']>[0]): Promise<ScheduleRecord[]> {
    const due: ScheduleRecord[] = [];
    for (const record of this.records.values()) {
      const next = record.schedule.next_fire_at;
      if (record.schedule.status !== 'active' || next === null || Date.parse(next) > options.now || this.leased.has(record.schedule.id)) continue;
      this.leased.add(record.schedule.id);
      due.push(structuredClone(record));
      if (due.length >= options.limit) break;
    }
    return due;
  }

  async release(record: ScheduleRecord): Promise<void> {
    this.leased.delete(record.schedule.id);
    // Deleted while it was being worked on: stays deleted.
    if (this.records.has(record.schedule.id)) await this.save(record);
  }

  async claimFire(stored: StoredFire): Promise<boolean> {
    const fires = this.firesFor(stored.fire.schedule_id);
    if (fires.has(stored.fire.id)) return false;
    this.append(stored);
    fires.set(stored.fire.id, stored);
    return true;
  }

  async settleFire(fire: ScheduleFire): Promise<void> {
    const fires = this.firesOf.get(fire.schedule_id);
    if (!fires) return;
    const stored = { fire, claimedBy: null, leaseUntil: null };
    this.append(stored);
    fires.set(fire.id, stored);
  }

  async fires(scheduleId: string, options: Parameters<ScheduleStore['fires']>[1]): Promise<ScheduleFire[]> {
    const all = [...(this.firesOf.get(scheduleId)?.values() ?? [])].map((stored) => stored.fire).sort(newestFirst);
    const start = options.before ? all.findIndex((fire) => newestFirst(fire, { scheduled_for: options.before!.scheduledFor, id: options.before!.id }) > 0) : 0;
    return start < 0 ? [] : all.slice(start, start + options.limit);
  }

  async unsettled(options: { owner: string }): Promise<StoredFire[]> {
    const out: StoredFire[] = [];
    for (const fires of this.firesOf.values()) for (const stored of fires.values()) if (stored.fire.outcome === null && stored.claimedBy !== options.owner) out.push(stored);
    return out;
  }

  private firesFor(scheduleId: string): Map<string, StoredFire> {
    let fires = this.firesOf.get(scheduleId);
    if (!fires) this.firesOf.set(scheduleId, (fires = new Map()));
    return fires;
  }

  private append(stored: StoredFire): void {
    appendLine(path.join(this.dir, `${stored.fire.schedule_id}${FIRES_SUFFIX}`), JSON.stringify(stored), { fsync: this.options.fsync });
  }

  private changed(): void {
    for (const listener of this.listeners) listener();
  }
}

/** A schedule's file as written, or DamagedDataError saying why it does not read back. */
function readRecord(dir: string, name: string): ScheduleRecord {
  const file = path.join(dir, name);
  const damaged = (reason: string) => new DamagedDataError({ file: name, line: null, reason }, file);
  let record: Partial<ScheduleRecord> | null;
  try {
    record = JSON.parse(fs.readFileSync(file, 'utf8')) as Partial<ScheduleRecord> | null;
  } catch (error) {
    throw damaged(`not valid JSON (${(error as Error).message})`);
  }
  const schedule = record?.schedule;
  const state = record?.state;
  if (typeof schedule !== 'object' || schedule === null || typeof state !== 'object' || state === null) throw damaged('not a schedule record');
  if (`${schedule.id}.json` !== name) throw damaged('not the schedule of this file name');
  if (typeof schedule.status !== 'string' || typeof state.cursor !== 'number' || !Array.isArray(state.toDelete)) throw damaged('not a valid schedule record (status, cursor or toDelete missing)');
  return record as ScheduleRecord;
}

function newestFirst(a: Pick<ScheduleFire, 'scheduled_for' | 'id'>, b: Pick<ScheduleFire, 'scheduled_for' | 'id'>): number {
  return a.scheduled_for === b.scheduled_for ? (a.id < b.id ? 1 : a.id > b.id ? -1 : 0) : a.scheduled_for < b.scheduled_for ? 1 : -1;
}

/** A line cut short by a crash (the last one) is left out: its fire was not claimed. */
function readFires(file: string): Map<string, StoredFire> {
  const fires = new Map<string, StoredFire>();
  for (const line of fs.readFileSync(file, 'utf8').split('\n')) {
    if (!line) continue;
    try {
      const stored = JSON.parse(line) as StoredFire;
      fires.set(stored.fire.id, stored);
    } catch {
      // The torn last line of a crash.
    }
  }
  return fires;
}
