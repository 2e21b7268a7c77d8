import { randomUUID } from 'node:crypto';
import { NotFoundError } from '../errors.js';
import { decodePageId, encodePageId, isKeyCursor, type Page } from '../pagination.js';
import { isoTimestamp, type Clock } from '../clock.js';
import { InvalidScheduleError } from './invalid-schedule-error.js';
import type { CreateScheduleBody, ListSchedulesQuery, Schedule, ScheduleFire, UpdateScheduleBody } from './schedule-schemas.js';
import type { ScheduleRunner } from './schedule-runner.js';
import { fireIdOf, ruleOf } from './schedule-slots.js';
import type { ScheduleRecord, ScheduleStore } from './schedule-store.js';
import type { ScheduleTargets } from './schedule-targets.js';
import { checkRule, slotsAfter, takeSlots } from './schedule-times.js';

/** More slots than this recorded `skipped_paused` at a resume: the oldest are summed up in one record. */
const MAX_PAUSED_RECORDS = 1_000;

/**
 * Who asks: `owner` is what a new schedule is stamped with; `only` limits every read and change to
 * that owner's schedules (another owner's is a 404), undefined for an admin, who sees all.
 */
export interface ScheduleCaller {
  owner: string | null;
  only: string | undefined;
  /** Told when the 404 hides another owner's resource (the audit log records the refusal). */
  refused?: (resource: string) => void;
}

const ANYONE: ScheduleCaller = { owner: null, only: undefined };

/** What the schedule routes call. */
export class ScheduleService {
  constructor(
    private readonly deps: {
      store: ScheduleStore;
      runner: ScheduleRunner;
      targets: ScheduleTargets;
      clock: Clock;
      /** AGENTD_SCHEDULE_TIMEZONE. */
      defaultTimezone: string;
    },
  ) {}

  async create(body: CreateScheduleBody, caller: ScheduleCaller = ANYONE): Promise<Schedule> {
    const targetCount = Number(body.conversation_id !== undefined) + Number(body.new !== undefined);
    if (targetCount !== 1) throw new InvalidScheduleError('conversation_id', 'give exactly one target: `conversation_id` (an existing conversation) or `new` (a conversation template)');
    if (body.conversation_id && !(await this.deps.targets.exists(body.conversation_id))) throw new NotFoundError('conversation', body.conversation_id);
    if (body.conversation_id && !visibleTo(caller, await this.deps.targets.ownerOf(body.conversation_id))) {
      caller.refused?.(body.conversation_id);
      throw new NotFoundError('conversation', body.conversation_id);
    }
    const now = isoTimestamp(this.deps.clock.now());
    const schedule: Schedule = {
      id: randomUUID(),
      cron: body.cron ?? null,
      every: body.every ?? null,
      timezone: body.timezone ?? this.deps.defaultTimezone,
      message: body.message,
      conversation_id: body.conversation_id ?? null,
      new: body.new ?? null,
      overlap: body.overlap,
      catchup: body.catchup,
      dst: body.dst,
      jitter_s: body.jitter_s,
      start_at: body.start_at ?? null,
      end_at: body.end_at ?? null,
      max_fires: body.max_fires ?? null,
      pause_after_failures: body.pause_after_failures ?? null,
      metadata: body.metadata ?? {},
      owner: caller.owner,
      status: 'active',
      status_reason: null,
      next_fire_at: null,
      fires_count: 0,
      consecutive_failures: 0,
      last_fire_at: null,
      last_outcome: null,
      created_at: now,
      updated_at: now,
    };
    this.check(schedule);
    const record: ScheduleRecord = { schedule, state: { cursor: this.deps.clock.now(), queuedRun: null, lastConversation: null, toDelete: [] } };
    this.deps.runner.refresh(record);
    await this.deps.store.save(record);
    return record.schedule;
  }

  /** Fires what is due now (the timer calls it; tests on a fake clock too). */
  tick(): Promise<void> {
    return this.deps.runner.tick();
  }

  async get(id: string, caller: ScheduleCaller = ANYONE): Promise<Schedule> {
    return (await this.recordOf(id, caller)).schedule;
  }

  /** `query.owner` is replaced by the caller's own owner unless the caller is an admin. */
  async list(query: ListSchedulesQuery, caller: ScheduleCaller = ANYONE): Promise<Page<Schedule>> {
    const cursor = query.page_id ? decodePageId(query.page_id, isKeyCursor) : undefined;
    const records = await this.deps.store.list({ conversationId: query.conversation_id, status: query.status, owner: caller.only ?? query.owner, afterId: cursor?.i, limit: query.limit + 1 });
    const more = records.length > query.limit;
    const items = await Promise.all(records.slice(0, query.limit).map(async (record) => (await this.noticeGone(withOwner(record))).schedule));
    const last = items[items.length - 1];
    return { items, next_page_id: more && last ? encodePageId({ k: '', i: last.id }) : null };
  }

  async update(id: string, body: UpdateScheduleBody, caller: ScheduleCaller = ANYONE): Promise<Schedule> {
    const record = await this.recordOf(id, caller);
    const { cron, every, ...rest } = body;
    const schedule = { ...record.schedule, ...Object.fromEntries(Object.entries(rest).filter(([, value]) => value !== undefined)) } as Schedule;
    if (cron !== undefined) Object.assign(schedule, { cron, ...(cron !== null && every === undefined && { every: null }) });
    if (every !== undefined) Object.assign(schedule, { every, ...(every !== null && cron === undefined && { cron: null }) });
    this.check(schedule);
    // A schedule completed by its end or its count is active again once they allow more fires.
    if (schedule.status === 'completed') Object.assign(schedule, { status: 'active', status_reason: null });
    record.schedule = schedule;
    this.deps.runner.refresh(record);
    await this.deps.store.save(record);
    return record.schedule;
  }

  async delete(id: string, caller: ScheduleCaller = ANYONE): Promise<void> {
    await this.recordOf(id, caller);
    await this.deps.store.delete(id);
  }

  async trigger(id: string, caller: ScheduleCaller = ANYONE): Promise<ScheduleFire> {
    const record = await this.recordOf(id, caller);
    if (record.schedule.status === 'failing') throw new InvalidScheduleError('conversation_id', `cannot fire: the schedule is failing (${record.schedule.status_reason})`);
    return this.deps.runner.trigger(record);
  }

  async pause(id: string, note: string | undefined, caller: ScheduleCaller = ANYONE): Promise<Schedule> {
    const record = await this.recordOf(id, caller);
    if (record.schedule.status === 'active') {
      Object.assign(record.schedule, { status: 'paused', status_reason: note ?? 'paused' });
      this.deps.runner.refresh(record);
      await this.deps.store.save(record);
    }
    return record.schedule;
  }

  /** Active again from now: the slots that passed while paused are recorded `skipped_paused`. */
  async resume(id: string, caller: ScheduleCaller = ANYONE): Promise<Schedule> {
    const record = await this.recordOf(id, caller);
    if (record.schedule.status !== 'paused') return record.schedule;
    const now = this.deps.clock.now();
    const passed = takeSlots(ruleOf(record.schedule), record.state.cursor, { count: MAX_PAUSED_RECORDS + 1, until: now });
    const note = record.schedule.status_reason;
    if (passed.length > MAX_PAUSED_RECORDS) {
      const later = takeSlots(ruleOf(record.schedule), passed[passed.length - 1]!, { count: 1, until: now }).length > 0;
      await this.deps.runner.record(record, passed[0]!, 'skipped_paused', `paused (${note})${later ? '; later slots until the resume were not recorded one by one' : ''}`);
      passed.splice(0, passed.length - MAX_PAUSED_RECORDS + 1);
    }
    for (const slot of passed) await this.deps.runner.record(record, slot, 'skipped_paused', `paused (${note})`);
    Object.assign(record.schedule, { status: 'active', status_reason: null, consecutive_failures: 0 });
    record.state.cursor = now;
    // Runs from before the pause count no more: resumed, the schedule starts its count afresh.
    record.state.openRuns = [];
    this.deps.runner.refresh(record);
    await this.deps.store.save(record);
    return record.schedule;
  }

  async fires(id: string, query: { page_id?: string | undefined; limit: number }, caller: ScheduleCaller = ANYONE): Promise<Page<ScheduleFire>> {
    await this.recordOf(id, caller);
    const cursor = query.page_id ? decodePageId(query.page_id, isKeyCursor) : undefined;
    const fires = await this.deps.store.fires(id, { before: cursor && { scheduledFor: cursor.k, id: cursor.i }, limit: query.limit + 1 });
    const more = fires.length > query.limit;
    const items = fires.slice(0, query.limit);
    const last = items[items.length - 1];
    return { items, next_page_id: more && last ? encodePageId({ k: last.scheduled_for, i: last.id }) : null };
  }

  preview(query: { cron?: string | undefined; every?: string | undefined; timezone?: string | undefined; count: number; gap: 'shift' | 'skip'; repeat: 'once' | 'both' }): { timezone: string; next: string[] } {
    const timezone = query.timezone ?? this.deps.defaultTimezone;
    checkRule({ cron: query.cron, every: query.every, timezone });
    const now = this.deps.clock.now();
    const slots = takeSlots({ cron: query.cron, every: query.every, timezone, dst: { gap: query.gap, repeat: query.repeat }, anchor: now }, now, { count: query.count });
    return { timezone, next: slots.map(isoTimestamp) };
  }

  /** The id a slot's fire has (for clients that look one up). */
  fireIdOf(scheduleId: string, slot: string): string {
    return fireIdOf(scheduleId, Date.parse(slot));
  }

  private check(schedule: Schedule): void {
    checkRule(schedule);
    if (schedule.start_at && schedule.end_at && Date.parse(schedule.end_at) <= Date.parse(schedule.start_at)) throw new InvalidScheduleError('end_at', 'is not after `start_at`');
    if (schedule.conversation_id && (schedule.message.llm || schedule.message.tools)) throw new InvalidScheduleError(schedule.message.llm ? 'message.llm' : 'message.tools', 'applies to a `new` target only: change an existing conversation with PUT /conversations/{id}/config');
    // A rule that never matches (30 February) would be a schedule that silently never fires.
    const first = slotsAfter(ruleOf(schedule), this.deps.clock.now()).next();
    if (first.done) throw new InvalidScheduleError(schedule.cron ? 'cron' : 'every', 'never matches a date');
  }

  private async recordOf(id: string, caller: ScheduleCaller): Promise<ScheduleRecord> {
    const record = await this.deps.store.get(id);
    // Another owner's schedule is not found, as if it did not exist (no 403 that confirms it does).
    if (!record) throw new NotFoundError('schedule', id);
    if (!visibleTo(caller, record.schedule.owner)) {
      caller.refused?.(id);
      throw new NotFoundError('schedule', id);
    }
    return this.noticeGone(withOwner(record));
  }

  /** A target conversation deleted since: shown `failing` with `target_gone` at once (saved at its next fire). */
  private async noticeGone(record: ScheduleRecord): Promise<ScheduleRecord> {
    const { schedule } = record;
    if (schedule.conversation_id && schedule.status !== 'failing' && schedule.status !== 'completed' && !(await this.deps.targets.exists(schedule.conversation_id))) {
      Object.assign(schedule, { status: 'failing', status_reason: 'target_gone', next_fire_at: null });
    }
    return record;
  }
}

function visibleTo(caller: ScheduleCaller, owner: string | null | undefined): boolean {
  return caller.only === undefined || owner === caller.only;
}

/** Schedules stored before owners existed have none (admins only). */
function withOwner(record: ScheduleRecord): ScheduleRecord {
  if (record.schedule.owner === undefined) record.schedule.owner = null;
  return record;
}
