/**
 * Schedules belong to the owner of the key that made them (issue 77 on issue 75): another owner
 * sees none of them in lists, gets, or fires, cannot act on them, cannot aim one at a conversation
 * that is not theirs, and the conversations a fire creates are the schedule owner's.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startServer, type TestServer } from '../support/agentd.js';
import { startFakeLlm, type FakeLlm } from '../fake-llm/fake-llm-server.js';
import { adminCall, client, USER_SCOPES } from '../support/access-matrix.js';

let server: TestServer;
let llm: FakeLlm;

async function keyFor(owner: string): Promise<ReturnType<typeof client>> {
  const created = await adminCall(server.url)('POST', '/keys', { name: owner, owner, scopes: USER_SCOPES });
  expect(created.status).toBe(201);
  return client(server.url, created.body.secret);
}

/** A slot on 1 January only: nothing fires by itself during the test. */
const yearly = { cron: '0 0 1 1 *', message: { content: 'private schedule words' } };

beforeAll(async () => {
  llm = await startFakeLlm();
  server = await startServer();
});

afterAll(async () => {
  await server?.close();
  await llm?.close();
});

describe('schedule owners', () => {
  it("never shows one owner's schedules or fires to another, and refuses every action on them with a 404", async () => {
    const carol = await keyFor('carol');
    const dave = await keyFor('dave');
    const conversation = await carol('POST', '/conversations', { title: 'carol-only' });
    expect(conversation.status).toBe(201);
    const onConversation = await carol('POST', `/conversations/${conversation.body.id}/schedules`, yearly);
    expect(onConversation.status).toBe(201);
    expect(onConversation.body.owner).toBe('carol');
    const withNew = await carol('POST', '/schedules', { ...yearly, new: { title: 'made by a fire', llm: { model: 'fake', base_url: llm.url } } });
    expect(withNew.status).toBe(201);
    const fired = await carol('POST', `/schedules/${withNew.body.id}/trigger`);
    expect(fired.status).toBe(201);
    expect(fired.body.outcome).toBe('started');
    // The conversation the fire made is the schedule owner's.
    const made = await carol('GET', `/conversations/${fired.body.conversation_id}`);
    expect(made.status).toBe(200);
    expect(made.body.owner).toBe('carol');
    expect((await dave('GET', `/conversations/${fired.body.conversation_id}`)).status).toBe(404);

    const own = await dave('POST', '/schedules', { ...yearly, new: {} });
    expect(own.body.owner).toBe('dave');
    const carolsIds = [onConversation.body.id, withNew.body.id];
    const seen: string[] = [];
    const read = async (path: string) => {
      const answer = await dave('GET', path);
      if (answer.status === 200) seen.push(JSON.stringify(answer.body));
      return answer;
    };
    // A 404 for another owner's schedule is the 404 of one that does not exist (only the id asked for differs).
    const unknown = '00000000-0000-4000-8000-000000000000';
    const absent = JSON.stringify((await dave('GET', `/schedules/${unknown}`)).body);
    expect((await read('/schedules')).body.items.map((item: { id: string }) => item.id)).toEqual([own.body.id]);
    // An owner filter from a plain key is ignored: it sees its own owner's.
    expect((await read('/schedules?owner=carol')).body.items.map((item: { id: string }) => item.id)).toEqual([own.body.id]);
    expect((await read(`/schedules?conversation_id=${conversation.body.id}`)).body.items).toEqual([]);
    for (const id of carolsIds) {
      const hidden = await read(`/schedules/${id}`);
      expect(hidden.status).toBe(404);
      expect(JSON.stringify(hidden.body).replaceAll(id, unknown)).toBe(absent);
      expect((await read(`/schedules/${id}/fires`)).status).toBe(404);
      expect((await dave('PATCH', `/schedules/${id}`, { metadata: { taken: true } })).status).toBe(404);
      expect((await dave('POST', `/schedules/${id}/trigger`)).status).toBe(404);
      expect((await dave('POST', `/schedules/${id}/pause`)).status).toBe(404);
      expect((await dave('POST', `/schedules/${id}/resume`)).status).toBe(404);
      expect((await dave('DELETE', `/schedules/${id}`)).status).toBe(404);
    }
    for (const body of seen) {
      for (const id of carolsIds) expect(body).not.toContain(id);
      expect(body).not.toContain('carol');
    }
    // Nor may a schedule of Dave's send messages into Carol's conversation.
    expect((await dave('POST', '/schedules', { ...yearly, conversation_id: conversation.body.id })).status).toBe(404);
    expect((await dave('POST', `/conversations/${conversation.body.id}/schedules`, yearly)).status).toBe(404);

    // Carol's schedules are untouched, and her fire is in her records.
    const fires = await carol('GET', `/schedules/${withNew.body.id}/fires`);
    expect(fires.body.items.map((fire: { id: string }) => fire.id)).toEqual([fired.body.id]);
    expect((await carol('GET', `/schedules/${onConversation.body.id}`)).body).toMatchObject({ status: 'active', metadata: {} });

    // The admin sees all, filters by owner, and what it makes is the admin's.
    const admin = adminCall(server.url);
    const carols = await admin('GET', '/schedules?owner=carol');
    expect(carols.body.items.map((item: { id: string }) => item.id).sort()).toEqual([...carolsIds].sort());
    expect((await admin('GET', `/schedules/${withNew.body.id}/fires`)).status).toBe(200);
    const everyone = await admin('GET', '/schedules');
    expect(everyone.body.items.map((item: { id: string }) => item.id)).toEqual(expect.arrayContaining([...carolsIds, own.body.id]));
    const adminsOwn = await admin('POST', `/conversations/${conversation.body.id}/schedules`, yearly);
    expect(adminsOwn.body.owner).toBe('admin');
    expect((await carol('GET', `/schedules/${adminsOwn.body.id}`)).status).toBe(404);
  });

  it('records the refusal of another owner’s schedule in the audit log', async () => {
    const erin = await keyFor('erin');
    const frank = await keyFor('frank');
    const schedule = await erin('POST', '/schedules', { ...yearly, new: {} });
    expect((await frank('GET', `/schedules/${schedule.body.id}`)).status).toBe(404);
    const audit = await adminCall(server.url)('GET', '/audit?owner=frank&limit=100');
    expect(audit.body.items).toEqual(expect.arrayContaining([expect.objectContaining({ method: 'GET', route: '/schedules/:id', status: 404, resource: schedule.body.id })]));
  });
});
