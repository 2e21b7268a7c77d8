import { PassThrough } from 'node:stream';
import { afterEach, describe, expect, it } from 'vitest';
import { startFakeLlm, type FakeLlm } from '../fake-llm/fake-llm-server.js';
import { spawnServer, startServer, tempDir, TEST_KEY, type SpawnedServer, type TestServer } from '../support/agentd.js';
import { connectSse } from '../support/sse-client.js';
import { processAlive, waitForProcess } from '../support/processes.js';

const json = { authorization: `Bearer ${TEST_KEY}`, 'content-type': 'application/json' };
let server: TestServer | undefined;
let spawned: SpawnedServer | undefined;
let llm: FakeLlm | undefined;

afterEach(async () => {
  await server?.close();
  server = undefined;
  spawned?.child.kill('SIGKILL');
  spawned = undefined;
  await llm?.close();
  llm = undefined;
});

describe('metrics', () => {
  it('serves Prometheus text behind the key', async () => {
    server = await startServer();
    const created = await fetch(`${server.url}/conversations`, { method: 'POST', headers: json, body: '{}' });
    const { id } = (await created.json()) as { id: string };
    await fetch(`${server.url}/conversations/${id}/messages`, { method: 'POST', headers: json, body: JSON.stringify({ content: 'hi', run: false }) });
    expect((await fetch(`${server.url}/metrics`)).status).toBe(401);
    const response = await fetch(`${server.url}/metrics`, { headers: server.auth });
    expect(response.status).toBe(200);
    expect(response.headers.get('content-type')).toContain('text/plain');
    const text = await response.text();
    expect(text).toMatch(/agentd_http_requests_total\{method="POST",route="\/conversations",status="201"\} 1/);
    expect(text).toMatch(/agentd_conversations\{status="idle"\} 1/);
    expect(text).toMatch(/agentd_events_appended_total\{kind="message"\} 1/);
    expect(text).toContain('agentd_http_request_duration_seconds_bucket');
    expect(text).toContain('agentd_sse_subscribers 0');
  });

  it('is public with AGENTD_PUBLIC_METRICS=true', async () => {
    server = await startServer({ env: { AGENTD_PUBLIC_METRICS: 'true' } });
    expect((await fetch(`${server.url}/metrics`)).status).toBe(200);
  });
});

describe('info', () => {
  it('reports the limits as configured, 0 (no cap) as null', async () => {
    const env = { AGENTD_MAX_BODY_BYTES: '2000000', AGENTD_MAX_UPLOAD_BYTES: '3000000', AGENTD_SSE_HEARTBEAT_S: '7.5', AGENTD_SSE_MAX_BUFFERED: '123', AGENTD_MAX_CONNECTIONS: '50', AGENTD_MAX_CONNECTIONS_PER_CLIENT: '0' };
    server = await startServer({ env });
    const info = (await (await fetch(`${server.url}/info`, { headers: server.auth })).json()) as { limits: unknown };
    expect(info.limits).toEqual({
      max_body_bytes: 2_000_000,
      max_upload_bytes: 3_000_000,
      max_page_limit: 1000,
      default_max_iterations_per_run: 500,
      sse_heartbeat_s: 7.5,
      sse_max_buffered_events: 123,
      max_connections: 50,
      max_connections_per_client: null,
    });
  });
});

describe('logs', () => {
  it('are JSON lines with request ids; keys, tokens and secret values never appear', async () => {
    const lines: string[] = [];
    const stream = new PassThrough();
    stream.on('data', (chunk) => lines.push(...chunk.toString().split('\n').filter(Boolean)));
    server = await startServer({ logStream: stream });
    const value = `logsecret-${Date.now()}`;
    const created = await fetch(`${server.url}/conversations`, { method: 'POST', headers: json, body: JSON.stringify({ secrets: { LOGGED: value } }) });
    const { id } = (await created.json()) as { id: string };
    await fetch(`${server.url}/conversations?page_id=${value}`, { headers: server.auth });
    await fetch(`${server.url}/conversations/${id}`, { headers: server.auth });
    const sse = await connectSse(`${server.url}/conversations/${id}/events/stream?access_token=${TEST_KEY}`);
    sse.close();
    await new Promise((resolve) => setTimeout(resolve, 100));
    const text = lines.join('\n');
    for (const line of lines) expect(() => JSON.parse(line)).not.toThrow();
    expect(text).toContain('<secret:LOGGED>');
    expect(text).not.toContain(value);
    expect(text).not.toContain(TEST_KEY);
    expect(lines.some((line) => JSON.parse(line).reqId)).toBe(true);
    expect(lines.some((line) => JSON.parse(line).conversation_id === id)).toBe(true);
  });
});

describe('graceful shutdown', () => {
  it('SIGTERM pauses the run (events recorded, tool interrupted), ends SSE cleanly and exits 0', async () => {
    const marker = `sleep 4${Math.floor(Math.random() * 9)}.${Date.now() % 1000}`;
    llm = await startFakeLlm([{ toolCalls: [{ name: 'bash', arguments: { command: marker } }] }]);
    const dataDir = tempDir();
    spawned = await spawnServer({ dataDir });
    const created = await fetch(`${spawned.url}/conversations`, { method: 'POST', headers: json, body: JSON.stringify({ llm: { model: 'f', base_url: llm.url, api_key: 'k' } }) });
    const { id } = (await created.json()) as { id: string };
    const sse = await connectSse(`${spawned.url}/conversations/${id}/events/stream`, { authorization: `Bearer ${TEST_KEY}` });
    await fetch(`${spawned.url}/conversations/${id}/messages`, { method: 'POST', headers: json, body: JSON.stringify({ content: 'sleep' }) });
    await sse.waitFor((messages) => messages.some((message) => message.event === 'action'));
    // The tool is running: its process exists before the signal.
    await waitForProcess(marker);

    const started = Date.now();
    spawned.child.kill('SIGTERM');
    expect(await spawned.exited).toBe(0);
    expect(Date.now() - started).toBeLessThan(10_000);
    await sse.ended;
    const events = sse.messages.filter((message) => message.id !== undefined).map((message) => JSON.parse(message.data));
    const observation = events.find((event) => event.kind === 'observation');
    expect(observation.tool_name).toBe('bash');
    expect(observation.content).toContain('Interrupted');
    expect(events.filter((event) => event.kind === 'state_update').at(-1)).toMatchObject({ status: 'paused' });
    expect(processAlive(marker)).toBe(false);

    spawned = await spawnServer({ dataDir });
    const after = await fetch(`${spawned.url}/conversations/${id}`, { headers: json });
    expect(((await after.json()) as { status: string }).status).toBe('paused');
  });

  it('a second signal exits at once, with status 1', async () => {
    // A command that ignores SIGINT keeps the first shutdown stage busy for about a second.
    llm = await startFakeLlm([{ toolCalls: [{ name: 'bash', arguments: { command: "trap '' INT; sleep 30" } }] }]);
    spawned = await spawnServer({ dataDir: tempDir() });
    const created = await fetch(`${spawned.url}/conversations`, { method: 'POST', headers: json, body: JSON.stringify({ llm: { model: 'f', base_url: llm.url, api_key: 'k' }, initial_message: 'go' }) });
    const { id } = (await created.json()) as { id: string };
    const until = Date.now() + 10_000;
    for (;;) {
      const page = await fetch(`${spawned.url}/conversations/${id}/events?kind=action`, { headers: json });
      if (((await page.json()) as { items: unknown[] }).items.length > 0 || Date.now() > until) break;
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    await new Promise((resolve) => setTimeout(resolve, 300));
    spawned.child.kill('SIGTERM');
    await new Promise((resolve) => setTimeout(resolve, 100));
    spawned.child.kill('SIGTERM');
    expect(await spawned.exited).toBe(1);
    expect(spawned.output()).toContain('again, exiting now');
  });
});

describe('CORS', () => {
  it('is off by default and answers preflights for configured origins', async () => {
    server = await startServer();
    const plain = await fetch(`${server.url}/alive`, { headers: { origin: 'https://dash.example.com' } });
    expect(plain.headers.get('access-control-allow-origin')).toBeNull();
    await server.close();
    server = await startServer({ env: { AGENTD_CORS_ORIGINS: 'https://dash.example.com' } });
    const preflight = await fetch(`${server.url}/conversations`, {
      method: 'OPTIONS',
      headers: { origin: 'https://dash.example.com', 'access-control-request-method': 'POST', 'access-control-request-headers': 'authorization,content-type' },
    });
    expect(preflight.status).toBe(204);
    expect(preflight.headers.get('access-control-allow-origin')).toBe('https://dash.example.com');
    expect(preflight.headers.get('access-control-allow-headers')).toContain('authorization');
    // Answered by CORS's hook, after the request's first: it carries its request id.
    expect(preflight.headers.get('x-request-id')).toMatch(/./);
    const other = await fetch(`${server.url}/alive`, { headers: { origin: 'https://evil.example.com' } });
    expect(other.headers.get('access-control-allow-origin')).toBeNull();
    const unauthorized = await fetch(`${server.url}/info`, { headers: { origin: 'https://dash.example.com' } });
    expect(unauthorized.status).toBe(401);
    expect(unauthorized.headers.get('access-control-allow-origin')).toBe('https://dash.example.com');
    expect(unauthorized.headers.get('x-request-id')).toMatch(/./);
    // With CORS on, authentication is a hook of its own after CORS's: a valid key still goes through.
    const authorized = await fetch(`${server.url}/info`, { headers: { origin: 'https://dash.example.com', ...server.auth } });
    expect(authorized.status).toBe(200);
    expect(authorized.headers.get('access-control-allow-origin')).toBe('https://dash.example.com');
  });
});
