// What a run puts off until its first LLM request is on its way (the workdir's start checkpoint,
// the start of a shell released while idle) waits until undici has written that request: on a
// kept-alive connection undici writes it from an immediate of its own, which work put off with a
// plain setImmediate, queued earlier in the same turn, used to precede.
import diagnostics from 'node:diagnostics_channel';
import { Agent, getGlobalDispatcher, setGlobalDispatcher } from 'undici';
import { afterEach, expect, it } from 'vitest';
import { OpenAiLlmClient } from '../../src/adapters/llm/openai-llm.js';
import type { ShadowRepository } from '../../src/core/checkpoints/shadow-repository.js';
import { startFakeLlm, type FakeLlm } from '../fake-llm/fake-llm-server.js';
import { startServer, type TestServer } from '../support/agentd.js';
import { processAlive } from '../support/processes.js';
import { until } from '../support/reliability.js';
import { requestJson } from '../support/json-api.js';

const closers: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  for (const close of closers.splice(0).reverse()) await close();
});

it("writes the run's first LLM request before it walks the workdir for the start checkpoint or starts a released shell", async () => {
  // LLM requests go through undici's global dispatcher: this undici's, as in the server's process
  // (here, the test's own fetch calls could have made Node's bundled undici the global one first).
  const previous = getGlobalDispatcher();
  const agent = new Agent();
  setGlobalDispatcher(agent);
  closers.push(async () => {
    setGlobalDispatcher(previous);
    await agent.close();
  });
  const order: string[] = [];
  const fake: FakeLlm = await startFakeLlm({ script: [], whenExhausted: { text: 'done' } });
  closers.push(() => fake.close());
  const server: TestServer = await startServer({
    env: { AGENTD_IDLE_TIMEOUT_S: '1', AGENTD_WARM_SHELLS: '0' },
    overrides: {
      llm: new OpenAiLlmClient(),
      wrapShells: (shells) => ({
        create: (options) => {
          order.push('shell starts');
          return shells.create(options);
        },
        ...(shells.killAllForExit && { killAllForExit: () => shells.killAllForExit!() }),
      }),
    },
  });
  closers.push(() => server.close());
  const shadow = (server.services.checkpoints as unknown as { deps: { shadow: ShadowRepository } }).deps.shadow;
  const snapshot = shadow.snapshot.bind(shadow);
  shadow.snapshot = (target) => {
    order.push('checkpoint walks the workdir');
    return snapshot(target);
  };
  const written = ({ request }: { request: { path: string } }) => {
    if (request.path.endsWith('/chat/completions')) order.push('LLM request written');
  };
  diagnostics.subscribe('undici:client:sendHeaders', written as (message: unknown) => void);
  closers.push(async () => diagnostics.unsubscribe('undici:client:sendHeaders', written as (message: unknown) => void));

  const call = async (method: string, path: string, body?: unknown) => (await requestJson(server, method, path, body)).body as Record<string, unknown>;
  const turn = async (id: string) => {
    fake.setScript([{ toolCalls: [{ name: 'bash', arguments: { command: 'true' } }] }, { text: 'done' }]);
    order.length = 0;
    await call('POST', `/conversations/${id}/messages`, { content: 'Run true.', run: true });
    await until(async () => (await call('GET', `/conversations/${id}`)).status === 'idle' && order.includes('LLM request written'), 'the run to end');
  };
  const { id, workdir } = (await call('POST', '/conversations', { llm: { model: 'fake-model', base_url: fake.url, api_key: 'sk-test' } })) as { id: string; workdir: string };
  // The first turn leaves a kept-alive connection to the LLM.
  await turn(id);
  await turn(id);
  expect(order[0]).toBe('LLM request written');
  expect(order).toContain('checkpoint walks the workdir');
  // The shell released while idle: the next run starts it again.
  await until(() => !processAlive(workdir), 'the idle release of the shell');
  await turn(id);
  expect(order[0]).toBe('LLM request written');
  expect(order).toEqual(expect.arrayContaining(['checkpoint walks the workdir', 'shell starts']));
  expect(fake.violations).toEqual([]);
}, 30_000);
