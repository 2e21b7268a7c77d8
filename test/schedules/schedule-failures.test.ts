// pause_after_failures counts fires whose run failed, not only fires that could not start: on a
// fake clock, the scripted LLM answers each run with an error or a text, as the test says; a run
// that ends without failing resets the count.
import { afterAll, beforeAll, expect, it } from 'vitest';
import { startFakeLlm, type FakeLlm } from '../fake-llm/fake-llm-server.js';
import { startServer, type TestServer } from '../support/agentd.js';
import { okJson } from '../support/json-api.js';
import { until } from '../support/reliability.js';

let now = Date.parse('2026-09-01T08:00:00.000Z');
const clock = { now: () => now };
let server: TestServer;
let fake: FakeLlm;
/** Whether the LLM answers the next requests with an error (the run fails) or a text (it completes). */
let failing = true;

beforeAll(async () => {
  fake = await startFakeLlm({
    whenExhausted: () => (failing ? { status: 400, body: { error: { message: 'The model refuses this request.', type: 'invalid_request_error', code: 'invalid_request' } } } : { text: 'done' }),
  });
  server = await startServer({ overrides: { clock } });
});
afterAll(async () => {
  await server?.close();
  await fake?.close();
});

const api = (method: string, path: string, body?: unknown) => okJson(server, method, path, body);

it('pauses after n fires in a row whose run failed; a run that did not fail resets the count', async () => {
  const conversation = (await api('POST', '/conversations', { llm: { model: 'fake-model', base_url: fake.url } })).id as string;
  const schedule = await api('POST', `/conversations/${conversation}/schedules`, { every: 'PT1M', pause_after_failures: 2, overlap: 'allow', message: { content: 'nightly job' } });
  const runs = async () => (await api('GET', `/conversations/${conversation}/runs`)).items as { id: string; status: string }[];
  /** The next slot: the LLM set to fail or not, the tick, and the run it started (ended, with its status). */
  const fireOnce = async (runFails: boolean) => {
    failing = runFails;
    now += 60_000;
    await server.services.schedules.tick();
    await until(async () => (await api('GET', `/conversations/${conversation}`)).status !== 'running', 'the run to end');
    return (await api('GET', `/schedules/${schedule.id}`)) as { status: string; status_reason: string | null; consecutive_failures: number };
  };

  // A fire's run is judged when it has ended, before the next slot fires.
  expect(await fireOnce(true)).toMatchObject({ status: 'active', consecutive_failures: 0 });
  expect((await runs()).map((run) => run.status)).toEqual(['failed']);
  expect(await fireOnce(false)).toMatchObject({ status: 'active', consecutive_failures: 1 });
  expect(await fireOnce(true)).toMatchObject({ status: 'active', consecutive_failures: 0 });
  expect(await fireOnce(true)).toMatchObject({ status: 'active', consecutive_failures: 1 });
  expect((await runs()).map((run) => run.status)).toEqual(['failed', 'completed', 'failed', 'failed']);

  // The second failed run in a row pauses the schedule before its next slot, which is recorded and starts nothing.
  expect(await fireOnce(false)).toMatchObject({ status: 'paused', status_reason: 'paused after 2 failed fires in a row', consecutive_failures: 2 });
  const fires = ((await api('GET', `/schedules/${schedule.id}/fires?limit=100`)).items as { outcome: string; run_id: string | null }[]).reverse();
  expect(fires.map((fire) => fire.outcome)).toEqual(['started', 'started', 'started', 'started', 'skipped_paused']);
  expect(fires.slice(0, 4).map((fire) => fire.run_id)).toEqual((await runs()).map((run) => run.id));
  expect(await runs()).toHaveLength(4);

  // Resumed, the count starts afresh; a run that completes keeps it at zero.
  expect(await api('POST', `/schedules/${schedule.id}/resume`)).toMatchObject({ status: 'active', consecutive_failures: 0 });
  expect(await fireOnce(false)).toMatchObject({ status: 'active', consecutive_failures: 0 });
  expect(await fireOnce(false)).toMatchObject({ status: 'active', consecutive_failures: 0 });
  expect((await runs()).map((run) => run.status).slice(4)).toEqual(['completed', 'completed']);
});
