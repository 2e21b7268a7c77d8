// A damaged schedule file does not stop start-up: the server (files) is stopped, one schedule's
// file is damaged, and the restarted server quarantines that schedule (left out, named in its log
// and in /health, its files kept as found) and serves and fires the others.
import fs from 'node:fs';
import path from 'node:path';
import { PassThrough } from 'node:stream';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { startFakeLlm, type FakeLlm } from '../fake-llm/fake-llm-server.js';
import { startServer, tempDir, type TestServer } from '../support/agentd.js';
import { okJson, requestJson } from '../support/json-api.js';
import { until } from '../support/reliability.js';

let fake: FakeLlm;
const servers: TestServer[] = [];

beforeAll(async () => {
  fake = await startFakeLlm({ whenExhausted: { text: 'done' } });
});
afterAll(async () => {
  for (const server of servers.splice(0)) await server.close();
  await fake?.close();
});

it('quarantines a damaged schedule at start-up and serves the others', async () => {
  const dataDir = tempDir('agentd-schedule-damage-');
  const first = await startServer({ dataDir });
  servers.push(first);
  const conversation = (await okJson(first, 'POST', '/conversations', { llm: { model: 'fake-model', base_url: fake.url } })).id as string;
  const make = async (content: string) => (await okJson(first, 'POST', `/conversations/${conversation}/schedules`, { cron: '0 3 * * *', message: { content } })).id as string;
  const [damaged, healthy] = [await make('damaged'), await make('healthy')];
  // A fire of each, so that each has its fires file too.
  for (const id of [damaged, healthy]) {
    expect(await okJson(first, 'POST', `/schedules/${id}/trigger`)).toMatchObject({ outcome: 'started' });
    await until(async () => (await okJson(first, 'GET', `/conversations/${conversation}`)).status !== 'running', 'the run to end');
  }
  await servers.pop()!.close();

  const file = path.join(dataDir, 'schedules', `${damaged}.json`);
  fs.writeFileSync(file, fs.readFileSync(file, 'utf8').slice(0, 50));
  const kept = [file, path.join(dataDir, 'schedules', `${damaged}.fires.jsonl`)].map((name) => [name, fs.readFileSync(name)] as const);

  const log = new PassThrough();
  let output = '';
  log.on('data', (chunk: Buffer) => (output += chunk.toString()));
  const second = await startServer({ dataDir, logStream: log });
  servers.push(second);

  const health = await requestJson(second, 'GET', '/health');
  expect(health.status).toBe(200);
  expect(health.body).toMatchObject({ status: 'degraded', checks: { quarantined: { ok: false, conversations: [], callbacks: [], schedules: [damaged] } } });
  expect(health.body.checks.quarantined.detail).toContain('1 schedule(s) quarantined');
  const line = output.split('\n').find((entry) => entry.includes('schedule quarantined'));
  expect(line && JSON.parse(line)).toMatchObject({ schedule_id: damaged, file, line: null, msg: expect.stringContaining('not valid JSON') });

  // The damaged schedule is left out; the healthy one is listed and fires.
  expect((await okJson(second, 'GET', '/schedules')).items.map((item: { id: string }) => item.id)).toEqual([healthy]);
  expect((await requestJson(second, 'GET', `/schedules/${damaged}`)).status).toBe(404);
  expect(await okJson(second, 'POST', `/schedules/${healthy}/trigger`)).toMatchObject({ outcome: 'started' });
  await until(async () => (await okJson(second, 'GET', `/conversations/${conversation}`)).status !== 'running', 'the run to end');
  await second.services.schedules.tick();
  expect((await okJson(second, 'GET', `/schedules/${healthy}/fires`)).items).toHaveLength(2);
  for (const [name, bytes] of kept) expect(fs.readFileSync(name)).toEqual(bytes);
});
