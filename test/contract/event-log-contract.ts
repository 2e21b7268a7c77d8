import { randomUUID } from 'node:crypto';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { AppendedEvent, EventLog } from '../../src/core/events/event-log.js';
import type { EventSubscription, SubscriptionItem } from '../../src/core/events/event-subscription.js';
import type { NewEvent } from '../../src/core/schemas/event.js';

/** What a log implementation gives the shared contract suite. */
export interface EventLogSubject {
  /** A fresh, empty log. */
  open(): Promise<EventLog>;
  /** The same store opened again after the process "restarted" (durable logs only). */
  reopen?(log: EventLog): Promise<EventLog>;
  /** Leave a torn, half-written event at the end of a conversation's log, as a crash would (durable logs only). */
  tearTail?(conversationId: string): void;
  cleanup(): Promise<void>;
}

const message = (content: string): NewEvent => ({ kind: 'message', source: 'user', role: 'user', content });
const status = (): NewEvent => ({ kind: 'state_update', source: 'system', status: 'running' });
const range = (from: number, to: number) => Array.from({ length: to - from + 1 }, (_, i) => from + i);

/** Reads a subscription until `done` says so (or it ends), returning its items. */
async function collect(subscription: EventSubscription, done: (items: SubscriptionItem[]) => boolean, onBatch?: (items: SubscriptionItem[]) => Promise<void>): Promise<SubscriptionItem[]> {
  const items: SubscriptionItem[] = [];
  for await (const batch of subscription.batches()) {
    items.push(...batch);
    await onBatch?.(items);
    if (done(items)) break;
  }
  subscription.close();
  return items;
}

const cursors = (items: SubscriptionItem[]) => items.flatMap((item) => (item.type === 'event' ? [item.cursor] : []));

/** Waits for a condition with a generous bound, failing with a clear message instead of hanging. */
async function until(condition: () => boolean, what = 'the subscription to go live'): Promise<void> {
  for (let tries = 0; !condition(); tries++) {
    if (tries > 1000) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

type EventItem = Extract<SubscriptionItem, { type: 'event' }>;

/**
 * The event items of a subscription until `count` have come or a generous bound passes (then it is
 * closed), so a stream that stalls fails on the caller's assertion rather than on the test's timeout.
 */
async function drain(subscription: EventSubscription, iterator: AsyncGenerator<SubscriptionItem[]>, first: Promise<IteratorResult<SubscriptionItem[]>>, count: number): Promise<EventItem[]> {
  const items: EventItem[] = [];
  const giveUp = setTimeout(() => subscription.close(), 10_000);
  try {
    for (let next = await first; !next.done; next = await iterator.next()) {
      for (const item of next.value) if (item.type === 'event') items.push(item);
      if (items.length >= count) break;
    }
  } finally {
    clearTimeout(giveUp);
    subscription.close();
  }
  return items;
}

/** The guarantees every EventLog keeps (file, memory, and later PostgreSQL). */
export function eventLogContract(name: string, subject: EventLogSubject): void {
  describe(`EventLog contract: ${name}`, () => {
    let log: EventLog;
    beforeEach(async () => {
      log = await subject.open();
    });
    afterEach(async () => {
      await log.close();
      await subject.cleanup();
    });

    it('numbers each conversation 1..N in call order, also when appends are made concurrently', async () => {
      const ids = [randomUUID(), randomUUID(), randomUUID()];
      const appended = await Promise.all(range(0, 89).map((i) => log.append(ids[i % 3]!, message(`m${i}`))));
      for (const [k, id] of ids.entries()) {
        const mine = appended.filter((x) => x.event.conversation_id === id);
        expect(mine.map((x) => x.event.seq)).toEqual(range(1, 30));
        expect(mine.map((x) => (x.event.kind === 'message' ? x.event.content : ''))).toEqual(range(0, 29).map((j) => `m${j * 3 + k}`));
        expect(await log.lastSeq(id)).toBe(30);
      }
      expect(appended.map((x) => x.globalCursor).sort((a, b) => a - b)).toEqual(range(1, 90));
      expect(await log.globalHead()).toBe(90);
      for (const x of appended) expect(JSON.parse(x.json)).toEqual(x.event);
      expect(await log.lastSeq(randomUUID())).toBe(0);
    });

    it('pages in both orders with a cursor and filters, counts, and finds by id', async () => {
      const id = randomUUID();
      for (let i = 1; i <= 30; i++) await log.append(id, i % 3 === 0 ? status() : message(`e${i}`));
      const seqs = async (query: Parameters<EventLog['read']>[1]) => (await log.read(id, query)).map((stored) => stored.event.seq);
      expect(await seqs({ order: 'asc', limit: 5 })).toEqual(range(1, 5));
      expect(await seqs({ order: 'asc', limit: 5, cursorSeq: 5 })).toEqual(range(6, 10));
      expect(await seqs({ order: 'desc', limit: 3 })).toEqual([30, 29, 28]);
      expect(await seqs({ order: 'desc', limit: 3, cursorSeq: 28 })).toEqual([27, 26, 25]);
      expect(await seqs({ order: 'asc', limit: 100, kinds: ['state_update'] })).toEqual(range(1, 10).map((n) => n * 3));
      expect(await seqs({ order: 'asc', limit: 100, sources: ['user'], afterSeq: 20 })).toEqual([22, 23, 25, 26, 28, 29]);
      expect(await log.count(id, {})).toBe(30);
      expect(await log.count(id, { kinds: ['state_update'], afterSeq: 15 })).toBe(5);
      const [tenth] = await log.read(id, { order: 'asc', cursorSeq: 9, limit: 1 });
      expect((await log.findById(id, tenth!.event.id))?.json).toBe(tenth!.json);
      expect(await log.findById(randomUUID(), tenth!.event.id)).toBeUndefined();
    });

    it('subscribes after N: history, then live, no gap and no duplicate while appends interleave', async () => {
      const id = randomUUID();
      const other = randomUUID();
      for (let i = 1; i <= 40; i++) await log.append(id, message(`h${i}`));
      const subscription = log.subscribe({ conversationId: id, after: 15 }, { maxBuffered: 10_000, maxBufferedBytes: 1e9, historyPageSize: 7 });
      let appendedLive = 0;
      const items = await collect(
        subscription,
        (got) => cursors(got).at(-1) === 100,
        async () => {
          // Between every batch (history pages included) more events arrive, some in bursts not awaited.
          if (appendedLive < 60) {
            appendedLive += 3;
            void log.append(other, message('elsewhere'));
            await Promise.all([log.append(id, message('a')), log.append(id, message('b')), log.append(id, message('c'))]);
          }
        },
      );
      expect(cursors(items)).toEqual(range(16, 100));
      for (const item of items) if (item.type === 'event') expect(item.stored.event.conversation_id).toBe(id);
    });

    it('subscribes to every conversation after a global cursor, in append order', async () => {
      const [a, b] = [randomUUID(), randomUUID()];
      for (let i = 0; i < 10; i++) await log.append(i % 2 ? a : b, message(`x${i}`));
      const subscription = log.subscribe({ conversationId: null, after: 4 });
      const items = await collect(
        subscription,
        (got) => cursors(got).at(-1) === 20,
        async (got) => {
          if (cursors(got).length === 6) for (let i = 10; i < 20; i++) await log.append(i % 3 ? a : b, message(`x${i}`));
        },
      );
      expect(cursors(items)).toEqual(range(5, 20));
      const contents = items.flatMap((item) => (item.type === 'event' && item.stored.event.kind === 'message' ? [item.stored.event.content] : []));
      expect(contents).toEqual(range(4, 19).map((i) => `x${i}`));
    });

    it('hands the firehose\'s live items their global cursor, never their conversation\'s seq', async () => {
      const [a, b] = [randomUUID(), randomUUID()];
      for (let i = 0; i < 5; i++) await log.append(a, message(`before ${i}`));
      const head = await log.globalHead();
      const subscription = log.subscribe({ conversationId: null, after: head });
      const iterator = subscription.batches();
      const first = iterator.next();
      await until(() => subscription.live);
      // Appended only once live, so every item comes through the live path, not a history read.
      const appended: AppendedEvent[] = [];
      for (let i = 0; i < 10; i++) appended.push(await log.append(i % 3 ? b : a, message(`live ${i}`)));
      expect(appended.map((x) => x.globalCursor)).toEqual(range(head + 1, head + 10));
      const items = await drain(subscription, iterator, first, appended.length);
      expect(items.map((item) => [item.stored.event.id, item.cursor])).toEqual(appended.map((x) => [x.event.id, x.globalCursor]));
      // b's seqs start at 1 while the firehose is past 5: the two numberings really differ here.
      expect(items.filter((item) => item.cursor !== item.stored.event.seq).length).toBeGreaterThan(0);
      expect(subscription.cursor).toBe(head + 10);

      // A client resuming from a live item's cursor gets exactly what followed it.
      const resumed = log.subscribe({ conversationId: null, after: items[6]!.cursor });
      const resumedIterator = resumed.batches();
      const rest = await drain(resumed, resumedIterator, resumedIterator.next(), 3);
      expect(rest.map((item) => [item.stored.event.id, item.cursor])).toEqual(appended.slice(7).map((x) => [x.event.id, x.globalCursor]));
    });

    it('ends a conversation\'s subscriptions when it is dropped', async () => {
      const id = randomUUID();
      await log.append(id, message('one'));
      const subscription = log.subscribe({ conversationId: id, after: 0 });
      const items = await collect(subscription, () => false, async (got) => {
        if (got.length === 1) await log.append(id, message('two'));
        // Seen live (or in the tail read at the switch): the subscription is live now.
        if (got.length === 2) await log.drop(id);
      });
      expect(items.map((item) => item.type)).toEqual(['event', 'event', 'closed']);
      expect(await log.lastSeq(id)).toBe(0);
    });

    it('cuts off a live subscriber that does not keep up, telling where to resume', async () => {
      const id = randomUUID();
      const subscription = log.subscribe({ conversationId: id, after: 0 }, { maxBuffered: 5, maxBufferedBytes: 1e9 });
      const iterator = subscription.batches();
      const first = iterator.next();
      await log.append(id, message('first'));
      expect(cursors((await first).value as SubscriptionItem[])).toEqual([1]);
      for (let i = 0; i < 20; i++) await log.append(id, message(`burst ${i}`));
      const rest: SubscriptionItem[] = [];
      for (let next = await iterator.next(); !next.done; next = await iterator.next()) rest.push(...next.value);
      expect(cursors(rest)).toEqual(range(2, 6));
      expect(rest.at(-1)).toEqual({ type: 'overflow', resumeAfter: 6 });
    });

    if (subject.reopen) {
      it('keeps every acknowledged event across a restart and carries on numbering', async () => {
        const [a, b] = [randomUUID(), randomUUID()];
        const before = await Promise.all(range(0, 29).map((i) => log.append(i % 2 ? a : b, message(`r${i}`))));
        log = await subject.reopen!(log);
        expect((await log.read(a, { order: 'asc', limit: 100 })).map((stored) => stored.json)).toEqual(before.filter((x) => x.event.conversation_id === a).map((x) => x.json));
        expect((await log.readGlobal(0, 100)).map((entry) => entry.stored.json)).toEqual([...before].sort((x, y) => x.globalCursor - y.globalCursor).map((x) => x.json));
        const next = await log.append(a, message('after'));
        expect([next.event.seq, next.globalCursor]).toEqual([16, 31]);
      });
    }

    if (subject.reopen && subject.tearTail) {
      it('drops a torn tail left by a crash, keeps what was acknowledged, and a subscriber sees no gap', async () => {
        const id = randomUUID();
        for (let i = 1; i <= 12; i++) await log.append(id, message(`t${i}`));
        subject.tearTail!(id);
        log = await subject.reopen!(log);
        expect(await log.lastSeq(id)).toBe(12);
        const subscription = log.subscribe({ conversationId: id, after: 10 });
        const items = await collect(subscription, (got) => cursors(got).at(-1) === 14, async (got) => {
          if (cursors(got).at(-1) === 12) {
            await log.append(id, message('t13'));
            await log.append(id, message('t14'));
          }
        });
        expect(cursors(items)).toEqual([11, 12, 13, 14]);
      });
    }
  });
}
