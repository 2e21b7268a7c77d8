import fs from 'node:fs';
import path from 'node:path';
import { startFakeLlm } from '../test/fake-llm/fake-llm-server.js';
import { connectSse } from '../test/support/sse-client.js';
import type { Benchmark } from './support/benchmark.js';
import { call, sleep } from './support/idle-conversations.js';
import { census, type Census } from './support/process-census.js';
import { BENCH_KEY, CLI, startProcess, type StartedProcess } from './support/processes.js';
import { fmt } from './support/stats.js';
import { SteppingModel } from './support/stepping-llm.js';

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
    const count = quick ? 10 : 200;
    const rounds = quick ? 3 : 10;
    const steps = quick ? 5 : 10;
    const model = new SteppingModel(steps);
    const fake = await startFakeLlm({ whenExhausted: model.answer });
    const dataDir = path.join(tmp, 'data');
    fs.mkdirSync(dataDir, { recursive: true });
    const server = await startProcess({ command: [process.execPath, CLI], args: (port) => ['--port', String(port), '--data-dir', dataDir], env: { AGENTD_LOG_LEVEL: 'warn', AGENTD_IDLE_TIMEOUT_S: '0' }, probe: '/health' });
    try {
      const ids: string[] = [];
      for (let index = 0; index < count; index++) {
        const created = await call(server, 'POST', '/conversations', { llm: { model: 'fake-model', base_url: fake.url, api_key: 'sk-bench' }, sandbox: { network: false } });
        if (created.status !== 201) throw new Error(`POST /conversations: ${created.status}`);
        ids.push((created.body as { id: string }).id);
      }
      const rows: string[][] = [];
      let first: Census | undefined;
      const started = performance.now();
      for (let round = 1; round <= rounds; round++) {
        await runRound(server, ids, round);
        await sleep(500);
        const now = census(server.child.pid!);
        first ??= now;
        if (round === 1 || round === rounds || round === Math.ceil(rounds / 2)) {
          rows.push([
            `after round ${round}${round === 1 ? ' (baseline)' : ''}`,
            fmt(now.rootRss / 2 ** 20),
            `${fmt(((now.rootRss - first.rootRss) / first.rootRss) * 100)} %`,
            String(now.rootFds),
            String(now.rootFds - first.rootFds),
            String(now.processes),
            String(now.processes - first.processes),
          ]);
        }
      }
      const seconds = (performance.now() - started) / 1000;
      return {
        sizes: `${count} conversations × ${rounds} runs × ${steps} steps, 8 conversations at a time, an SSE subscriber per run (sandboxes without network); ${fmt((count * rounds * steps) / seconds)} steps/s`,
        tables: [
          {
            caption: 'Server resources over the soak',
            columns: ['', 'RSS MiB', 'RSS vs round 1', 'fds', 'fds vs round 1', 'child processes', 'vs round 1'],
            rows,
          },
        ],
        notes: ['Target: RSS within +15 % of round 1, no growth in fds or child processes (every conversation keeps its one shell throughout).'],
      };
    } finally {
      await server.stop();
      await fake.close();
    }
  },
};

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
