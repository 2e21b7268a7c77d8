import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { NewEvent } from '../../src/core/schemas/event.js';
import { startServer, type TestServer } from '../support/agentd.js';
import { expectError } from '../support/expect-error.js';

interface Item {
  id: string;
  seq?: number;
  kind?: string;
  source?: string;
  timestamp?: string;
  status?: string;
  created_at?: string;
  updated_at?: string;
}

let server: TestServer;
let conversationIds: string[] = [];
let eventConversation: string;
let otherConversation: string;
let events: Item[] = [];

async function get(url: string) {
  const response = await server.app.inject({ method: 'GET', url, headers: server.auth });
  return { status: response.statusCode, body: response.json() };
}

/** Follow next_page_id until null; every page must respect the limit. */
async function walk(url: string, limit = 7): Promise<Item[]> {
  const items: Item[] = [];
  let pageId: string | null = null;
  let pages = 0;
  do {
    const separator = url.includes('?') ? '&' : '?';
    const { status, body } = await get(`${url}${separator}limit=${limit}${pageId ? `&page_id=${encodeURIComponent(pageId)}` : ''}`);
    expect(status, JSON.stringify(body)).toBe(200);
    expect(body.items.length).toBeLessThanOrEqual(limit);
    if (body.next_page_id !== null) expect(body.items.length).toBe(limit);
    items.push(...body.items);
    pageId = body.next_page_id;
    pages += 1;
    expect(pages).toBeLessThan(1000);
  } while (pageId !== null);
  return items;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

function eventNumber(i: number): NewEvent {
  switch (i % 5) {
    case 0:
      return { kind: 'message', source: 'user', role: 'user', content: `user ${i}` };
    case 1:
      return { kind: 'message', source: 'agent', role: 'assistant', content: `agent ${i}` };
    case 2:
      return { kind: 'state_update', source: 'system', status: 'running' };
    case 3:
      return { kind: 'observation', source: 'environment', tool_call_id: `t${i}`, tool_name: 'bash', content: 'ok', is_error: false, data: { exit_code: 0 } };
    default:
      return { kind: 'usage', source: 'system', prompt_tokens: i, completion_tokens: 1, cost: 0, totals: { prompt_tokens: i, completion_tokens: i, cost: 0 } };
  }
}

beforeAll(async () => {
  server = await startServer({ listen: false });
  const { conversations } = server.services;
  for (let i = 0; i < 253; i++) {
    const { conversation, record } = await conversations.create({ max_iterations_per_run: 500, confirmation_mode: false, title: `c${i}` });
    if (i % 4 === 0) server.services.store.setStatus(record.id, 'finished');
    conversationIds.push(conversation.id);
    if (i % 50 === 0) await sleep(2);
  }
  eventConversation = conversationIds[10]!;
  otherConversation = conversationIds[11]!;
  for (let i = 0; i < 263; i++) {
    if (i === 100 || i === 200) await sleep(5);
    conversations.append(eventConversation, eventNumber(i));
  }
  conversations.append(otherConversation, eventNumber(0));
  events = (await get(`/conversations/${eventConversation}/events?limit=1000`)).body.items;
});
afterAll(async () => {
  await server?.close();
});

describe('conversation list', () => {
  const byKey = (key: 'created_at' | 'updated_at') => (a: Item, b: Item) => (a[key]! < b[key]! ? -1 : a[key]! > b[key]! ? 1 : a.id < b.id ? -1 : 1);

  it.each(['created_at', 'updated_at'] as const)('walks every conversation exactly once, in %s order, both ways', async (sort) => {
    const asc = await walk(`/conversations?sort=${sort}&order=asc`);
    expect(asc.length).toBe(253);
    expect(new Set(asc.map((c) => c.id)).size).toBe(253);
    expect(asc.map((c) => c.id)).toEqual([...asc].sort(byKey(sort)).map((c) => c.id));
    const desc = await walk(`/conversations?sort=${sort}&order=desc`);
    expect(desc.map((c) => c.id)).toEqual(asc.map((c) => c.id).reverse());
    expect(new Set(asc.map((c) => c.id))).toEqual(new Set(conversationIds));
  });

  it('walks a status-filtered list', async () => {
    const finished = await walk('/conversations?status=finished&order=asc');
    expect(finished.length).toBe(64);
    expect(finished.every((c) => c.status === 'finished')).toBe(true);
    const everything = await walk('/conversations?order=asc', 1000);
    expect(finished).toEqual(everything.filter((c) => c.status === 'finished'));
    expect(await walk('/conversations?status=idle&sort=updated_at', 1000)).toHaveLength(253 - 64);
  });

  it('walks with limit 1 and with the maximum limit', async () => {
    expect((await walk('/conversations?order=asc', 1)).length).toBe(253);
    const whole = await get('/conversations?limit=1000');
    expect(whole.body.items).toHaveLength(253);
    expect(whole.body.next_page_id).toBeNull();
    expect((await get('/conversations')).body.items).toHaveLength(100);
  });
});

describe('event list', () => {
  it('holds the appended events with seqs 1..N', () => {
    expect(events.map((e) => e.seq)).toEqual(Array.from({ length: 263 }, (_, i) => i + 1));
  });

  it('walks every event exactly once, both ways', async () => {
    const asc = await walk(`/conversations/${eventConversation}/events`);
    expect(asc).toEqual(events);
    const desc = await walk(`/conversations/${eventConversation}/events?order=desc`);
    expect(desc).toEqual([...events].reverse());
  });

  it('filters by kind (repeated and comma-separated), source, after_seq and since', async () => {
    const base = `/conversations/${eventConversation}/events`;
    const only = (predicate: (e: Item) => boolean) => events.filter(predicate);
    const repeated = await walk(`${base}?kind=message&kind=usage`);
    expect(repeated).toEqual(only((e) => e.kind === 'message' || e.kind === 'usage'));
    expect(await walk(`${base}?kind=message,usage`)).toEqual(repeated);
    expect(await walk(`${base}?kind=message,usage&order=desc`)).toEqual([...repeated].reverse());
    expect(await walk(`${base}?source=user`)).toEqual(only((e) => e.source === 'user'));
    expect(await walk(`${base}?source=system,environment&kind=usage`)).toEqual(only((e) => e.kind === 'usage'));
    expect(await walk(`${base}?after_seq=250`)).toEqual(events.slice(250));
    expect(await walk(`${base}?after_seq=263`)).toEqual([]);
    expect(await walk(`${base}?after_seq=200&order=desc`)).toEqual(events.slice(200).reverse());

    const since = events[100]!.timestamp!;
    expect(since > events[99]!.timestamp!).toBe(true);
    const fromSince = only((e) => e.timestamp! >= since);
    expect(fromSince.length).toBeGreaterThan(100);
    expect(await walk(`${base}?since=${since}`)).toEqual(fromSince);
    expect(await walk(`${base}?since=${since}&kind=state_update&order=desc`)).toEqual(fromSince.filter((e) => e.kind === 'state_update').reverse());
    expect(await walk(`${base}?since=2999-01-01T00:00:00.000Z`)).toEqual([]);
  });

  it('counts with the same filters', async () => {
    const base = `/conversations/${eventConversation}/events/count`;
    const count = async (query: string) => (await get(`${base}${query}`)).body.count;
    expect(await count('')).toBe(263);
    expect(await count('?kind=message')).toBe(events.filter((e) => e.kind === 'message').length);
    expect(await count('?kind=message&kind=usage')).toBe(events.filter((e) => e.kind === 'message' || e.kind === 'usage').length);
    expect(await count('?source=agent&after_seq=100')).toBe(events.filter((e) => e.source === 'agent' && e.seq! > 100).length);
    expect(await count(`?since=${events[200]!.timestamp}`)).toBe(events.filter((e) => e.timestamp! >= events[200]!.timestamp!).length);
    expect(await count('?kind=condensation')).toBe(0);
    expectError(await get(`/conversations/${randomUUID()}/events/count`), { status: 404, error: 'conversation_not_found', message: /^No conversation with id [0-9a-f-]+\./ });
  });

  it('gets an event by id; 404 for an unknown id or another conversation\'s event', async () => {
    const event = events[137]!;
    expect(await get(`/conversations/${eventConversation}/events/${event.id}`)).toEqual({ status: 200, body: event });
    const unknown = await get(`/conversations/${eventConversation}/events/${randomUUID()}`);
    expect(unknown).toMatchObject({ status: 404, body: { error: 'event_not_found' } });
    const foreign = (await get(`/conversations/${otherConversation}/events`)).body.items[0];
    expectError(await get(`/conversations/${eventConversation}/events/${foreign.id}`), { status: 404, error: 'event_not_found', message: /^No event with id [0-9a-f-]+\./ });
    expectError(await get(`/conversations/${randomUUID()}/events/${event.id}`), { status: 404, error: 'conversation_not_found', message: /^No conversation with id [0-9a-f-]+\./ });
    expectError(await get(`/conversations/${eventConversation}/events/not-a-uuid`), { status: 400, error: 'validation_error', message: /^Invalid params at event_id: Invalid UUID\./ });
  });
});

describe('bad paging input', () => {
  const conversationPage = () => get('/conversations?limit=2').then((r) => r.body.next_page_id as string);
  const eventPage = () => get(`/conversations/${eventConversation}/events?limit=2`).then((r) => r.body.next_page_id as string);

  it.each([
    ['garbage', async () => 'not-a-cursor!!'],
    ['base64 of a wrong shape', async () => Buffer.from('{"x":1}').toString('base64url')],
    ['base64 of non-JSON', async () => Buffer.from('hello').toString('base64url')],
    ['an event cursor', eventPage],
    ['an overlong value', async () => 'a'.repeat(600)],
  ])('conversation list: page_id that is %s → 400', async (_name, make) => {
    const { status, body } = await get(`/conversations?page_id=${encodeURIComponent(await make())}`);
    expect(status).toBe(400);
    expect(typeof body.error).toBe('string');
  });

  it.each([
    ['garbage', async () => 'not-a-cursor!!'],
    ['a conversation cursor', conversationPage],
    ['a cursor of the other order', eventPage, '&order=desc'],
  ])('event list: page_id that is %s → 400', async (_name, make, extra = '') => {
    const { status, body } = await get(`/conversations/${eventConversation}/events?page_id=${encodeURIComponent(await make())}${extra}`);
    expect(status).toBe(400);
    expect(body.error).toBe('invalid_page_id');
  });

  it.each(['limit=0', 'limit=1001', 'limit=abc', 'limit=-5', 'limit=2.5', 'order=sideways', 'after_seq=-1', 'since=yesterday', 'kind=nope', 'kind=message,nope', 'source=robot'])(
    'event list: %s → 400',
    async (query) => {
      const { status, body } = await get(`/conversations/${eventConversation}/events?${query}`);
      expect(status).toBe(400);
      expect(body).toMatchObject({ error: 'validation_error', details: { issues: expect.any(Array) } });
    },
  );

  it.each(['limit=0', 'limit=1001', 'order=up', 'status=sleeping'])('conversation list: %s → 400', async (query) => {
    expectError(await get(`/conversations?${query}`), { status: 400, error: 'validation_error', message: /^Invalid querystring at / });
  });
});
