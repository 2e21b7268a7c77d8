/**
 * Webhooks between owners: two owners, each with a conversation and a webhook to a receiver of
 * their own (real listeners on 127.0.0.1); each receiver gets its owner's conversation's events
 * and not one byte of the other's, and an owner cannot hang a webhook on the other's conversation.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startServer, type TestServer } from '../support/agentd.js';
import { startFakeLlm, type FakeLlm } from '../fake-llm/fake-llm-server.js';
import { WebhookReceiver } from '../support/webhook-receiver.js';
import { adminCall, client, USER_SCOPES, type Answer } from '../support/access-matrix.js';

const FAST_RETRIES = { AGENTD_WEBHOOK_RETRY_BASE_MS: '20', AGENTD_WEBHOOK_RETRY_MAX_MS: '100', AGENTD_WEBHOOK_TIMEOUT_S: '5' };

let server: TestServer;
let llm: FakeLlm;
const receivers: WebhookReceiver[] = [];

async function ownerKey(owner: string): Promise<ReturnType<typeof client>> {
  const created = await adminCall(server.url)('POST', '/keys', { name: owner, owner, scopes: USER_SCOPES });
  expect(created.status).toBe(201);
  return client(server.url, created.body.secret);
}

async function idle(call: ReturnType<typeof client>, id: string): Promise<Answer> {
  for (;;) {
    const answer = await call('GET', `/conversations/${id}`);
    if (answer.body.status !== 'running') return answer;
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

beforeAll(async () => {
  llm = await startFakeLlm({ whenExhausted: { text: 'answered' } });
  server = await startServer({ env: FAST_RETRIES });
  receivers.push(await WebhookReceiver.start(), await WebhookReceiver.start());
});

afterAll(async () => {
  for (const receiver of receivers) await receiver.close();
  await server?.close();
  await llm?.close();
});

describe('webhooks between owners', () => {
  it("delivers each owner's conversation's events to that owner's webhook only", { timeout: 30_000 }, async () => {
    const [toAnn, toBen] = receivers as [WebhookReceiver, WebhookReceiver];
    const ann = await ownerKey('ann');
    const ben = await ownerKey('ben');
    const llmConfig = { model: 'fake', base_url: llm.url, api_key: 'k' };
    const annsConversation = (await ann('POST', '/conversations', { title: 'ann-title', llm: llmConfig })).body.id as string;
    const bensConversation = (await ben('POST', '/conversations', { title: 'ben-title', llm: llmConfig })).body.id as string;
    expect((await ann('POST', `/conversations/${annsConversation}/callbacks`, { url: toAnn.url })).status).toBe(201);
    expect((await ben('POST', `/conversations/${bensConversation}/callbacks`, { url: toBen.url })).status).toBe(201);
    // Ben cannot subscribe his receiver to Ann's conversation: it does not exist for him.
    expect((await ben('POST', `/conversations/${annsConversation}/callbacks`, { url: toBen.url })).status).toBe(404);

    // Both owners' runs at once, so that the deliveries interleave.
    const sent = await Promise.all([
      ann('POST', `/conversations/${annsConversation}/messages`, { content: 'words-of-ann' }),
      ben('POST', `/conversations/${bensConversation}/messages`, { content: 'words-of-ben' }),
    ]);
    expect(sent.map((answer) => answer.status)).toEqual([202, 202]);
    const annsEvents = (await idle(ann, annsConversation)).body.event_count as number;
    const bensEvents = (await idle(ben, bensConversation)).body.event_count as number;
    await toAnn.waitFor(() => toAnn.seqs.includes(annsEvents), "every event of Ann's conversation at Ann's receiver");
    await toBen.waitFor(() => toBen.seqs.includes(bensEvents), "every event of Ben's conversation at Ben's receiver");

    expect(new Set(toAnn.requests.map((request) => request.json.conversation_id))).toEqual(new Set([annsConversation]));
    expect(new Set(toBen.requests.map((request) => request.json.conversation_id))).toEqual(new Set([bensConversation]));
    // Each in order, none missed: 1, 2, 3… up to the last delivered.
    for (const seqs of [toAnn.seqs, toBen.seqs]) expect(seqs).toEqual(Array.from({ length: Math.max(...seqs) }, (_, index) => index + 1));
    const atAnn = toAnn.requests.map((request) => request.body).join('\n');
    const atBen = toBen.requests.map((request) => request.body).join('\n');
    expect(atAnn).toContain('words-of-ann');
    expect(atBen).toContain('words-of-ben');
    for (const foreign of [bensConversation, 'words-of-ben', 'ben-title']) expect(atAnn).not.toContain(foreign);
    for (const foreign of [annsConversation, 'words-of-ann', 'ann-title']) expect(atBen).not.toContain(foreign);
  });
});
