import fs from 'node:fs';
import path from 'node:path';
import type { Benchmark } from './support/benchmark.js';
import { populate } from './support/populate.js';
import { CLI, memoryOf, startProcess } from './support/processes.js';
import { fmt, median, megabytes, ratio, spread } from './support/stats.js';

const EVENTS_PER_CONVERSATION = 10;

/**
 * P4: `node dist/cli.js` from spawn to the first `/health` 200 (state loaded, listening) and its
 * memory then, with many conversations on disk versus an empty data dir.
 */
export const p4Startup: Benchmark = {
  id: 'P4',
  title: 'start-up',
  measures: 'time from spawning `node dist/cli.js` to the first `/health` 200, and its RSS, with 10,000 conversations on disk versus an empty data dir.',
  async run({ quick, tmp }) {
    const conversations = quick ? 2_000 : 10_000;
    const rounds = 3;
    const dataDir = path.join(tmp, 'full');
    const started = performance.now();
    await populate({ dataDir, conversations, eventsPerConversation: EVENTS_PER_CONVERSATION, secretNames: 'shared' });
    const populateMs = performance.now() - started;

    const empty: Start[] = [];
    const full: Start[] = [];
    for (let round = 0; round < rounds; round++) {
      empty.push(await startOnce(fs.mkdtempSync(path.join(tmp, 'empty-'))));
      full.push(await startOnce(dataDir));
    }
    const row = (label: string, starts: Start[], base: Start[]) => {
      const ready = median(starts.map((start) => start.readyMs));
      const rss = median(starts.map((start) => start.rss));
      return [label, spread(starts.map((start) => start.readyMs)), fmt(Math.min(...starts.map((start) => start.readyMs))), megabytes(rss), megabytes(median(starts.map((start) => start.peak))), ratio(ready, median(base.map((start) => start.readyMs))), ratio(rss, median(base.map((start) => start.rss)))];
    };
    const n = conversations.toLocaleString('en-US');
    return {
      sizes: `${n} conversations of ${EVENTS_PER_CONVERSATION} events each (with an LLM key and a secret, sealed); median of ${rounds} starts`,
      tables: [
        {
          columns: ['data dir', 'ready ms: median (min–max)', 'ready ms (best)', 'RSS MiB', 'peak RSS MiB', 'time vs empty', 'RSS vs empty'],
          rows: [row('baseline: empty', empty, empty), row(`${n} conversations`, full, empty)],
        },
      ],
      notes: [
        `Loading costs ${fmt((median(full.map((s) => s.readyMs)) - median(empty.map((s) => s.readyMs))) / conversations * 1000)} µs and ${fmt((median(full.map((s) => s.rss)) - median(empty.map((s) => s.rss))) / conversations / 1024)} KiB per conversation.`,
        `Ready means \`/health\` answers 200: the records are loaded (each one's last event read for \`updated_at\`) and the port is listening. Polled every 2 ms; RSS read at that moment. (Writing the data dir took ${fmt(populateMs / 1000)} s.)`,
      ],
    };
  },
};

interface Start {
  readyMs: number;
  rss: number;
  peak: number;
}

async function startOnce(dataDir: string): Promise<Start> {
  const server = await startProcess({ command: [process.execPath, CLI], args: (port) => ['--port', String(port), '--data-dir', dataDir], probe: '/health' });
  try {
    return { readyMs: server.readyMs, ...memoryOf(server.child.pid!) };
  } finally {
    await server.stop();
  }
}
