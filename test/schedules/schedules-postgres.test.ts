// Two instances' schedule runners on one PostgreSQL, each with its own connection pool, ticking
// together on an accelerated (fake) clock: every slot fires exactly once. The runners and stores
// are the server's own; the conversations they fire into are recorded instead of run, since the
// question here is only who fires which slot.
import postgres from 'postgres';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PgScheduleStore } from '../../src/adapters/postgres/pg-schedule-store.js';
import { migrate } from '../../src/adapters/postgres/migrations.js';
import { ScheduleRunner } from '../../src/core/schedules/schedule-runner.js';
import { ScheduleService } from '../../src/core/schedules/schedule-service.js';
import type { ScheduleTargets } from '../../src/core/schedules/schedule-targets.js';
import { ScheduleTimer } from '../../src/core/schedules/schedule-timer.js';
import { eventually } from '../support/cluster-instances.js';
import { findPostgres, startPostgres, type PostgresCluster } from '../support/postgres-cluster.js';

const pg = findPostgres();
const skipReason = 'missing' in pg ? pg.missing : null;
if (skipReason) console.warn(`test/schedules/schedules-postgres.test.ts: skipped (${skipReason})`);

type Delivery = { fireId: string; instance: string; conversationId: string };

/** Where fires land: every delivery, by fire id, and which instance made it. */
function recordingTargets(instance: string, deliveries: Delivery[]): ScheduleTargets {
  let created = 0;
  const targets = {
    exists: async () => true,
    knows: () => true,
    runningRun: () => null,
    runEnd: async () => 'ended',
    create: async () => `00000000-0000-4000-8000-${String(++created).padStart(6, '0')}${instance === 'a' ? '000000' : '111111'}`,
    createdBy: () => null,
    deliver: async (conversationId: string, _message: unknown, options: { mark: { fire_id: string } }) => {
      deliveries.push({ fireId: options.mark.fire_id, instance, conversationId });
      return null;
    },
    send: async () => null,
    delivered: async () => ({ marked: false, sent: false, runId: null }),
    delete: async () => {},
  };
  return targets as unknown as ScheduleTargets;
}

describe.skipIf(skipReason !== null)('two instances on one PostgreSQL', () => {
  let cluster: PostgresCluster;
  const pools: postgres.Sql[] = [];

  beforeAll(async () => {
    cluster = await startPostgres(pg as Exclude<typeof pg, { missing: string }>);
  }, 60_000);
  afterAll(async () => {
    for (const pool of pools) await pool.end({ timeout: 5 });
    await cluster?.stop();
  }, 60_000);

  /** One instance on the database at `url`: its own pool, store, runner and service, its fires recorded in `deliveries`. */
  const instance = (url: string, name: string, options: { clock: { now(): number }; deliveries: Delivery[]; leaseMs?: number; pausePoint?: (point: string) => Promise<void> }) => {
    const { clock, leaseMs, pausePoint } = options;
    const sql = postgres(url, { max: 4, onnotice: () => {} });
    pools.push(sql);
    const store = new PgScheduleStore(sql, { leaseMs: leaseMs ?? 30_000 });
    const targets = recordingTargets(name, options.deliveries);
    const runner = new ScheduleRunner({ store, targets, clock, owner: `instance-${name}`, ...(leaseMs !== undefined && { leaseMs }), ...(pausePoint && { pausePoint }) });
    return { sql, store, runner, service: new ScheduleService({ store, runner, targets, clock, defaultTimezone: 'UTC' }) };
  };

  it('fires each of 100 one-second slots once, whichever instance gets there', async () => {
    const url = await cluster.createDatabase('schedules_once');
    let now = Date.parse('2026-05-01T00:00:00.000Z');
    const clock = { now: () => now };
    const deliveries: Delivery[] = [];
    const instances = ['a', 'b'].map((name) => instance(url, name, { clock, deliveries }));
    await migrate(instances[0]!.sql);
    // Several schedules so that both instances have work at each tick.
    const schedules = [];
    for (let i = 0; i < 4; i++) schedules.push(await instances[i % 2]!.service.create({ every: 'PT1S', new: { on_complete: 'keep' }, overlap: 'allow', message: { content: `s${i}` }, catchup: { window_s: 3600, max: 1 }, dst: { gap: 'shift', repeat: 'once' }, jitter_s: 0 }));
    for (let second = 1; second <= 100; second++) {
      now += 1000;
      await Promise.all(instances.map((instance) => instance.runner.tick()));
    }
    const fireIds = deliveries.map((delivery) => delivery.fireId);
    expect(new Set(fireIds).size).toBe(fireIds.length);
    expect(fireIds).toHaveLength(400);
    for (const schedule of schedules) {
      const fires = (await instances[0]!.service.fires(schedule.id, { limit: 1000 })).items;
      expect(fires).toHaveLength(100);
      expect(fires.every((fire) => fire.outcome === 'started')).toBe(true);
      expect(new Set(fires.map((fire) => fire.scheduled_for)).size).toBe(100);
      expect((await instances[1]!.service.get(schedule.id)).fires_count).toBe(100);
    }
    // Both instances fired (the lease moves between them), and neither waited for the other's lock.
    expect(new Set(deliveries.map((delivery) => delivery.instance))).toEqual(new Set(['a', 'b']));
  }, 120_000);

  it('an idle instance does not tick; a schedule made on another instance wakes it (LISTEN/NOTIFY) and it sleeps again once none is active', async () => {
    const url = await cluster.createDatabase('schedules_timer');
    const clock = { now: () => Date.now() };
    const deliveries: Delivery[] = [];
    const open = (name: string) => instance(url, name, { clock, deliveries });
    const a = open('a');
    await migrate(a.sql);
    // Instance a's timer on its real store; every tick reads the due schedules once or more.
    let looks = 0;
    const takeDue = a.store.takeDue.bind(a.store);
    a.store.takeDue = (options) => {
      looks++;
      return takeDue(options);
    };
    const timer = new ScheduleTimer({ runner: a.runner, store: a.store, clock, onError: (error) => console.error(error) });
    await timer.start();
    try {
      await new Promise((resolve) => setTimeout(resolve, 1500));
      expect(looks).toBe(0);
      // Made through instance b, which has no timer here: only a notice can wake a.
      const b = open('b');
      const schedule = await b.service.create({ cron: '* * * * * *', max_fires: 2, new: { on_complete: 'keep' }, overlap: 'allow', message: { content: 'wake' }, catchup: { window_s: 3600, max: 1 }, dst: { gap: 'shift', repeat: 'once' }, jitter_s: 0 });
      await eventually('both fires, by a', 15_000, async () => deliveries.length === 2);
      expect(deliveries.map((delivery) => delivery.instance)).toEqual(['a', 'a']);
      await eventually('the schedule to complete', 5_000, async () => (await b.service.get(schedule.id)).status === 'completed');
      const after = looks;
      await new Promise((resolve) => setTimeout(resolve, 1500));
      expect(looks).toBe(after);
    } finally {
      await timer.close();
    }
  }, 60_000);

  it('a fire claimed by an instance that died is finished by the other once its lease runs out', async () => {
    const url = await cluster.createDatabase('schedules_takeover');
    let now = Date.parse('2026-05-01T00:00:00.000Z');
    const clock = { now: () => now };
    const deliveries: Delivery[] = [];
    const make = (name: string, pausePoint?: (point: string) => Promise<void>) => instance(url, name, { clock, deliveries, leaseMs: 300, ...(pausePoint && { pausePoint }) });
    let claimed!: () => void;
    const wasClaimed = new Promise<void>((resolve) => (claimed = resolve));
    // Instance a stops for good right after its claim, as a process killed there would.
    const dying = make('a', async () => {
      claimed();
      await new Promise<never>(() => {});
    });
    await migrate(dying.sql);
    const survivor = make('b');
    const schedule = await dying.service.create({ every: 'PT1M', new: { on_complete: 'keep' }, overlap: 'allow', message: { content: 'once' }, catchup: { window_s: 3600, max: 1 }, dst: { gap: 'shift', repeat: 'once' }, jitter_s: 0 });
    now += 60_000;
    void dying.runner.tick();
    await wasClaimed;
    // While the claim's lease holds, the survivor neither repeats nor takes over the fire.
    await survivor.runner.tick();
    expect(deliveries).toEqual([]);
    await new Promise((resolve) => setTimeout(resolve, 700));
    await survivor.runner.tick();
    await survivor.runner.tick();
    expect(deliveries.map((delivery) => delivery.instance)).toEqual(['b']);
    const fires = (await survivor.service.fires(schedule.id, { limit: 10 })).items;
    expect(fires).toHaveLength(1);
    expect(fires[0]).toMatchObject({ outcome: 'started', id: deliveries[0]!.fireId });
  }, 60_000);
});
