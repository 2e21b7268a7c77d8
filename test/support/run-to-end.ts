import { afterEach } from 'vitest';
import { startFakeLlm, type FakeLlm, type FakeLlmOptions } from '../fake-llm/fake-llm-server.js';
import { startServer, type TestServer } from './agentd.js';
import { okJson } from './json-api.js';
import { until } from './reliability.js';

/**
 * What a test file starts, closed after each of its tests, the last started first. Call once at
 * the top of the file; the returned function takes each thing to close.
 */
export function closedAfterEach(): (close: () => Promise<unknown>) => void {
  const closers: (() => Promise<unknown>)[] = [];
  afterEach(async () => {
    for (const close of closers.splice(0).reverse()) await close();
  });
  return (close) => void closers.push(close);
}

/**
 * closedAfterEach with the two things these end-to-end tests start: a fake LLM, and a server
 * without warm shells (`env` added to its environment), each closed after its test.
 */
export function startedAfterEach(): { closing: (close: () => Promise<unknown>) => void; fake: (options: FakeLlmOptions) => Promise<FakeLlm>; server: (env?: Record<string, string>) => Promise<TestServer> } {
  const closing = closedAfterEach();
  return {
    closing,
    fake: async (options) => {
      const started = await startFakeLlm(options);
      closing(() => started.close());
      return started;
    },
    server: async (env = {}) => {
      const started = await startServer({ env: { AGENTD_WARM_SHELLS: '0', ...env } });
      closing(() => started.close());
      return started;
    },
  };
}

/** Sends a message that starts a run, waits for that run to end, and returns the conversation's events. */
export async function runToEnd(target: TestServer, id: string, content: string): Promise<any[]> {
  const events = async (): Promise<any[]> => (await okJson(target, 'GET', `/conversations/${id}/events?limit=1000`)).items;
  const before = (await events()).length;
  await okJson(target, 'POST', `/conversations/${id}/messages`, { content, run: true });
  await until(async () => (await events()).slice(before).some((event) => event.kind === 'state_update' && event.status !== 'running'), 'the run to end');
  return events();
}
