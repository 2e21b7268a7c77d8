import path from 'node:path';
import { FileEventLog } from '../src/adapters/file-event-log/file-event-log.js';
import type { NewEvent } from '../src/core/schemas/event.js';
import { startServer } from '../test/support/agentd.js';
import type { Benchmark } from './support/benchmark.js';
import { createConversation } from './support/conversations.js';
import { timeInterleaved } from './support/http-timing.js';
import { fmt, ratio } from './support/stats.js';

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
    const longCount = quick ? 100_000 : 1_000_000;
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
      const rows: string[][] = [];
      for (const { label, query, path: suffix = '/events' } of cases) {
        const [short, long] = await timeInterleaved({
          origin: server.url,
          headers: server.auth,
          paths: [`/conversations/${shortId}${suffix}${query(shortCount)}`, `/conversations/${longId}${suffix}${query(longCount)}`],
          samples,
          warmup: 30,
        });
        rows.push([label, fmt(short!.p50), fmt(long!.p50), fmt(long!.p99), ratio(long!.p50, short!.p50)]);
      }
      // A filter that matches nothing scans the whole index: O(events) by design, shown for scale.
      const [shortScan, longScan] = await timeInterleaved({
        origin: server.url,
        headers: server.auth,
        paths: [shortId, longId].map((id) => `/conversations/${id}/events?kind=condensation&limit=100`),
        samples: quick ? 5 : 10,
        warmup: 1,
      });
      rows.push(['(scan) `kind=` matching no event, limit 100', fmt(shortScan!.p50), fmt(longScan!.p50), fmt(longScan!.p99), ratio(longScan!.p50, shortScan!.p50)]);
      const long = longCount.toLocaleString('en-US');
      return {
        sizes: `${long} events versus ${shortCount.toLocaleString('en-US')}; ${samples} sequential requests per row and conversation, alternating between the two, over one kept-alive connection`,
        tables: [{ columns: ['request', `p50 ms (${shortCount.toLocaleString('en-US')} events)`, `p50 ms (${long})`, `p99 ms (${long})`, 'long vs short (p50)'], rows }],
        notes: [
          'Pages cost O(limit): the fixed-width index finds seq N at byte 32·(N−1), so the head, the tail and the middle of a long log are as fast as those of a short one.',
          `Only a filter that skips events costs what it skips (last row: the whole index read once, ${fmt((longCount * 32) / 1024 / 1024)} MiB).`,
          `Writing the ${long} events through FileEventLog took ${fmt(generateMs / 1000)} s (${fmt(longCount / (generateMs / 1000))} events/s, three write(2) calls each).`,
        ],
      };
    } finally {
      await server.close();
    }
  },
};

const OUTPUT = 'src/parser.ts\nsrc/parser.test.ts\n  ✓ accepts trailing commas (3 ms)\n  ✓ rejects a lone comma (1 ms)\nTests: 2 passed, 2 total\n';

/** A realistic mix: an action, its observation and a usage record, over and over. */
function agentEvent(i: number): NewEvent {
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
