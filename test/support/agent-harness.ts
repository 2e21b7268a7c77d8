import { expect } from 'vitest';
import { ProtocolLlmClient } from '../../src/adapters/llm/index.js';
import { startFakeLlm, type FakeLlm, type FakeLlmOptions, type FakeTurn } from '../fake-llm/fake-llm-server.js';
import { startServer, type TestServer } from './agentd.js';

export interface AgentHarness {
  server: TestServer;
  llm: FakeLlm;
  /** POST JSON with the test key; returns status and parsed body. */
  post(path: string, body?: unknown): Promise<{ status: number; body: any }>;
  put(path: string, body: unknown): Promise<{ status: number; body: any }>;
  get(path: string): Promise<{ status: number; body: any }>;
  createConversation(body?: Record<string, unknown>): Promise<string>;
  /** Resolves when the conversation reaches one of the statuses (polling the API). */
  waitForStatus(id: string, statuses: string[], timeoutMs?: number): Promise<any>;
  events(id: string): Promise<any[]>;
  close(): Promise<void>;
}

/** A real server on a port with a scripted fake LLM; LLM retries are fast. */
export async function startAgentHarness(
  script: FakeTurn[] = [],
  options: { env?: Record<string, string>; logStream?: NodeJS.WritableStream; fake?: Omit<FakeLlmOptions, 'script'> } = {},
): Promise<AgentHarness> {
  const llm = await startFakeLlm({ ...options.fake, script });
  const server = await startServer({ ...(options.env ? { env: options.env } : {}), ...(options.logStream ? { logStream: options.logStream } : {}), overrides: { llm: new ProtocolLlmClient({ retryBaseDelayMs: 20, retryMaxDelayMs: 100 }) } });
  const request = async (method: string, path: string, body?: unknown) => {
    const response = await fetch(`${server.url}${path}`, {
      method,
      headers: { ...server.auth, ...(body !== undefined ? { 'content-type': 'application/json' } : {}) },
      ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
    });
    const text = await response.text();
    return { status: response.status, body: text ? JSON.parse(text) : null };
  };
  const harness: AgentHarness = {
    server,
    llm,
    post: (path, body) => request('POST', path, body ?? {}),
    put: (path, body) => request('PUT', path, body),
    get: (path) => request('GET', path),
    async createConversation(body = {}) {
      const created = await request('POST', '/conversations', { llm: { model: 'fake-model', base_url: llm.url, api_key: 'sk-test-llm-key' }, ...body });
      expect(created.status, JSON.stringify(created.body)).toBe(201);
      return created.body.id as string;
    },
    async waitForStatus(id, statuses, timeoutMs = 15_000) {
      const deadline = Date.now() + timeoutMs;
      for (;;) {
        const { body } = await request('GET', `/conversations/${id}`);
        if (statuses.includes(body.status) && (body.status !== 'running' || statuses.length === 1)) return body;
        if (Date.now() > deadline) throw new Error(`status stayed ${body.status}, wanted ${statuses.join('|')}`);
        await new Promise((resolve) => setTimeout(resolve, 25));
      }
    },
    async events(id) {
      const { body } = await request('GET', `/conversations/${id}/events?limit=1000`);
      return body.items;
    },
    async close() {
      await server.close();
      await llm.close();
    },
  };
  return harness;
}
