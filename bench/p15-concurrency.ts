import fs from 'node:fs';
import path from 'node:path';
import { startFakeLlm } from '../test/fake-llm/fake-llm-server.js';
import type { Benchmark } from './support/benchmark.js';
import { call, sleep } from './support/idle-conversations.js';
import { CLI, startProcess, type StartedProcess } from './support/processes.js';
import { fmt, ratio, summarize } from './support/stats.js';
import { SteppingModel } from './support/stepping-llm.js';

/**
 * P15: many conversations running at once. 100 conversations (--quick: 10) each start a run of
 * 20 steps (--quick: 10; a step is one LLM turn and one `bash true`) at the same moment: total
 * time and step latency (LLM request to the next request of the same conversation), versus one
 * conversation alone on the same server, measured in the same run.
 */
export const p15Concurrency: Benchmark = {
  id: 'P15',
  title: 'concurrent conversations',
  measures: 'total time and p50/p99 step latency of 100 conversations running 20 steps each at once (--quick: 10 × 10), versus one conversation alone.',
  async run({ quick, tmp }) {
    const count = quick ? 10 : 100;
    const steps = quick ? 10 : 20;
    const model = new SteppingModel(steps);
    const fake = await startFakeLlm({ whenExhausted: model.answer });
    const dataDir = path.join(tmp, 'data');
    fs.mkdirSync(dataDir, { recursive: true });
    const server = await startProcess({ command: [process.execPath, CLI], args: (port) => ['--port', String(port), '--data-dir', dataDir], env: { AGENTD_LOG_LEVEL: 'warn' }, probe: '/health' });
    try {
      // Warm-up, then one alone, then all at once (each conversation's shell is started by a first, one-step run).
      await runAll(server, fake.url, ['warm-up'], model);
      const alone = await runAll(server, fake.url, ['alone'], model);
      const tags = Array.from({ length: count }, (_, index) => `concurrent-${index}`);
      const together = await runAll(server, fake.url, tags, model);
      const aloneSteps = summarize(model.stepLatencies(['alone']).slice(-steps));
      const togetherSteps = summarize(tags.flatMap((tag) => model.stepLatencies([tag]).slice(-steps)));
      return {
        sizes: `${count} conversations × ${steps} steps at once, versus one alone (sandboxes without network)`,
        tables: [
          {
            caption: 'All at once versus alone',
            columns: ['', 'total s', 'steps/s', 'step p50 ms', 'step p99 ms', 'step p50 vs alone', 'step p99 vs alone'],
            rows: [
              ['one conversation alone', fmt(alone.seconds), fmt(steps / alone.seconds), fmt(aloneSteps.p50), fmt(aloneSteps.p99), '×1', '×1'],
              [`${count} conversations at once`, fmt(together.seconds), fmt((count * steps) / together.seconds), fmt(togetherSteps.p50), fmt(togetherSteps.p99), ratio(togetherSteps.p50, aloneSteps.p50), ratio(togetherSteps.p99, aloneSteps.p99)],
            ],
          },
        ],
        notes: [
          `${count} conversations took ${fmt(together.seconds)} s for ${count * steps} steps (${ratio(together.seconds, alone.seconds * count)} the time of running them one after another at the alone rate).`,
          'A step is measured from one LLM request of a conversation to its next one (the fake model answers at once; the tool is `bash true` in the conversation\'s sandboxed shell).',
        ],
      };
    } finally {
      await server.stop();
      await fake.close();
    }
  },
};

/** Creates the conversations (each with a finished one-step run, so its shell runs), then starts their measured runs together. */
async function runAll(server: StartedProcess, llmUrl: string, tags: string[], model: SteppingModel): Promise<{ seconds: number }> {
  const ids: string[] = [];
  for (const tag of tags) {
    const created = await call(server, 'POST', '/conversations', { llm: { model: 'fake-model', base_url: llmUrl, api_key: 'sk-bench' }, initial_message: tag, sandbox: { network: false } });
    if (created.status !== 201) throw new Error(`POST /conversations: ${created.status}`);
    ids.push((created.body as { id: string }).id);
  }
  await waitIdle(server, ids);
  for (const tag of tags) model.requestTimes.delete(tag);
  const started = performance.now();
  await Promise.all(ids.map((id) => call(server, 'POST', `/conversations/${id}/messages`, { content: 'go', run: true })));
  await waitIdle(server, ids);
  return { seconds: (performance.now() - started) / 1000 };
}

async function waitIdle(server: StartedProcess, ids: string[]): Promise<void> {
  const deadline = performance.now() + 600_000;
  for (const id of ids) {
    for (;;) {
      const status = ((await call(server, 'GET', `/conversations/${id}`)).body as { status: string }).status;
      if (status === 'idle') break;
      if (status !== 'running' || performance.now() > deadline) throw new Error(`conversation ${id}: ${status}`);
      await sleep(10);
    }
  }
}
