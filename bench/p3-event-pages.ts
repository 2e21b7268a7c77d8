import path from 'node:path';
import { FileEventLog } from '../src/adapters/files/event-log/file-event-log.js';
import type { EventKind, NewEvent } from '../src/core/schemas/event.js';
import { startServer } from '../test/support/agentd.js';
import type { Benchmark } from './support/benchmark.js';
import { createConversation } from './support/conversations.js';
import { timeInterleaved } from './support/http-timing.js';
import { fmt, ratio, summarize } from './support/stats.js';

/**
 * P3: reading a page of events at the head and at the tail of a very long conversation versus a
 * short one, over HTTP. The events are written straight through FileEventLog (the server's own
 * log adapter), then a server is started on that data dir.
 */
export const p3EventPages: Benchmark = {
  id: 'P3',
  title: 'event pages',
  measures: 'latency of `GET /conversations/{id}/events` pages (head, tail, after a seq) on a very long conversation versus a 1,000-event one.',
  async run({ quick, tmp }) {
    const longCount = quick ? 50_000 : 1_000_000;
    const shortCount = 1_000;
    const samples = quick ? 100 : 300;
    const dataDir = path.join(tmp, 'data');

    // The conversations exist first (records on disk), then their events are written directly.
    const setup = await startServer({ dataDir, listen: false });
    const create = () => createConversation(setup.services);
    const longId = await create();
    const shortId = await create();
    await setup.close();
    const log = new FileEventLog({ conversationsDir: path.join(dataDir, 'conversations'), firehoseFile: path.join(dataDir, 'firehose.idx') });
    const started = performance.now();
    for (let i = 0; i < longCount; i++) await log.append(longId, agentEvent(i));
    const generateMs = performance.now() - started;
    for (let i = 0; i < shortCount; i++) await log.append(shortId, agentEvent(i));
    await log.close();

    const rows: string[][] = [];
    const server = await startServer({ dataDir });
    try {
      const cases = [
        { label: 'head: first page, limit 100', query: (_n: number) => '?limit=100' },
        { label: 'tail: `order=desc`, limit 100', query: (_n: number) => '?order=desc&limit=100' },
        { label: 'tail: `after_seq=<last - 100>`, limit 100', query: (n: number) => `?after_seq=${n - 100}&limit=100` },
        { label: 'middle: `after_seq=<half>`, limit 100', query: (n: number) => `?after_seq=${Math.floor(n / 2)}&limit=100` },
        { label: 'count (no filter)', query: (_n: number) => '', path: '/events/count' },
        { label: 'GET /conversations/{id} (event_count)', query: (_n: number) => '', path: '' },
      ];
      // One case: the same query on the short and the long log, interleaved.
      const pair = (query: (n: number) => string, suffix: string) =>
        timeInterleaved({
          origin: server.url,
          headers: server.auth,
          paths: [`/conversations/${shortId}${suffix}${query(shortCount)}`, `/conversations/${longId}${suffix}${query(longCount)}`],
          samples,
          warmup: 30,
        });
      for (const { label, query, path: suffix = '/events' } of cases) {
        const [short, long] = await pair(query, suffix);
        rows.push([label, fmt(short!.p50), fmt(long!.p50), fmt(long!.p99), ratio(long!.p50, short!.p50)]);
      }
      // `kind=` filters on the same two logs: a kind no event has, one every RARE_EVERY events, one in three events.
      const filtered = [
        { label: '`kind=` matching no event, limit 100', query: (_n: number) => '?kind=condensation&limit=100' },
        { label: `\`kind=\` matching few (1 in ${RARE_EVERY.toLocaleString('en-US')}), limit 100`, query: (_n: number) => '?kind=message&limit=100' },
        { label: '`kind=` matching few, `order=desc`, limit 100', query: (_n: number) => '?kind=message&order=desc&limit=100' },
        { label: '`kind=` matching many (1 in 3), limit 100', query: (_n: number) => '?kind=observation&limit=100' },
        { label: '`kind=` matching many, `order=desc`, limit 100', query: (_n: number) => '?kind=observation&order=desc&limit=100' },
        { label: '`kind=` matching many, `after_seq=<half>`, limit 100', query: (n: number) => `?kind=observation&after_seq=${Math.floor(n / 2)}&limit=100` },
        { label: 'count, `kind=` matching few', query: (_n: number) => '?kind=message', path: '/events/count' },
      ];
      const unfilteredLong = Number.parseFloat(rows[0]![2]!);
      for (const row of rows) row.push('');
      for (const { label, query, path: suffix = '/events' } of filtered) {
        const [short, long] = await pair(query, suffix);
        rows.push([label, fmt(short!.p50), fmt(long!.p50), fmt(long!.p99), ratio(long!.p50, short!.p50), ratio(long!.p50, unfilteredLong)]);
      }
    } finally {
      await server.close();
    }

    // The first `kind=` page after the log's files were closed (idle, or evicted) and reopened,
    // in process: versus the first unfiltered page after the same reopen.
    const reopened = new FileEventLog({ conversationsDir: path.join(dataDir, 'conversations'), firehoseFile: path.join(dataDir, 'firehose.idx') });
    const coldRows: string[][] = [];
    try {
      await reopened.read(longId, { order: 'asc', limit: 1 }); // the first open in a process reads the whole log once
      const coldSamples = quick ? 20 : 40;
      const cold = async (kinds: EventKind[] | undefined) => {
        reopened.release(longId);
        const started = performance.now();
        await reopened.read(longId, { order: 'asc', limit: 100, ...(kinds ? { kinds } : {}) });
        return performance.now() - started;
      };
      const cases: { label: string; kinds: EventKind[] | undefined }[] = [
        { label: 'unfiltered', kinds: undefined },
        { label: '`kind=` matching no event', kinds: ['condensation'] },
        { label: '`kind=` matching few', kinds: ['message'] },
        { label: '`kind=` matching many', kinds: ['observation'] },
      ];
      const times = cases.map(() => [] as number[]);
      for (let i = 0; i < coldSamples; i++) for (const [index, { kinds }] of cases.entries()) times[index]!.push(await cold(kinds));
      const base = summarize(times[0]!).p50;
      for (const [index, { label }] of cases.entries()) {
        const summary = summarize(times[index]!);
        coldRows.push([label, fmt(summary.p50), fmt(summary.p99), ratio(summary.p50, base)]);
      }
    } finally {
      await reopened.close();
    }
    const long = longCount.toLocaleString('en-US');
    return {
      sizes: `${long} events versus ${shortCount.toLocaleString('en-US')}; ${samples} sequential requests per row and conversation, alternating between the two, over one kept-alive connection`,
      tables: [
        { columns: ['request', `p50 ms (${shortCount.toLocaleString('en-US')} events)`, `p50 ms (${long})`, `p99 ms (${long})`, 'long vs short (p50)', `vs unfiltered head page (${long}, p50)`], rows },
        { columns: [`first page (limit 100) after the ${long}-event log is reopened, in process`, 'p50 ms', 'p99 ms', 'vs unfiltered (p50)'], rows: coldRows },
      ],
      notes: [
        'Pages cost O(limit): the fixed-width index finds seq N at byte 32·(N−1), so the head, the tail and the middle of a long log are as fast as those of a short one.',
        '`kind=` pages read the per-kind seq files (events.kinds/<kind>.seq, 4 bytes an event, the latest still in memory): a binary search for the cursor, then `limit` seqs, whatever the kind\'s share of the log.',
        `Writing the ${long} events through FileEventLog took ${fmt(generateMs / 1000)} s (${fmt(longCount / (generateMs / 1000))} events/s, two write(2) calls each: the log line and the firehose record; the index entries are written 128 at a time, the kinds' seqs 512 events' worth at a time).`,
      ],
    };
  },
};

const OUTPUT = 'src/parser.ts\nsrc/parser.test.ts\n  ✓ accepts trailing commas (3 ms)\n  ✓ rejects a lone comma (1 ms)\nTests: 2 passed, 2 total\n';

/** One event in RARE_EVERY is a user message (the "few" filter). */
const RARE_EVERY = 5_000;

/** A realistic mix: an action, its observation and a usage record, over and over, and now and then a message. */
function agentEvent(i: number): NewEvent {
  if (i % RARE_EVERY === RARE_EVERY - 1) return { kind: 'message', source: 'user', role: 'user', content: `Next step ${i}.`, run_id: null };
  const call = `call_${Math.floor(i / 3)}`;
  switch (i % 3) {
    case 0:
      return { kind: 'action', source: 'agent', tool_call_id: call, tool_name: 'bash', arguments: { command: `npm test -- parser # ${i}` }, thought: 'Run the parser tests again.', run_id: null };
    case 1:
      return { kind: 'observation', source: 'environment', tool_call_id: call, tool_name: 'bash', content: OUTPUT, is_error: false, data: { exit_code: 0, cwd: '/work' }, run_id: null };
    default:
      return { kind: 'usage', source: 'system', prompt_tokens: 1200, completion_tokens: 40, cost: 0.001, totals: { prompt_tokens: 1200 * i, completion_tokens: 40 * i, cost: 0.001 * i }, run_id: null };
  }
}
