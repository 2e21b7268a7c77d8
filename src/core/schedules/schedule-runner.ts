import { randomUUID } from 'node:crypto';
import { AppError } from '../errors.js';
import { isoTimestamp, type Clock } from '../clock.js';
import type { FireOutcome, Schedule, ScheduleFire } from './schedule-schemas.js';
import { completion, fireIdOf, nextFireAt, planDue } from './schedule-slots.js';
import type { OpenRun, ScheduleRecord, ScheduleStore, StoredFire } from './schedule-store.js';
import type { FireMark, ScheduleTargets } from './schedule-targets.js';

export interface ScheduleRunnerDeps {
  store: ScheduleStore;
  targets: ScheduleTargets;
  clock: Clock;
  /** This process, as the holder of leases and claims. */
  owner: string;
  /** How long a claim or a schedule's lease holds before another process may take it over. */
  leaseMs?: number;
  /**
   * Several instances: whether this one serves the conversation now (taking it when nobody does).
   * A schedule whose target is served elsewhere is left to that instance, which ticks too.
   */
  servesHere?: (conversationId: string) => Promise<boolean>;
  /** Tests only: a named point to stop at (AGENTD_TEST_PAUSE_AT=schedule-fire-claimed). */
  pausePoint?: (point: string) => Promise<void>;
  onError?: (error: unknown, context: Record<string, unknown>) => void;
}

/** Runs awaiting their end kept per schedule: past this many (runs that never end), the oldest are let go unjudged. */
const MAX_OPEN_RUNS = 20;

/**
 * Fires schedules: takes the due ones, records missed slots, and for each slot to fire claims the
 * fire durably (its id derived from schedule and slot), then delivers the message. A fire claimed
 * by a process that died is finished by `recover`, never started a second time.
 */
export class ScheduleRunner {
  private readonly leaseMs: number;
  private chain: Promise<unknown> = Promise.resolve();
  /** Whether the last clean-up left conversations to delete once their runs end (the timer comes back for them). */
  cleanUpPending = false;

  constructor(private readonly deps: ScheduleRunnerDeps) {
    this.leaseMs = deps.leaseMs ?? 60_000;
  }

  /** One pass over the due schedules (passes never overlap in a process). */
  tick(): Promise<void> {
    const run = this.chain.then(() => this.pass());
    this.chain = run.catch(() => {});
    return run;
  }

  private async pass(): Promise<void> {
    await this.recover();
    for (;;) {
      const due = await this.deps.store.takeDue({ now: this.deps.clock.now(), owner: this.deps.owner, leaseMs: this.leaseMs, limit: 100 });
      if (due.length === 0) return;
      let more = false;
      for (const record of due) more = (await this.advance(record)) || more;
      if (!more && due.length < 100) return;
    }
  }

  /** Works one leased schedule's due slots, then saves it and lets it go. Returns whether slots are left. */
  private async advance(record: ScheduleRecord): Promise<boolean> {
    const now = this.deps.clock.now();
    const target = record.schedule.conversation_id;
    if (target && this.deps.servesHere && (await this.deps.targets.exists(target)) && !(await this.deps.servesHere(target).catch(() => false))) {
      await this.deps.store.release(record, this.deps.owner);
      return false;
    }
    // The runs earlier fires started: those that failed since may pause the schedule before this slot.
    await this.judgeRuns(record).catch((error: unknown) => this.deps.onError?.(error, { schedule_id: record.schedule.id }));
    const plan = planDue(record.schedule, record.state, now);
    try {
      const why = `missed: catch-up fires at most ${record.schedule.catchup.max} of the newest slots within ${record.schedule.catchup.window_s} s`;
      if (plan.missedFrom) await this.record(record, plan.missedFrom.slot, 'skipped_missed', `${why}; so were the later slots until ${isoTimestamp(plan.missedFrom.until)} (too many to record one by one)`);
      for (const slot of plan.missed) await this.record(record, slot, 'skipped_missed', why);
      for (const slot of plan.fire) {
        if (record.schedule.status !== 'active') await this.record(record, slot, 'skipped_paused', `the schedule is ${record.schedule.status}`);
        else await this.fire(record, { id: fireIdOf(record.schedule.id, slot), slot, manual: false });
      }
      record.state.cursor = plan.cursor;
    } finally {
      this.refresh(record);
      await this.deps.store.release(record, this.deps.owner);
    }
    return plan.more;
  }

  /**
   * The runs of earlier fires, oldest first, up to the first still going: one that failed counts
   * as a failed fire, one that ended otherwise resets the count (pause_after_failures).
   */
  private async judgeRuns(record: ScheduleRecord): Promise<void> {
    const open = record.state.openRuns ?? [];
    while (open.length > 0) {
      const { conversationId, runId } = open[0]!;
      const end = await this.deps.targets.runEnd(conversationId, runId);
      if (end === 'open') break;
      open.shift();
      if (end === 'failed') this.countFailure(record.schedule);
      if (end === 'ended') record.schedule.consecutive_failures = 0;
    }
    record.state.openRuns = open;
  }

  /** POST /schedules/{id}/trigger: a fire now, beside the slots (the next slot still fires). */
  async trigger(record: ScheduleRecord): Promise<ScheduleFire> {
    const fire = await this.fire(record, { id: randomUUID(), slot: this.deps.clock.now(), manual: true });
    this.refresh(record);
    await this.deps.store.save(record);
    return fire!;
  }

  /** Records a slot that did not fire, with why. */
  async record(record: ScheduleRecord, slot: number, outcome: FireOutcome, reason: string): Promise<void> {
    const fire = this.newFire(record.schedule, { id: fireIdOf(record.schedule.id, slot), slot, manual: false });
    Object.assign(fire, { outcome, reason, fired_at: isoTimestamp(this.deps.clock.now()) });
    if (await this.deps.store.claimFire({ fire, claimedBy: null, leaseUntil: null })) this.noteOutcome(record, fire);
  }

  /** Claims the fire (durably: at most one process ever has it), then starts it. Null when it was already claimed. */
  private async fire(record: ScheduleRecord, what: { id: string; slot: number; manual: boolean }): Promise<ScheduleFire | null> {
    const fire = this.newFire(record.schedule, what);
    if (!(await this.deps.store.claimFire({ fire, claimedBy: this.deps.owner, leaseUntil: this.deps.clock.now() + this.leaseMs }))) return null;
    await this.deps.pausePoint?.('schedule-fire-claimed');
    const settled = await this.deliver(record, fire, null);
    await this.deps.store.settleFire(settled);
    this.noteOutcome(record, settled);
    return settled;
  }

  private newFire(schedule: Schedule, what: { id: string; slot: number; manual: boolean }): ScheduleFire {
    return { id: what.id, schedule_id: schedule.id, scheduled_for: isoTimestamp(what.slot), fired_at: null, manual: what.manual, outcome: null, reason: null, run_id: null, conversation_id: null };
  }

  /**
   * Delivers the fire's message by the overlap policy. `resumed`: a fire a dead process had
   * claimed: what it already did (the conversation it created, the event it recorded, the
   * message it sent) is found and not done again.
   */
  private async deliver(record: ScheduleRecord, fire: ScheduleFire, resumed: { conversationId: string | null } | null): Promise<ScheduleFire> {
    const { schedule, state } = record;
    const { targets } = this.deps;
    const done = (outcome: FireOutcome, fields: Partial<ScheduleFire> = {}): ScheduleFire => ({ ...fire, fired_at: isoTimestamp(this.deps.clock.now()), outcome, reason: null, ...fields });
    const mark: FireMark = { schedule_id: schedule.id, fire_id: fire.id, scheduled_for: fire.scheduled_for };
    try {
      let target = schedule.conversation_id ?? resumed?.conversationId ?? null;
      if (target && !(await targets.exists(target))) {
        if (schedule.conversation_id) this.targetGone(record);
        return done('failed', { reason: 'target_gone: the target conversation was deleted', conversation_id: target });
      }
      if (target && resumed) {
        const delivered = await targets.delivered(target, fire.id);
        if (delivered.sent) return done('started', { conversation_id: target, run_id: delivered.runId, reason: 'finished after a restart' });
        if (delivered.marked) return done('started', { conversation_id: target, run_id: await targets.send(target, schedule.message, 'enqueue'), reason: 'finished after a restart' });
      }
      // With `new`, an overlap is the previous fire's conversation still running.
      const current = target ?? (state.lastConversation && targets.knows(state.lastConversation) ? state.lastConversation : null);
      const running = current ? targets.runningRun(current) : null;
      if (running && current && schedule.overlap !== 'allow') {
        if (schedule.overlap === 'skip') return done('skipped_overlap', { reason: `run ${running} is still going`, conversation_id: current, run_id: running });
        if (schedule.overlap === 'enqueue_one' && state.queuedRun === running) return done('skipped_overlap', { reason: `a fire is already queued into run ${running}`, conversation_id: current, run_id: running });
        const runId = await targets.deliver(current, schedule.message, { mark, strategy: schedule.overlap === 'interrupt' ? 'interrupt' : 'enqueue' });
        if (schedule.overlap === 'enqueue_one') state.queuedRun = running;
        return done('started', { conversation_id: current, run_id: runId, reason: schedule.overlap === 'interrupt' ? `interrupted run ${running}` : `queued into run ${running}` });
      }
      if (!target) {
        target = await targets.create(schedule.new!, schedule.message, { mark, owner: schedule.owner ?? null });
        state.lastConversation = target;
        if (schedule.new!.on_complete === 'delete') state.toDelete.push(target);
      }
      const runId = await targets.deliver(target, schedule.message, { mark, strategy: 'enqueue' });
      return done('started', { conversation_id: target, run_id: runId });
    } catch (error) {
      this.deps.onError?.(error, { schedule_id: schedule.id, fire_id: fire.id });
      return done('failed', { reason: error instanceof AppError ? `${error.code}: ${error.message}` : 'internal error: the fire could not be started (see the server log)' });
    }
  }

  private targetGone(record: ScheduleRecord): void {
    record.schedule.status = 'failing';
    record.schedule.status_reason = 'target_gone';
  }

  /** A fire that started is judged by its run once that ends (see judgeRuns); one that could not start counts now. */
  private noteOutcome(record: ScheduleRecord, fire: ScheduleFire): void {
    const schedule = record.schedule;
    schedule.last_fire_at = fire.fired_at;
    schedule.last_outcome = fire.outcome;
    if (fire.outcome === 'started' && !fire.manual) schedule.fires_count += 1;
    if (fire.outcome === 'started' && fire.run_id && fire.conversation_id) this.awaitRun(record, { conversationId: fire.conversation_id, runId: fire.run_id });
    else if (fire.outcome === 'started') schedule.consecutive_failures = 0;
    if (fire.outcome === 'failed') this.countFailure(schedule);
  }

  private awaitRun(record: ScheduleRecord, run: OpenRun): void {
    const open = record.state.openRuns ?? [];
    // Fires queued into one run are judged by it once.
    if (!open.some((known) => known.runId === run.runId)) open.push(run);
    record.state.openRuns = open.slice(-MAX_OPEN_RUNS);
  }

  private countFailure(schedule: Schedule): void {
    schedule.consecutive_failures += 1;
    if (schedule.status === 'active' && schedule.pause_after_failures !== null && schedule.consecutive_failures >= schedule.pause_after_failures) {
      schedule.status = 'paused';
      schedule.status_reason = `paused after ${schedule.consecutive_failures} failed fires in a row`;
    }
  }

  /** Status, next fire and clean-up after a change. */
  refresh(record: ScheduleRecord): void {
    const schedule = record.schedule;
    const over = schedule.status === 'active' ? completion(schedule, record.state) : null;
    if (over) {
      schedule.status = 'completed';
      schedule.status_reason = over;
    }
    schedule.next_fire_at = nextFireAt(schedule, record.state);
    schedule.updated_at = isoTimestamp(this.deps.clock.now());
  }

  /** Fires whose claimant died before settling them: finished here (delivered once, never twice). */
  async recover(): Promise<void> {
    for (const stored of await this.deps.store.unsettled({ now: this.deps.clock.now(), owner: this.deps.owner })) await this.finish(stored).catch((error: unknown) => this.deps.onError?.(error, { fire_id: stored.fire.id }));
    await this.cleanUp();
  }

  private async finish(stored: StoredFire): Promise<void> {
    const record = await this.deps.store.get(stored.fire.schedule_id);
    if (!record) return this.deps.store.settleFire({ ...stored.fire, fired_at: isoTimestamp(this.deps.clock.now()), outcome: 'failed', reason: 'the schedule was deleted' });
    const created = record.schedule.new ? this.deps.targets.createdBy(stored.fire.id) : null;
    const settled = await this.deliver(record, stored.fire, { conversationId: created });
    await this.deps.store.settleFire(settled);
    this.noteOutcome(record, settled);
    this.refresh(record);
    await this.deps.store.save(record);
  }

  /** `on_complete: delete`: fire conversations whose run has ended are deleted. */
  private async cleanUp(): Promise<void> {
    const records = await this.deps.store.list({ limit: 1000 });
    let pending = false;
    for (const record of records.filter((candidate) => candidate.state.toDelete.length > 0)) {
      const left: string[] = [];
      for (const id of record.state.toDelete) {
        if (!this.deps.targets.knows(id)) continue;
        if (this.deps.targets.runningRun(id)) left.push(id);
        else await this.deps.targets.delete(id);
      }
      pending ||= left.length > 0;
      if (left.length === record.state.toDelete.length) continue;
      record.state.toDelete = left;
      await this.deps.store.save(record);
    }
    this.cleanUpPending = pending;
  }
}
