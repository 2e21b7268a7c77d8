import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { request } from 'undici';
import { startFakeLlm } from '../test/fake-llm/fake-llm-server.js';
import { connectSse } from '../test/support/sse-client.js';
import type { Benchmark } from './support/benchmark.js';
import { call, sleep } from './support/idle-conversations.js';
import { census, glibcHeapRss, type Census } from './support/process-census.js';
import { BENCH_KEY, CLI, childScript, startProcess, type StartedProcess } from './support/processes.js';
import { fmt } from './support/stats.js';
import { SteppingModel } from './support/stepping-llm.js';


/** How long the soaked server waits without a run before it compacts its heap (its AGENTD_COMPACT_IDLE_S). */
const COMPACT_QUIET_MS = 2000;
/**
 * P16: memory that stays flat. 200 conversations (--quick: 10) each do 10 runs (--quick: 3) of
 * 10 steps (--quick: 5), 8 conversations at a time, with an SSE subscriber attached to the
 * conversation during each run and detached after it. The server's RSS, its open fds and its
 * child processes after the last round, versus after the first round (the baseline).
 */
export const p16Soak: Benchmark = {
  id: 'P16',
  title: 'soak',
  measures: 'server RSS, fds and child processes after 200 conversations × 10 runs × 10 steps with SSE subscribers attached and detached (--quick: 10 × 3 × 5), versus after the first round.',
  async run({ quick, tmp }) {
    // AGENTD_BENCH_P16=<conversations>,<rounds>,<steps>: other sizes (for finding what grows without the full hour).
    const sized = process.env.AGENTD_BENCH_P16?.split(',').map(Number);
    const count = sized?.[0] ?? (quick ? 10 : 200);
    const rounds = sized?.[1] ?? (quick ? 3 : 10);
    const steps = sized?.[2] ?? (quick ? 5 : 10);
    const v8Flags = process.env.AGENTD_BENCH_P16_V8?.split(' ').filter(Boolean) ?? [];
    // Each round's figures are read once the server has compacted its heap, as it does when no run
    // has been in progress for AGENTD_COMPACT_IDLE_S (what an idle server holds). The server here
    // waits COMPACT_QUIET_MS for it rather than the default's 30 s: the same heap, compacted sooner.
    const restMs = Number(process.env.AGENTD_BENCH_P16_REST_MS ?? COMPACT_QUIET_MS + 1000);
    // AGENTD_BENCH_P16_IDLE_S=<s>: the server's AGENTD_IDLE_TIMEOUT_S (default 0: nothing released, every history held and growing).
    const idleS = process.env.AGENTD_BENCH_P16_IDLE_S ?? '0';
    // AGENTD_BENCH_P16_HISTORY_MB=<MiB>: the server's AGENTD_HISTORY_CACHE_MB (default: the server's default).
    const historyMb = process.env.AGENTD_BENCH_P16_HISTORY_MB;
    const model = new SteppingModel(steps);
    const fake = await startFakeLlm({ whenExhausted: model.answer });
    const dataDir = path.join(tmp, 'data');
    fs.mkdirSync(dataDir, { recursive: true });
    // AGENTD_BENCH_HEAP_DIR=<dir>: heap snapshots of the server after round 1 and after the last, written there (for finding what grows).
    const heapDir = process.env.AGENTD_BENCH_HEAP_DIR;
    const memoryFile = path.join(tmp, 'memory.jsonl');
    const memory = async (): Promise<MemoryReport | null> => {
      if (heapDir) return null;
      const before = fs.existsSync(memoryFile) ? fs.readFileSync(memoryFile, 'utf8').split('\n').filter(Boolean).length : 0;
      process.kill(server.child.pid!, 'SIGUSR2');
      for (let waited = 0; waited < 5000; waited += 20) {
        const lines = fs.existsSync(memoryFile) ? fs.readFileSync(memoryFile, 'utf8').split('\n').filter(Boolean) : [];
        if (lines.length > before) return JSON.parse(lines.at(-1)!) as MemoryReport;
        await sleep(20);
      }
      return null;
    };
    const server = await startProcess({
      command: [process.execPath, ...v8Flags, ...(heapDir ? ['--heapsnapshot-signal=SIGUSR2'] : ['--expose-gc', '--import', childScript('memory-report')]), CLI],
      args: (port) => ['--port', String(port), '--data-dir', dataDir],
      env: { AGENTD_LOG_LEVEL: 'warn', AGENTD_COMPACT_IDLE_S: String(COMPACT_QUIET_MS / 1000), AGENTD_IDLE_TIMEOUT_S: idleS, AGENTD_BENCH_MEMORY_FILE: memoryFile, ...(historyMb !== undefined && { AGENTD_HISTORY_CACHE_MB: historyMb }) },
      probe: '/health',
      ...(heapDir && { cwd: heapDir }),
    });
    const snapshot = async () => {
      if (!heapDir) return;
      const before = fs.readdirSync(heapDir).length;
      process.kill(server.child.pid!, 'SIGUSR2');
      const deadline = performance.now() + 120_000;
      while (fs.readdirSync(heapDir).length === before && performance.now() < deadline) await sleep(100);
      // Done when its size holds still for a second (RSS figures after round 1 include the snapshot's own cost).
      const file = path.join(heapDir, fs.readdirSync(heapDir).sort().at(-1)!);
      let size = -1;
      while (fs.statSync(file).size !== size && performance.now() < deadline) {
        size = fs.statSync(file).size;
        await sleep(1000);
      }
    };
    try {
      const ids: string[] = [];
      for (let index = 0; index < count; index++) {
        const created = await call(server, 'POST', '/conversations', { llm: { model: 'fake-model', base_url: fake.url, api_key: 'sk-bench' }, sandbox: { network: false } });
        if (created.status !== 201) throw new Error(`POST /conversations: ${created.status}`);
        ids.push((created.body as { id: string }).id);
      }
      const rows: string[][] = [];
      let first: Census | undefined;
      let firstClients: number | undefined;
      let runningMs = 0;
      for (let round = 1; round <= rounds; round++) {
        const roundStarted = performance.now();
        await runRound(server, ids, round);
        runningMs += performance.now() - roundStarted;
        await sleep(restMs);
        // Read before the census, so that its connection is among the client's from round 1 on.
        const histories = await historyCacheBytes(server);
        const now = census(server.child.pid!);
        const glibcHeap = glibcHeapRss(server.child.pid!);
        const report = await memory();
        if (process.env.AGENTD_BENCH_FDS) console.log(`round ${round} fds:`, fdKinds(server.child.pid!));
        const clients = clientConnections(server);
        first ??= now;
        firstClients ??= clients;
        if (round === 1 || round === rounds) await snapshot();
        if (round === 1 || round === rounds || round === Math.ceil(rounds / 2)) {
          rows.push([
            `after round ${round}${round === 1 ? ' (baseline)' : ''}`,
            fmt(now.rootRss / 2 ** 20),
            `${fmt(((now.rootRss - first.rootRss) / first.rootRss) * 100)} %`,
            fmt(glibcHeap / 2 ** 20),
            String(now.rootFds),
            String(now.rootFds - first.rootFds),
            String(clients),
            String(now.rootFds - clients - (first.rootFds - firstClients!)),
            String(now.processes),
            String(now.processes - first.processes),
            ...(report ? [report.liveAfterGc === null ? '–' : mib(report.liveAfterGc), histories === null ? '–' : mib(histories), mib(report.heapUsed), mib(report.heapTotal), mib(report.spaces.new_space?.size ?? 0), mib(report.spaces.old_space?.size ?? 0), mib(report.spaces.old_space?.used ?? 0), mib(report.spaces.large_object_space?.size ?? 0), mib(report.spaces.large_object_space?.used ?? 0), mib(report.external), report.externalAfterGc === null ? '–' : mib(report.externalAfterGc)] : ['–', '–', '–', '–', '–', '–', '–', '–', '–', '–', '–']),
          ]);
        }
      }
      // The rounds' own time: the rests between them are left out.
      const seconds = runningMs / 1000;
      return {
        sizes: `${count} conversations × ${rounds} runs × ${steps} steps, 8 conversations at a time, an SSE subscriber per run (sandboxes without network)${idleS !== '0' ? `, AGENTD_IDLE_TIMEOUT_S=${idleS} and ${restMs} ms after each round` : ''}${historyMb !== undefined ? `, AGENTD_HISTORY_CACHE_MB=${historyMb}` : ''}; ${fmt((count * rounds * steps) / seconds)} steps/s`,
        tables: [
          {
            caption: 'Server resources over the soak',
            columns: ['', 'RSS MiB', 'RSS vs round 1', "of it, glibc's main heap MiB", 'fds', 'fds vs round 1', 'of them, the bench\'s idle HTTP connections', 'fds vs round 1 without those', 'child processes', 'vs round 1', 'JS heap live after a full GC MiB', 'of it, LLM histories kept MiB (as counted)', 'JS heap used MiB', 'JS heap total MiB', 'new space MiB', 'old space MiB', 'of it used', 'large objects MiB', 'of it used', 'external MiB', 'external after a full GC MiB'],
            rows,
          },
        ],
        notes: [
          'Target: RSS within +15 % of round 1, no growth in fds or child processes (every conversation keeps its one shell throughout).',
          `Each round's figures are read ${fmt(restMs)} ms after it ends, once the server has compacted its heap (AGENTD_COMPACT_IDLE_S=${fmt(COMPACT_QUIET_MS / 1000)} here). Steps/s count the rounds' own time.`,
          'LLM histories kept are what the server counts against AGENTD_HISTORY_CACHE_MB (its agentd_history_cache_bytes gauge): the histories of conversations between runs, the ones used longest ago dropped past that budget.',
          "glibc's main heap is the `[heap]` mapping of the server's smaps: what its main thread's malloc holds (Buffers' memory, Node's and V8's native objects), in use or freed and kept. The JS heap is in the columns on the right.",
          'The server\'s fds include the connections the bench\'s HTTP client keeps alive to it (counted with `ss`), which vary with the client\'s pool; "fds vs round 1 without those" leaves them out.',
        ],
      };
    } finally {
      await server.stop();
      await fake.close();
    }
  },
};

interface MemoryReport {
  /** The heap left after a full collection (the server has --expose-gc), read after the other figures. */
  liveAfterGc: number | null;
  /** External memory (Buffers and the like) left after that collection. */
  externalAfterGc: number | null;
  heapUsed: number;
  heapTotal: number;
  external: number;
  spaces: Record<string, { size: number; used: number }>;
}

/** Connections the bench's own HTTP client keeps open to the server (its keep-alive pool): fds the server holds at the client's choice. */
function clientConnections(server: StartedProcess): number {
  const port = new URL(server.url).port;
  try {
    return execFileSync('ss', ['-tnH', 'state', 'established', `( sport = :${port} )`], { encoding: 'utf8' }).split('\n').filter(Boolean).length;
  } catch {
    return 0;
  }
}

/** The server's open fds by what they point at (sockets, pipes, files by directory), for finding a leak. */
function fdKinds(pid: number): Record<string, number> {
  const kinds: Record<string, number> = {};
  for (const fd of fs.readdirSync(`/proc/${pid}/fd`)) {
    let target = '?';
    try {
      target = fs.readlinkSync(`/proc/${pid}/fd/${fd}`);
    } catch {
      continue;
    }
    const kind = target.startsWith('/') ? target.replace(/[0-9a-f-]{36}/g, '<id>') : target.replace(/\[\d+\]/, '');
    kinds[kind] = (kinds[kind] ?? 0) + 1;
  }
  return kinds;
}

/** The server's agentd_history_cache_bytes gauge (GET /metrics), or null when it has none. */
async function historyCacheBytes(server: StartedProcess): Promise<number | null> {
  const response = await request(`${server.url}/metrics`, { headers: { authorization: `Bearer ${BENCH_KEY}` } });
  const text = await response.body.text();
  const found = /^agentd_history_cache_bytes (\d+)$/m.exec(text);
  return found ? Number(found[1]) : null;
}

function mib(bytes: number): string {
  return fmt(bytes / 2 ** 20);
}

/** Every conversation runs once (8 at a time), watched by an SSE subscriber that leaves when the run has ended. */
async function runRound(server: StartedProcess, ids: string[], round: number): Promise<void> {
  let next = 0;
  const worker = async () => {
    while (next < ids.length) {
      const id = ids[next++]!;
      const stream = await connectSse(`${server.url}/conversations/${id}/events/stream`, { authorization: `Bearer ${BENCH_KEY}` });
      try {
        const posted = await call(server, 'POST', `/conversations/${id}/messages`, { content: `soak ${id} round ${round}`, run: true });
        if (posted.status !== 202) throw new Error(`POST /messages: ${posted.status}`);
        const runId = (posted.body as { run_id: string }).run_id;
        await stream.waitFor((messages) => messages.some((message) => runEnded(message, runId)), 120_000);
      } finally {
        stream.close();
      }
    }
  };
  await Promise.all(Array.from({ length: 8 }, worker));
}

function runEnded(message: { event?: string; data: string }, runId: string): boolean {
  return message.event === 'state_update' && message.data.includes(`"run_id":"${runId}"`) && !message.data.includes('"status":"running"');
}
