import fs from 'node:fs';
import path from 'node:path';
import type { Benchmark } from './support/benchmark.js';
import { populate } from './support/populate.js';
import { CLI, cpuTimeOf, mainThreadCpuOf, memoryOf, startProcess } from './support/processes.js';
import { flushDirtyPages } from './support/machine.js';
import { fmt, median, megabytes, ratio, spread } from './support/stats.js';

const EVENTS_PER_CONVERSATION = 10;

/**
 * P4: `node dist/cli.js` from spawn to the first `/health` 200 (state loaded, listening) and its
 * memory then, with many conversations on disk versus an empty data dir.
 */
export const p4Startup: Benchmark = {
  id: 'P4',
  title: 'start-up',
  measures: 'time from spawning `node dist/cli.js` to the first `/health` 200, and its RSS then and 600 ms later (once the start-up garbage is compacted), with 10,000 conversations on disk (after a clean stop, after a crash, and cold with no snapshot) versus an empty data dir.',
  async run({ quick, tmp }) {
    const conversations = quick ? 500 : 10_000;
    // --quick: one round (five starts), for a run under two minutes; the full run's three show the spread.
    const rounds = quick ? 1 : 3;
    const dataDir = path.join(tmp, 'full');
    const started = performance.now();
    await populate({ dataDir, conversations, eventsPerConversation: EVENTS_PER_CONVERSATION, secretNames: 'shared' });
    const populateMs = performance.now() - started;

    const empty: Start[] = [];
    const full: Start[] = [];
    const crashed: Start[] = [];
    const cold: Start[] = [];
    for (let round = 0; round < rounds; round++) {
      // The data dir's 290 MB (full size), a previous round's cold start, or the benchmark before
      // this one, written out before the round's starts rather than during one of them.
      flushDirtyPages();
      empty.push(await startOnce(fs.mkdtempSync(path.join(tmp, 'empty-'))));
      full.push(await startOnce(dataDir));
      // A real kill -9 of a server started after a clean stop (with nothing changed since: see the note).
      await startOnce(dataDir, 'SIGKILL');
      crashed.push(await startOnce(dataDir));
      // Cold: no snapshot, no summaries (the first start of a data dir written by an older server, or a lost snapshot).
      for (const file of ['conversations.snapshot', 'summaries.json']) fs.rmSync(path.join(dataDir, file), { force: true });
      cold.push(await startOnce(dataDir));
    }
    const row = (label: string, starts: Start[], base: Start[]) => {
      const ready = median(starts.map((start) => start.readyMs));
      const rss = median(starts.map((start) => start.rss));
      const cpu = median(starts.map((start) => start.cpuMs));
      const mainCpu = median(starts.map((start) => start.mainThreadCpuMs));
      return [label, spread(starts.map((start) => start.readyMs)), fmt(Math.min(...starts.map((start) => start.readyMs))), fmt(cpu), fmt(mainCpu), megabytes(median(starts.map((start) => start.readyRss))), megabytes(rss), megabytes(median(starts.map((start) => start.peak))), ratio(ready, median(base.map((start) => start.readyMs))), ratio(cpu, median(base.map((start) => start.cpuMs))), ratio(mainCpu, median(base.map((start) => start.mainThreadCpuMs))), ratio(rss, median(base.map((start) => start.rss)))];
    };
    const n = conversations.toLocaleString('en-US');
    return {
      sizes: `${n} conversations of ${EVENTS_PER_CONVERSATION} events each (with an LLM key and a secret, sealed); ${rounds === 1 ? 'one start each' : `median of ${rounds} starts`}`,
      tables: [
        {
          columns: ['data dir', 'ready ms: median (min–max)', 'ready ms (best)', 'CPU ms to ready', 'main thread CPU ms', 'RSS MiB at ready', `RSS MiB ${SETTLE_MS} ms later`, 'peak RSS MiB', 'time vs empty', 'CPU vs empty', 'main thread CPU vs empty', 'RSS vs empty'],
          rows: [row('baseline: empty', empty, empty), row(`${n} conversations`, full, empty), row(`${n} conversations after a crash`, crashed, empty), row(`${n} conversations, cold (no snapshot)`, cold, empty)],
        },
      ],
      notes: [
        `Loading costs ${fmt((median(full.map((s) => s.readyMs)) - median(empty.map((s) => s.readyMs))) / conversations * 1000)} µs and ${fmt((median(full.map((s) => s.rss)) - median(empty.map((s) => s.rss))) / conversations / 1024)} KiB per conversation.`,
        'CPU to ready is the whole process\'s (its threads, in 10 ms ticks); the main thread\'s alone, to the nanosecond, is what start-up waits for and moves least with the machine\'s load: V8\'s helper threads (compilation, garbage collection) run beside it on the other core.',
        `After a crash (kill -9): ${fmt((median(crashed.map((s) => s.readyMs)) - median(empty.map((s) => s.readyMs))) / conversations * 1000)} µs per conversation; cold (no snapshot): ${fmt((median(cold.map((s) => s.readyMs)) - median(empty.map((s) => s.readyMs))) / conversations * 1000)} µs.`,
        `Ready means \`/health\` answers 200: the records are loaded and the port is listening. After a clean stop the records and their logs' summaries come from the sealed snapshot it wrote, as they are (its token in summaries.json says nothing was saved or appended since). The snapshot is kept across starts: after a kill -9 each record whose file is unchanged since it was written comes from it, and each log unchanged since gives its summary from it (one stat of each); only what changed since is read (here nothing: the killed server changed no conversation). Cold, each record file is read, decrypted and validated, and each log's last event read. Polled every 2 ms; RSS read at that moment and ${SETTLE_MS} ms later, once the server has compacted what start-up only used (it does so when quiet, after it listens; \`RSS vs empty\` and the per-conversation figure compare these). (Writing the data dir took ${fmt(populateMs / 1000)} s.)`,
      ],
    };
  },
};

interface Start {
  readyMs: number;
  /** The server's CPU time (user + system) when it was ready: steadier than wall time on a loaded machine. */
  cpuMs: number;
  /** Its main thread's alone (what start-up waits for; the rest is V8's helper threads beside it), to the nanosecond. */
  mainThreadCpuMs: number;
  /** RSS when it was ready. */
  readyRss: number;
  /** RSS once settled: SETTLE_MS after it was ready (its start-up garbage compacted once it is quiet: serve.ts). */
  rss: number;
  peak: number;
}

/** How long after ready the settled RSS is read: the start-up compaction waits 250 ms of quiet (compact-when-idle.ts) and takes tens of ms. */
const SETTLE_MS = 600;

/** Started, measured when ready, then stopped (SIGTERM: a clean stop) or killed (SIGKILL: as a crash). */
async function startOnce(dataDir: string, stopWith: 'SIGTERM' | 'SIGKILL' = 'SIGTERM'): Promise<Start> {
  const server = await startProcess({ command: [process.execPath, CLI], args: (port) => ['--port', String(port), '--data-dir', dataDir], probe: '/health' });
  try {
    const ready = { readyMs: server.readyMs, cpuMs: cpuTimeOf(server.child.pid!), mainThreadCpuMs: mainThreadCpuOf(server.child.pid!), readyRss: memoryOf(server.child.pid!).rss };
    if (stopWith === 'SIGKILL') return { ...ready, ...memoryOf(server.child.pid!) };
    await new Promise((resolve) => setTimeout(resolve, SETTLE_MS));
    return { ...ready, ...memoryOf(server.child.pid!) };
  } finally {
    if (stopWith === 'SIGKILL') server.child.kill('SIGKILL');
    await server.stop();
  }
}
