import { request } from 'undici';
import type { FakeLlm, RecordedRequest } from '../../test/fake-llm/fake-llm-server.js';
import { BENCH_KEY, type StartedProcess } from './processes.js';

/** The fake model for idle-scale benchmarks: `bash true` first, then an answer once it sees the tool's result. */
export function bashThenAnswer(recorded: RecordedRequest) {
  const last = recorded.body.messages?.at(-1);
  return last?.role === 'tool' ? { text: 'done' } : { toolCalls: [{ name: 'bash', arguments: { command: 'true' } }] };
}

/**
 * Creates conversations `from`..`to` on a spawned server, each with one run (8 at a time); returns
 * their ids. `network: false` spares the user-mode network helper (slirp4netns holds ~3 MB a sandbox, pasta ~30 MB).
 */
export async function createIdleConversations(server: StartedProcess, fake: FakeLlm, from: number, to: number, options: { network?: boolean } = {}): Promise<string[]> {
  let next = from;
  const ids: string[] = [];
  const worker = async () => {
    while (next < to) {
      next += 1;
      const created = await call(server, 'POST', '/conversations', { llm: { model: 'fake-model', base_url: fake.url, api_key: 'sk-bench' }, initial_message: 'run true', ...(options.network === false && { sandbox: { network: false } }) });
      if (created.status !== 201) throw new Error(`POST /conversations: ${created.status} ${JSON.stringify(created.body)}`);
      const id = (created.body as { id: string }).id;
      ids.push(id);
      const deadline = performance.now() + 60_000;
      for (;;) {
        const { body } = await call(server, 'GET', `/conversations/${id}`);
        const status = (body as { status: string }).status;
        if (status === 'idle') break;
        if (status === 'error' || performance.now() > deadline) throw new Error(`conversation ${id} ended ${status}`);
        await sleep(20);
      }
    }
  };
  await Promise.all(Array.from({ length: 8 }, worker));
  return ids;
}

export async function call(server: StartedProcess, method: 'GET' | 'POST' | 'DELETE', route: string, body?: unknown): Promise<{ status: number; body: unknown }> {
  const response = await request(`${server.url}${route}`, {
    method,
    headers: { authorization: `Bearer ${BENCH_KEY}`, ...(body !== undefined && { 'content-type': 'application/json' }) },
    ...(body !== undefined && { body: JSON.stringify(body) }),
  });
  const text = await response.body.text();
  return { status: response.statusCode, body: text ? JSON.parse(text) : null };
}

export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
