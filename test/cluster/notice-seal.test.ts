import { describe, expect, it } from 'vitest';
import type { EventFeed, FeedNotice } from '../../src/adapters/cluster/event-feed.js';
import { GlobalTail, type FirehoseStore } from '../../src/adapters/cluster/global-tail.js';
import { NoticeSeal } from '../../src/adapters/cluster/notice-seal.js';
import type { FirehoseEntry } from '../../src/core/events/event-log.js';
import type { AgentEvent } from '../../src/core/schemas/event.js';

const seal = new NoticeSeal(Buffer.alloc(32, 1));
const notice: FeedNotice = { globalCursor: 7, conversationId: 'c1', seq: 3, json: '{"x":1}' };

describe('a sealed feed notice', () => {
  it('opens as sent, with or without its JSON', () => {
    expect(seal.open(seal.seal(notice))).toEqual(notice);
    const { json: _json, ...bare } = notice;
    expect(seal.open(seal.seal(bare))).toEqual(bare);
  });

  it('does not open when any field was changed, the MAC is missing or another key made it', () => {
    const sealed = JSON.parse(seal.seal(notice)) as Record<string, unknown>;
    for (const change of [{ globalCursor: 8 }, { conversationId: 'c2' }, { seq: 4 }, { json: '{"x":2}' }, { json: undefined }, { mac: undefined }, { mac: 'x' }]) {
      expect(seal.open(JSON.stringify({ ...sealed, ...change })), JSON.stringify(change)).toBeNull();
    }
    expect(seal.open(new NoticeSeal(Buffer.alloc(32, 2)).seal(notice))).toBeNull();
    expect(seal.open('not json')).toBeNull();
    expect(seal.open('{"globalCursor":"7"}')).toBeNull();
  });
});

describe('the global tail', () => {
  /** A store holding `events` at positions 1.., and a feed whose notices the test hands in. */
  function tailOver(events: AgentEvent[]) {
    const entries: FirehoseEntry[] = events.map((event, i) => ({ globalCursor: i + 1, stored: { event, json: JSON.stringify(event) } }));
    const store: FirehoseStore = { readGlobal: async (after, limit) => entries.filter((entry) => entry.globalCursor > after).slice(0, limit), globalHead: async () => 0 };
    let listener: (notice: FeedNotice) => void = () => {};
    const feed: EventFeed = { name: 'nats', publish: async () => {}, listen: async (l) => void (listener = l), close: async () => {} };
    const tail = new GlobalTail(store, feed, { pollMs: 60_000 });
    const seen: FirehoseEntry[] = [];
    tail.onEntry((entry) => seen.push(entry));
    return { tail, seen, send: (n: FeedNotice) => listener(n) };
  }

  it("reads the event from the store when a notice's JSON is not the event it names", async () => {
    const real = { conversation_id: 'c1', seq: 1, kind: 'message', content: 'real' } as unknown as AgentEvent;
    const { tail, seen, send } = tailOver([real]);
    await tail.start();
    send({ globalCursor: 1, conversationId: 'c1', seq: 1, json: JSON.stringify({ conversation_id: 'c2', seq: 1, content: 'other' }) });
    await tail.poke();
    expect(seen.map((entry) => entry.stored.event)).toEqual([real]);
    expect(tail.stats).toEqual({ inline: 0, read: 1 });
    await tail.close();
  });
});
