import fs from 'node:fs';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { AgentdClient, type AgentEvent, type StreamEvent } from '../../src/client/index.js';
import { startFakeLlm, type FakeLlm } from '../fake-llm/fake-llm-server.js';
import { startAgentHarness, type AgentHarness } from '../support/agent-harness.js';
import { freePort, spawnServer, tempDir, TEST_KEY, type SpawnedServer } from '../support/agentd.js';

/**
 * query() in the middle of a run whose connection drops: it resumes with Last-Event-ID and
 * delivers every persisted event once, in order, then ends with the run.
 */
const persisted = (events: StreamEvent[]) => events.filter((event): event is AgentEvent => event.kind !== 'message_delta' && event.kind !== 'reasoning_delta');
const cleanups: (() => Promise<void> | void)[] = [];

afterAll(async () => {
  for (const cleanup of cleanups.reverse()) await cleanup();
});

function expectEveryEventOnce(seen: AgentEvent[], log: AgentEvent[]): void {
  expect(seen.map((event) => event.seq)).toEqual(seen.map((_, index) => index + 1));
  expect(seen.map((event) => event.id)).toEqual(log.map((event) => event.id));
}

describe('query() across a dropped connection', () => {
  it('resumes after the server kills every socket mid-run: no gap, no duplicate, ends with the run', async () => {
    const harness: AgentHarness = await startAgentHarness([
      { toolCalls: [{ name: 'bash', arguments: { command: 'echo before the drop' } }] },
      // The run is still going (this answer waits) when the connections are cut.
      { toolCalls: [{ name: 'bash', arguments: { command: 'echo after the drop' } }], delayMs: 400 },
      { text: 'Done after the drop.' },
    ]);
    cleanups.push(() => harness.close());
    let streamRequests = 0;
    harness.server.app.server.on('request', (request) => {
      if (request.url?.includes('/events/stream')) streamRequests += 1;
    });
    const client = new AgentdClient({ url: harness.server.url, apiKey: TEST_KEY });
    const events: StreamEvent[] = [];
    let dropped = false;
    const reconnects: number[] = [];
    for await (const event of client.query({ prompt: 'Echo twice', llm: { model: 'fake-model', base_url: harness.llm.url, api_key: 'k' }, onReconnect: (_, cursor) => reconnects.push(cursor) })) {
      events.push(event);
      if (!dropped && event.kind === 'observation') {
        dropped = true;
        harness.server.app.server.closeAllConnections();
      }
    }
    expect(dropped).toBe(true);
    expect(reconnects.length).toBeGreaterThanOrEqual(1);
    expect(streamRequests).toBeGreaterThanOrEqual(2);
    const seen = persisted(events);
    const conversationId = seen[0]!.conversation_id;
    const log = (await client.events.list(conversationId, { limit: 1000 })).items;
    expectEveryEventOnce(seen, log);
    expect(seen.filter((event) => event.kind === 'observation').map((event) => event.kind === 'observation' && event.content.trim())).toEqual(['before the drop', 'after the drop']);
    expect(seen.at(-1)).toMatchObject({ kind: 'state_update', status: 'idle' });
    expect(seen.find((event) => event.kind === 'message' && event.source === 'agent')).toMatchObject({ content: 'Done after the drop.' });
  });

  it('resumes after the server is killed (kill -9) and started again on its port: the run ends paused, every event once', { timeout: 60_000 }, async () => {
    const llm: FakeLlm = await startFakeLlm([{ toolCalls: [{ name: 'bash', arguments: { command: 'echo before the crash' } }] }, { hang: true }]);
    cleanups.push(() => llm.close());
    const dataDir = tempDir('agentd-client-restart-');
    cleanups.push(() => fs.rmSync(dataDir, { recursive: true, force: true }));
    const port = await freePort();
    let server: SpawnedServer = await spawnServer({ dataDir: path.join(dataDir, 'data'), port });
    cleanups.push(async () => {
      server.child.kill('SIGTERM');
      await server.exited;
    });
    const client = new AgentdClient({ url: server.url, apiKey: TEST_KEY });
    const events: StreamEvent[] = [];
    let restarted: Promise<void> | null = null;
    for await (const event of client.query({ prompt: 'Echo, then think forever', llm: { model: 'fake-model', base_url: llm.url, api_key: 'k' } })) {
      events.push(event);
      if (!restarted && event.kind === 'observation') {
        restarted = (async () => {
          server.child.kill('SIGKILL');
          await server.exited;
          server = await spawnServer({ dataDir: path.join(dataDir, 'data'), port });
        })();
      }
    }
    await restarted;
    const seen = persisted(events);
    const log = (await client.events.list(seen[0]!.conversation_id, { limit: 1000 })).items;
    expectEveryEventOnce(seen, log);
    expect(seen.at(-1)).toMatchObject({ kind: 'state_update', status: 'paused', reason: expect.stringContaining('restarted') });
  });

  it('resumes after a clean stop (stream_closed: server_shutting_down) and a start on the same port', { timeout: 60_000 }, async () => {
    const dataDir = tempDir('agentd-client-stop-');
    cleanups.push(() => fs.rmSync(dataDir, { recursive: true, force: true }));
    const port = await freePort();
    let server: SpawnedServer = await spawnServer({ dataDir: path.join(dataDir, 'data'), port });
    cleanups.push(async () => {
      server.child.kill('SIGTERM');
      await server.exited;
    });
    const client = new AgentdClient({ url: server.url, apiKey: TEST_KEY });
    const created = await client.conversations.create({ initial_message: 'before the stop', run: false });
    const contents: string[] = [];
    let opened = 0;
    for await (const event of client.events.stream(created.id, { onOpen: () => (opened += 1) })) {
      if (event.kind !== 'message') continue;
      contents.push(event.content);
      if (contents.length === 1) {
        server.child.kill('SIGTERM');
        expect(await server.exited).toBe(0);
        server = await spawnServer({ dataDir: path.join(dataDir, 'data'), port });
        await client.messages.send(created.id, { content: 'after the start', run: false });
      } else break;
    }
    expect(contents).toEqual(['before the stop', 'after the start']);
    expect(opened).toBe(2);
  });
});
