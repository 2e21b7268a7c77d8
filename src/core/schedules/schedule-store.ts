import type { Damage } from '../errors.js';
import type { Schedule, ScheduleFire, ScheduleStatus } from './schedule-schemas.js';

/** What the scheduler keeps beside a schedule's public fields. */
export interface ScheduleState {
  /** The newest slot already handled (fired, skipped or recorded missed), in ms. */
  cursor: number;
  /** `enqueue_one`: the run a fire was last queued into. */
  queuedRun: string | null;
  /** A `new` target: the conversation of the latest fire (the one an overlap is checked against). */
  lastConversation: string | null;
  /** `on_complete: delete`: conversations to delete once their run has ended. */
  toDelete: string[];
  /** Runs started by fires and not ended yet, oldest first: each is judged (failed or not) for `pause_after_failures` once it ends. Absent in records from before. */
  openRuns?: OpenRun[];
}

/** A run a fire started (or was queued into), awaiting its end. */
export interface OpenRun {
  conversationId: string;
  runId: string;
}

export interface ScheduleRecord {
  schedule: Schedule;
  state: ScheduleState;
  /** PostgreSQL: the revision read, so that a tick's save does not overwrite a change made meanwhile. */
  rev?: number;
}

/** A fire as stored: its public record and, while it is being started, who claimed it and until when. */
export interface StoredFire {
  fire: ScheduleFire;
  claimedBy: string | null;
  leaseUntil: number | null;
}

/**
 * Where schedules and their fires persist: the data dir's files (one instance) or PostgreSQL rows
 * (several). `claimFire` is the exactly-once point: a fire id is stored at most once.
 */
export interface ScheduleStore {
  get(id: string): Promise<ScheduleRecord | null>;
  /** Ordered by id; after `afterId` when given. */
  list(query: { conversationId?: string | undefined; status?: ScheduleStatus | undefined; owner?: string | undefined; afterId?: string | undefined; limit: number }): Promise<ScheduleRecord[]>;
  /** Creates or replaces the record. */
  save(record: ScheduleRecord): Promise<void>;
  delete(id: string): Promise<void>;
  /**
   * Active schedules whose next fire is due at `now`, each leased to `owner` for `leaseMs` so that
   * no other instance works on it meanwhile (PostgreSQL: FOR UPDATE SKIP LOCKED). Release with `release`.
   */
  takeDue(options: { now: number; owner: string; leaseMs: number; limit: number }): Promise<ScheduleRecord[]>;
  /** Saves the record and lets go of its lease. */
  release(record: ScheduleRecord, owner: string): Promise<void>;
  /** Stores the fire unless its id is already stored: false when it was (another process has or had it). */
  claimFire(fire: StoredFire): Promise<boolean>;
  /** Replaces a stored fire (its outcome). */
  settleFire(fire: ScheduleFire): Promise<void>;
  /** Newest first (after `beforeId`'s position when given). */
  fires(scheduleId: string, options: { before?: { scheduledFor: string; id: string } | undefined; limit: number }): Promise<ScheduleFire[]>;
  /**
   * Fires claimed and never settled whose claimant is gone (it died between claim and start):
   * on files, any claimed by another process; on PostgreSQL, those whose lease has run out.
   */
  unsettled(options: { now: number; owner: string }): Promise<StoredFire[]>;
  /**
   * When the timer must look again, in ms: the earliest next fire of an active schedule (and, on
   * PostgreSQL, the earliest end of an unsettled claim's lease); null when nothing will be due
   * until a schedule changes.
   */
  nextWake(): Promise<number | null>;
  /** Calls `listener` after a schedule is saved or deleted: by this process, or (PostgreSQL) by any instance. */
  watch(listener: () => void): Promise<void>;
  /** Schedules left out at start-up because their stored record is damaged (kept as found, never written). */
  damaged(): { id: string; damage: Damage; path: string }[];
  close?(): Promise<void>;
}
