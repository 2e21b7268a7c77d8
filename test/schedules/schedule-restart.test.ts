// kill -9 between a fire's claim and its start: the next start finishes that fire, and the slot
// has exactly one run (the built server, dist/cli.js, killed and started again on its data dir).
import { expect, it } from 'vitest';
import { tempDir } from '../support/agentd.js';
import { until } from '../support/reliability.js';
import { restartableServer, RESTART_TEST_TIMEOUT } from '../support/restartable-server.js';

const agentd = restartableServer();

it('finishes a fire claimed by a killed process, once', async () => {
  const llm = await agentd.fakeLlm({ whenExhausted: { text: 'done' } });
  const dataDir = tempDir();
  await agentd.start({ dataDir, env: { AGENTD_TEST_PAUSE_AT: 'schedule-fire-claimed' } });
  const post = (path: string, body: unknown) => agentd.api(path, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
  const conversation = (await post('/conversations', { llm: { model: 'fake', base_url: llm.url, api_key: 'k' } })).id as string;
  // Every second, once: the first slot's fire is claimed, then the server stops at the pause point.
  const schedule = (await post(`/conversations/${conversation}/schedules`, { cron: '* * * * * *', max_fires: 1, message: { content: 'scheduled work' } })).id as string;
  await until(() => agentd.server.output().includes('AGENTD_TEST_PAUSED schedule-fire-claimed'), 'the fire to be claimed');
  // On a loaded machine a tick may come a few slots late: the older slots are recorded missed (catch-up fires the newest).
  const before = (await agentd.api(`/schedules/${schedule}/fires`)).items as { outcome: string | null }[];
  const claimed = before.filter((fire) => fire.outcome === null) as any[];
  expect(claimed).toHaveLength(1);
  expect(claimed[0]).toMatchObject({ outcome: null, run_id: null });
  expect(before.filter((fire) => fire.outcome !== null).every((fire) => fire.outcome === 'skipped_missed')).toBe(true);
  expect((await agentd.api(`/conversations/${conversation}/runs`)).items).toHaveLength(0);

  await agentd.kill();
  await agentd.start({ dataDir });
  await until(async () => (await agentd.api(`/schedules/${schedule}`)).status === 'completed', 'the claimed fire to be finished');
  await until(async () => (await agentd.api(`/conversations/${conversation}`)).status !== 'running', 'its run to end');
  const fires = ((await agentd.api(`/schedules/${schedule}/fires`)).items as any[]).filter((fire) => fire.outcome !== 'skipped_missed');
  expect(fires).toHaveLength(1);
  expect(fires[0]).toMatchObject({ id: claimed[0].id, scheduled_for: claimed[0].scheduled_for, outcome: 'started', reason: null });
  expect(fires[0].run_id).toEqual(expect.any(String));
  const runs = (await agentd.api(`/conversations/${conversation}/runs`)).items;
  expect(runs.map((run: { id: string }) => run.id)).toEqual([fires[0].run_id]);
  const events = (await agentd.api(`/conversations/${conversation}/events?kind=schedule_fire&kind=message&source=user&source=system`)).items;
  expect(events.map((event: { kind: string }) => event.kind)).toEqual(['schedule_fire', 'message']);
  expect(llm.violations).toEqual([]);
}, RESTART_TEST_TIMEOUT);
