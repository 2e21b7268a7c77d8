// Schedules end to end through HTTP on a fake clock: the test moves time and asks for a tick; the
// fires reach real conversations whose runs talk to the scripted LLM.
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { startFakeLlm, type FakeLlm } from '../fake-llm/fake-llm-server.js';
import { startServer, type TestServer } from '../support/agentd.js';
import { okJson, requestJson } from '../support/json-api.js';
import { until } from '../support/reliability.js';
import { WebhookReceiver } from '../support/webhook-receiver.js';

const HOUR = 3_600_000;
let now = Date.parse('2026-06-01T10:15:00.000Z');
const clock = { now: () => now };
let server: TestServer;
let fake: FakeLlm;
/** Lets the LLM answer every request it holds (runs that are "still going"). */
const waiting: (() => void)[] = [];
const release = () => {
  for (const resolve of waiting.splice(0)) resolve();
};
let held = false;

beforeAll(async () => {
  fake = await startFakeLlm({
    whenExhausted: async () => {
      if (held) await new Promise<void>((resolve) => waiting.push(resolve));
      return { text: 'done' };
    },
  });
  server = await startServer({ overrides: { clock } });
});
afterAll(async () => {
  release();
  await server?.close();
  await fake?.close();
});
beforeEach(() => {
  held = false;
});

const llm = () => ({ model: 'fake-model', base_url: fake.url });
const api = (method: string, path: string, body?: unknown) => okJson(server, method, path, body);
const tick = () => server.services.schedules.tick();
const fires = async (id: string) => (await api('GET', `/schedules/${id}/fires?limit=1000`)).items as { outcome: string; reason: string | null; run_id: string | null; scheduled_for: string; conversation_id: string | null; id: string }[];
const idle = (id: string) => until(async () => (await api('GET', `/conversations/${id}`)).status !== 'running', `conversation ${id} to stop running`);
const newConversation = async () => (await api('POST', '/conversations', { llm: llm() })).id as string;

describe('a schedule on a conversation', () => {
  it('fires at its slot: a schedule_fire event, the message, a run; the fire has an id derived from the slot', async () => {
    const conversation = await newConversation();
    const created = await requestJson(server, 'POST', `/conversations/${conversation}/schedules`, { cron: '0 * * * *', message: { content: 'hourly triage' } });
    expect(created.status).toBe(201);
    const schedule = created.body;
    expect(schedule).toMatchObject({ status: 'active', conversation_id: conversation, timezone: 'UTC', overlap: 'skip', catchup: { window_s: 3600, max: 1 }, next_fire_at: '2026-06-01T11:00:00.000Z' });
    await tick();
    expect(await fires(schedule.id)).toEqual([]);
    now = Date.parse('2026-06-01T11:00:00.500Z');
    await tick();
    const [fire] = await fires(schedule.id);
    expect(fire).toMatchObject({ outcome: 'started', scheduled_for: '2026-06-01T11:00:00.000Z', conversation_id: conversation });
    expect(fire!.run_id).toEqual(expect.any(String));
    const events = (await api('GET', `/conversations/${conversation}/events?kind=schedule_fire&kind=message`)).items;
    expect(events.map((event: { kind: string }) => event.kind).slice(0, 2)).toEqual(['schedule_fire', 'message']);
    expect(events[0]).toMatchObject({ source: 'system', schedule_id: schedule.id, fire_id: fire!.id, scheduled_for: '2026-06-01T11:00:00.000Z' });
    expect(events[1]).toMatchObject({ source: 'user', content: 'hourly triage' });
    expect(await api('GET', `/schedules/${schedule.id}`)).toMatchObject({ last_outcome: 'started', fires_count: 1, next_fire_at: '2026-06-01T12:00:00.000Z' });
    // The same slot again (a second tick, or a second instance) starts nothing.
    await tick();
    expect(await fires(schedule.id)).toHaveLength(1);
    await idle(conversation);
    expect((await api('GET', `/conversations/${conversation}/runs`)).items).toHaveLength(1);
    expect((await api('GET', `/schedules?conversation_id=${conversation}`)).items.map((item: { id: string }) => item.id)).toEqual([schedule.id]);
  });

  it('webhooks receive the schedule_fire event like any other', async () => {
    const receiver = await WebhookReceiver.start();
    try {
      const conversation = await newConversation();
      await api('POST', `/conversations/${conversation}/callbacks`, { url: receiver.url, events: ['schedule_fire'] });
      const schedule = await api('POST', `/conversations/${conversation}/schedules`, { cron: '*/10 * * * *', message: { content: 'ping' } });
      now = Date.parse(schedule.next_fire_at);
      await tick();
      await receiver.waitFor(() => receiver.requests.length > 0, 'the schedule_fire delivery');
      const [fire] = await fires(schedule.id);
      expect(receiver.requests.map((request) => request.json.event)).toEqual([expect.objectContaining({ kind: 'schedule_fire', schedule_id: schedule.id, fire_id: fire!.id, scheduled_for: schedule.next_fire_at })]);
      await idle(conversation);
      await api('DELETE', `/schedules/${schedule.id}`);
    } finally {
      await receiver.close();
    }
  });

  it('trigger fires now without using up the next slot; pause and resume record the slots that passed', async () => {
    const conversation = await newConversation();
    const schedule = await api('POST', `/conversations/${conversation}/schedules`, { every: 'PT1H', message: { content: 'tick' }, max_fires: 5 });
    const next = schedule.next_fire_at;
    const fire = await api('POST', `/schedules/${schedule.id}/trigger`);
    expect(fire).toMatchObject({ manual: true, outcome: 'started', conversation_id: conversation });
    expect(await api('GET', `/schedules/${schedule.id}`)).toMatchObject({ next_fire_at: next, fires_count: 0 });
    await idle(conversation);
    expect(await api('POST', `/schedules/${schedule.id}/pause`, { note: 'holiday' })).toMatchObject({ status: 'paused', status_reason: 'holiday', next_fire_at: null });
    now += 3 * HOUR;
    await tick();
    expect((await fires(schedule.id)).filter((item) => item.outcome === 'started')).toHaveLength(1);
    const resumed = await api('POST', `/schedules/${schedule.id}/resume`);
    expect(resumed.status).toBe('active');
    const paused = (await fires(schedule.id)).filter((item) => item.outcome === 'skipped_paused');
    expect(paused).toHaveLength(3);
    expect(paused[0]!.reason).toContain('holiday');
    expect(Date.parse(resumed.next_fire_at)).toBeGreaterThan(now);
  });

  it('a deleted target makes the schedule failing with target_gone, never retargeted', async () => {
    const conversation = await newConversation();
    const schedule = await api('POST', '/schedules', { conversation_id: conversation, cron: '*/5 * * * *', message: { content: 'x' } });
    await api('DELETE', `/conversations/${conversation}`);
    expect(await api('GET', `/schedules/${schedule.id}`)).toMatchObject({ status: 'failing', status_reason: 'target_gone', next_fire_at: null });
    now += 5 * 60_000;
    await tick();
    const [fire] = await fires(schedule.id);
    expect(fire).toMatchObject({ outcome: 'failed', conversation_id: conversation });
    expect(fire!.reason).toContain('target_gone');
    now += 10 * 60_000;
    await tick();
    expect(await fires(schedule.id)).toHaveLength(1);
    expect((await requestJson(server, 'POST', `/schedules/${schedule.id}/trigger`)).status).toBe(422);
  });
});

describe('overlap policies against a run that is still going', () => {
  async function busyConversation() {
    const conversation = await newConversation();
    held = true;
    await api('POST', `/conversations/${conversation}/messages`, { content: 'long job' });
    await until(async () => (await api('GET', `/conversations/${conversation}`)).status === 'running', 'the run to start');
    return { conversation, runId: (await api('GET', `/conversations/${conversation}`)).current_run_id as string };
  }
  async function fireTwice(conversation: string, overlap: string) {
    const schedule = await api('POST', `/conversations/${conversation}/schedules`, { cron: '* * * * *', overlap, message: { content: `fired with ${overlap}` } });
    now = Date.parse(schedule.next_fire_at);
    await tick();
    now += 60_000;
    await tick();
    return (await fires(schedule.id)).reverse();
  }

  it('skip records skipped_overlap and sends nothing', async () => {
    const { conversation, runId } = await busyConversation();
    const got = await fireTwice(conversation, 'skip');
    expect(got.map((fire) => fire.outcome)).toEqual(['skipped_overlap', 'skipped_overlap']);
    expect(got[0]!.run_id).toBe(runId);
    const messages = (await api('GET', `/conversations/${conversation}/events?kind=message&source=user`)).items;
    expect(messages.map((event: { content: string }) => event.content)).toEqual(['long job']);
    held = false;
    release();
    await idle(conversation);
  });

  it('enqueue_one queues one fire into the running run and skips the next', async () => {
    const { conversation, runId } = await busyConversation();
    const got = await fireTwice(conversation, 'enqueue_one');
    expect(got.map((fire) => fire.outcome)).toEqual(['started', 'skipped_overlap']);
    expect(got[0]).toMatchObject({ run_id: runId, reason: `queued into run ${runId}` });
    held = false;
    release();
    await idle(conversation);
    const messages = (await api('GET', `/conversations/${conversation}/events?kind=message&source=user`)).items;
    expect(messages.map((event: { content: string }) => event.content)).toEqual(['long job', 'fired with enqueue_one']);
  });

  it('interrupt interrupts the running run with the message', async () => {
    const { conversation, runId } = await busyConversation();
    const schedule = await api('POST', `/conversations/${conversation}/schedules`, { cron: '* * * * *', overlap: 'interrupt', message: { content: 'stop and do this' } });
    now = Date.parse(schedule.next_fire_at);
    await tick();
    const [fire] = await fires(schedule.id);
    expect(fire).toMatchObject({ outcome: 'started', reason: `interrupted run ${runId}` });
    held = false;
    release();
    await idle(conversation);
    expect((await api('GET', `/conversations/${conversation}/events?kind=interrupt`)).items).toHaveLength(1);
  });

  it('allow with a new target starts a conversation per fire even while the last one runs', async () => {
    held = true;
    const schedule = await api('POST', '/schedules', { new: { llm: llm(), title: 'nightly' }, every: 'PT1M', overlap: 'allow', message: { content: 'go' } });
    now = Date.parse(schedule.next_fire_at);
    await tick();
    now += 60_000;
    await tick();
    const got = await fires(schedule.id);
    expect(got.map((fire) => fire.outcome)).toEqual(['started', 'started']);
    expect(new Set(got.map((fire) => fire.conversation_id)).size).toBe(2);
    const created = await api('GET', `/conversations/${got[0]!.conversation_id}`);
    expect(created.metadata).toMatchObject({ schedule_id: schedule.id, fire_id: got[0]!.id });
    held = false;
    release();
    release();
  });
});

describe('catch-up after 12 h of downtime', () => {
  it('fires at most `max` of the newest slots within the window and records the rest as missed', async () => {
    const schedule = await api('POST', '/schedules', { new: { llm: llm(), on_complete: 'delete' }, every: 'PT1H', overlap: 'allow', catchup: { window_s: 3 * 3600, max: 2 }, message: { content: 'catch up' } });
    const created = Date.parse(schedule.created_at);
    now = created + 12 * HOUR + 1000;
    await tick();
    const got = await fires(schedule.id);
    expect(got).toHaveLength(12);
    expect(got.slice(0, 2).map((fire) => fire.outcome)).toEqual(['started', 'started']);
    expect(got.slice(0, 2).map((fire) => Date.parse(fire.scheduled_for))).toEqual([created + 12 * HOUR, created + 11 * HOUR]);
    expect(got.slice(2).every((fire) => fire.outcome === 'skipped_missed')).toBe(true);
    expect(got[2]!.reason).toContain('at most 2');
    expect((await api('GET', `/schedules/${schedule.id}`)).next_fire_at).toBe(new Date(created + 13 * HOUR).toISOString());
    // on_complete: delete: the fires' conversations go once their runs have ended.
    for (const fire of got.slice(0, 2)) await idle(fire.conversation_id!);
    await tick();
    for (const fire of got.slice(0, 2)) expect((await requestJson(server, 'GET', `/conversations/${fire.conversation_id}`)).status).toBe(404);
  });

  it('by default fires one slot within the hour', async () => {
    const conversation = await newConversation();
    const schedule = await api('POST', `/conversations/${conversation}/schedules`, { every: 'PT1H', message: { content: 'default catch-up' } });
    now = Date.parse(schedule.created_at) + 12 * HOUR + 1000;
    await tick();
    const got = await fires(schedule.id);
    expect(got.map((fire) => fire.outcome)).toEqual(['started', ...Array(11).fill('skipped_missed')]);
    await idle(conversation);
  });
});

describe('validation', () => {
  it.each([
    [{ cron: '61 * * * *' }, 'cron'],
    [{ cron: '0 * * * *', timezone: 'Mars/Olympus' }, 'timezone'],
    [{ every: 'P1M' }, 'every'],
    [{ cron: '0 0 30 2 *' }, 'cron'],
    [{ cron: '0 * * * *', every: 'PT1H' }, 'every'],
  ])('%j is a 422 invalid_schedule naming %s', async (rule, field) => {
    const conversation = await newConversation();
    const answer = await requestJson(server, 'POST', `/conversations/${conversation}/schedules`, { ...rule, message: { content: 'x' } });
    expect(answer.status).toBe(422);
    expect(answer.body).toMatchObject({ error: 'invalid_schedule', details: { field } });
    expect(answer.body.message).toContain(`\`${field}\``);
  });

  it('a target is required, and a missing conversation is a 404', async () => {
    expect((await requestJson(server, 'POST', '/schedules', { cron: '@hourly', message: { content: 'x' } })).body).toMatchObject({ error: 'invalid_schedule' });
    expect((await requestJson(server, 'POST', '/schedules', { cron: '@hourly', conversation_id: '00000000-0000-4000-8000-000000000000', message: { content: 'x' } })).status).toBe(404);
    expect((await requestJson(server, 'GET', '/schedules/00000000-0000-4000-8000-000000000000')).status).toBe(404);
  });

  it('previews the next fire times with the DST policy', async () => {
    now = Date.parse('2026-03-07T12:00:00.000Z');
    const shifted = await api('GET', '/schedules/preview?cron=30%202%20*%20*%20*&timezone=America/New_York&count=2');
    expect(shifted).toEqual({ timezone: 'America/New_York', next: ['2026-03-08T07:30:00.000Z', '2026-03-09T06:30:00.000Z'] });
    const skipped = await api('GET', '/schedules/preview?cron=30%202%20*%20*%20*&timezone=America/New_York&count=1&gap=skip');
    expect(skipped.next).toEqual(['2026-03-09T06:30:00.000Z']);
    expect((await requestJson(server, 'GET', '/schedules/preview?cron=bad')).status).toBe(422);
  });

  it('PATCH changes the rule and the next fire; DELETE removes the schedule', async () => {
    now = Date.parse('2026-07-01T10:10:00.000Z');
    const conversation = await newConversation();
    const schedule = await api('POST', `/conversations/${conversation}/schedules`, { cron: '0 * * * *', message: { content: 'x' } });
    const patched = await api('PATCH', `/schedules/${schedule.id}`, { every: 'PT30M' });
    expect(patched).toMatchObject({ cron: null, every: 'PT30M' });
    expect((await requestJson(server, 'PATCH', `/schedules/${schedule.id}`, { timezone: 'Nowhere/Else' })).body).toMatchObject({ error: 'invalid_schedule', details: { field: 'timezone' } });
    expect((await requestJson(server, 'DELETE', `/schedules/${schedule.id}`)).status).toBe(204);
    expect((await requestJson(server, 'GET', `/schedules/${schedule.id}`)).status).toBe(404);
  });
});

describe('on the clock', () => {
  it('30 2 * * * in America/New_York fires at 03:30 EDT on the spring-forward night (gap: shift); 30 1 * * * with repeat: both fires twice on the fall-back night', async () => {
    now = Date.parse('2026-03-07T12:00:00.000Z');
    const schedule = await api('POST', '/schedules', { new: { llm: llm() }, cron: '30 2 * * *', timezone: 'America/New_York', overlap: 'allow', message: { content: 'nightly' } });
    const slots: string[] = [];
    for (const at of ['2026-03-08T07:30:00.000Z', '2026-03-09T06:30:00.000Z']) {
      expect((await api('GET', `/schedules/${schedule.id}`)).next_fire_at).toBe(at);
      now = Date.parse(at) + 1000;
      await tick();
      slots.push(...(await fires(schedule.id)).map((fire) => fire.scheduled_for));
    }
    expect([...new Set(slots)].sort()).toEqual(['2026-03-08T07:30:00.000Z', '2026-03-09T06:30:00.000Z']);
    await api('PATCH', `/schedules/${schedule.id}`, { cron: '30 1 * * *', dst: { gap: 'shift', repeat: 'both' } });
    now = Date.parse('2026-10-31T12:00:00.000Z');
    await api('POST', `/schedules/${schedule.id}/pause`);
    await api('POST', `/schedules/${schedule.id}/resume`);
    for (const at of ['2026-11-01T05:30:00.000Z', '2026-11-01T06:30:00.000Z', '2026-11-02T06:30:00.000Z']) {
      expect((await api('GET', `/schedules/${schedule.id}`)).next_fire_at).toBe(at);
      now = Date.parse(at) + 1000;
      await tick();
    }
    const started = (await fires(schedule.id)).filter((fire) => fire.outcome === 'started').map((fire) => fire.scheduled_for);
    expect(started).toEqual(['2026-11-02T06:30:00.000Z', '2026-11-01T06:30:00.000Z', '2026-11-01T05:30:00.000Z', '2026-03-09T06:30:00.000Z', '2026-03-08T07:30:00.000Z']);
  });

  it('every PT1H stays an hour apart across the Berlin fall-back night', async () => {
    now = Date.parse('2026-10-24T23:00:00.000Z');
    const schedule = await api('POST', '/schedules', { new: { llm: llm() }, every: 'PT1H', timezone: 'Europe/Berlin', overlap: 'allow', message: { content: 'hourly' } });
    for (let hour = 1; hour <= 4; hour++) {
      now += HOUR;
      await tick();
    }
    const got = (await fires(schedule.id)).map((fire) => Date.parse(fire.scheduled_for)).reverse();
    expect(got.map((slot, i) => slot - Date.parse('2026-10-24T23:00:00.000Z') - (i + 1) * HOUR)).toEqual([0, 0, 0, 0]);
  });

  it('pauses itself after pause_after_failures failed fires, and completes at max_fires', async () => {
    now = Date.parse('2026-08-01T00:00:00.000Z');
    // No LLM: each fire fails with llm_not_configured.
    const bare = (await api('POST', '/conversations', {})).id as string;
    const failing = await api('POST', `/conversations/${bare}/schedules`, { every: 'PT1M', pause_after_failures: 2, message: { content: 'x' } });
    for (let minute = 0; minute < 3; minute++) {
      now += 60_000;
      await tick();
    }
    const failed = await fires(failing.id);
    expect(failed.map((fire) => fire.outcome)).toEqual(['failed', 'failed']);
    expect(failed[0]!.reason).toContain('llm_not_configured');
    expect(await api('GET', `/schedules/${failing.id}`)).toMatchObject({ status: 'paused', status_reason: 'paused after 2 failed fires in a row', consecutive_failures: 2 });

    const conversation = await newConversation();
    const counted = await api('POST', `/conversations/${conversation}/schedules`, { every: 'PT1M', max_fires: 2, jitter_s: 30, overlap: 'allow', message: { content: 'twice' } });
    const first = Date.parse(counted.next_fire_at);
    expect(first - Date.parse(counted.created_at)).toBeGreaterThanOrEqual(60_000);
    expect(first - Date.parse(counted.created_at)).toBeLessThan(90_000);
    for (let minute = 0; minute < 4; minute++) {
      now += 60_000;
      await tick();
      await idle(conversation);
    }
    expect(await api('GET', `/schedules/${counted.id}`)).toMatchObject({ status: 'completed', status_reason: 'max_fires', fires_count: 2, next_fire_at: null });
    expect((await fires(counted.id)).map((fire) => fire.outcome)).toEqual(['started', 'started']);
  });
});
