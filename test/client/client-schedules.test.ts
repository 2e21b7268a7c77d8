// The typed client's schedules methods against the real server (one per route).
import { afterAll, beforeAll, expect, it } from 'vitest';
import { AgentdClient, AgentdError } from '../../src/client/index.js';
import { startServer, TEST_KEY, type TestServer } from '../support/agentd.js';

let server: TestServer;
let client: AgentdClient;
beforeAll(async () => {
  server = await startServer();
  client = new AgentdClient({ url: server.url, apiKey: TEST_KEY });
});
afterAll(async () => server?.close());

it('creates, lists, changes, pauses, resumes, triggers, previews and deletes schedules', async () => {
  const conversation = await client.conversations.create({ title: 'scheduled' });
  const schedule = await client.schedules.createForConversation(conversation.id, { cron: '0 3 * * *', timezone: 'Europe/Berlin', message: { content: 'nightly' } });
  expect(schedule).toMatchObject({ conversation_id: conversation.id, status: 'active', timezone: 'Europe/Berlin' });
  expect((await client.schedules.list({ conversation_id: conversation.id })).items.map((item) => item.id)).toEqual([schedule.id]);
  expect(await client.schedules.update(schedule.id, { cron: '0 4 * * *' })).toMatchObject({ cron: '0 4 * * *' });
  expect(await client.schedules.pause(schedule.id, { note: 'later' })).toMatchObject({ status: 'paused', status_reason: 'later' });
  expect((await client.schedules.resume(schedule.id)).status).toBe('active');
  // No LLM on this conversation: the manual fire is recorded failed, with why.
  const fire = await client.schedules.trigger(schedule.id);
  expect(fire).toMatchObject({ manual: true, outcome: 'failed' });
  expect((await client.schedules.fires(schedule.id)).items.map((item) => item.id)).toEqual([fire.id]);
  expect((await client.schedules.preview({ every: 'PT1H', count: 3 })).next).toHaveLength(3);
  expect(await client.schedules.get(schedule.id)).toMatchObject({ last_outcome: 'failed' });
  const invalid = await client.schedules.create({ cron: 'nope', conversation_id: conversation.id, message: { content: 'x' } }).catch((error: unknown) => error);
  expect(invalid).toBeInstanceOf(AgentdError);
  expect(invalid).toMatchObject({ status: 422, code: 'invalid_schedule' });
  await client.schedules.delete(schedule.id);
  expect((await client.schedules.list()).items.map((item) => item.id)).not.toContain(schedule.id);
});
