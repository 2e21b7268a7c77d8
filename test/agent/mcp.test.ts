import { randomUUID } from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { isInitializeRequest } from '@modelcontextprotocol/sdk/types.js';
import { afterEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { startAgentHarness, type AgentHarness } from '../support/agent-harness.js';

const NODE_MODULES = path.resolve('node_modules');
const EVERYTHING = path.join(NODE_MODULES, '@modelcontextprotocol/server-everything/dist/index.js');
/** The stdio servers run in the sandbox: the repository's node_modules is bound read-only. */
const ENV = { AGENTD_SANDBOX_RO_PATHS: NODE_MODULES, AGENTD_WEBHOOK_ALLOW_PRIVATE: 'true' };

let harness: AgentHarness | undefined;
const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  await harness?.close();
  harness = undefined;
  for (const cleanup of cleanups.splice(0)) await cleanup();
});

const call = (name: string, args: Record<string, unknown> = {}) => ({ toolCalls: [{ name, arguments: args }] });
const observations = async (id: string) => (await harness!.events(id)).filter((event) => event.kind === 'observation');

async function waitForMcp(id: string, ready: (servers: any[]) => boolean, timeoutMs = 20_000): Promise<any[]> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const { status, body } = await harness!.get(`/conversations/${id}/mcp`);
    expect(status).toBe(200);
    if (ready(body.servers)) return body.servers;
    if (Date.now() > deadline) throw new Error(`MCP status stayed ${JSON.stringify(body.servers)}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

describe('stdio MCP servers (the npm server-everything, inside the sandbox)', () => {
  it('exposes mcp__<server>__<tool> with its schema, validates arguments, maps results, masks secrets', { timeout: 60_000 }, async () => {
    harness = await startAgentHarness(
      [call('mcp__everything__get-sum', { a: 2, b: 40 }), call('mcp__everything__get-sum', { a: 'two' }), call('mcp__everything__get-env'), call('mcp__everything__get-tiny-image'), { text: 'done' }],
      { env: ENV },
    );
    const id = await harness.createConversation({
      secrets: { API_TOKEN: 'tok-4f9a1c77e2' },
      mcp_servers: { everything: { command: 'node', args: [EVERYTHING, 'stdio'], env: { EVERYTHING_TOKEN: 'Bearer ${API_TOKEN}' } } },
      initial_message: 'use the tools',
    });
    await harness.waitForStatus(id, ['idle'], 45_000);
    const schemas = (harness.llm.requests[0]!.body as any).tools as any[];
    const sum = schemas.find((tool) => tool.function.name === 'mcp__everything__get-sum');
    expect(sum.function.parameters.properties).toHaveProperty('a');
    expect(schemas.some((tool) => tool.function.name === 'bash')).toBe(true);

    const results = await observations(id);
    expect(results[0]).toMatchObject({ is_error: false });
    expect(results[0].content).toContain('42');
    expect(results[1]).toMatchObject({ is_error: true, data: { error: 'invalid_arguments' } });
    expect(results[2].content).toContain('EVERYTHING_TOKEN');
    expect(results[3].data.images[0].media_type).toBe('image/png');
    const everything = JSON.stringify(await harness.events(id));
    expect(everything).not.toContain('tok-4f9a1c77e2');

    const conversation = (await harness.get(`/conversations/${id}`)).body;
    expect(conversation.mcp_servers.everything.env).toEqual({ EVERYTHING_TOKEN: '********' });
    const [status] = await waitForMcp(id, (servers) => servers[0]?.status === 'connected');
    expect(status).toMatchObject({ name: 'everything', transport: 'stdio', source: 'conversation' });
    expect(status.tools).toContain('mcp__everything__get-sum');
  });

  it('servers come from AGENTD_MCP_CONFIG and the project .mcp.json (setting_sources, project_mcp_servers), the conversation winning by name', { timeout: 60_000 }, async () => {
    const configDir = fs.mkdtempSync(path.join(os.tmpdir(), 'agentd-mcp-config-'));
    cleanups.push(async () => fs.rmSync(configDir, { recursive: true, force: true }));
    const configFile = path.join(configDir, 'mcp.json');
    fs.writeFileSync(configFile, JSON.stringify({ mcpServers: { everything: { command: 'node', args: [EVERYTHING] }, shared: { command: 'no-such-shared-server' } } }));
    harness = await startAgentHarness([], { env: { ...ENV, AGENTD_MCP_CONFIG: configFile } });
    const id = await harness.createConversation({ mcp_servers: { shared: { command: 'node', args: [EVERYTHING] } }, project_mcp_servers: true });
    const workdir = (await harness.get(`/conversations/${id}`)).body.workdir as string;
    fs.writeFileSync(path.join(workdir, '.mcp.json'), JSON.stringify({ mcpServers: { local: { command: 'node', args: [EVERYTHING] }, 'bad entry': { nope: true } } }));
    const servers = await waitForMcp(id, (list) => list.filter((server: any) => server.status === 'connected').length === 3);
    expect(servers.map((server: any) => [server.name, server.source, server.status])).toEqual([
      ['everything', 'server', 'connected'],
      ['shared', 'conversation', 'connected'],
      ['local', 'project', 'connected'],
      ['bad entry', 'project', 'failed'],
    ]);
    const other = await harness.createConversation({ setting_sources: [], project_mcp_servers: true });
    const otherDir = (await harness.get(`/conversations/${other}`)).body.workdir as string;
    fs.writeFileSync(path.join(otherDir, '.mcp.json'), JSON.stringify({ mcpServers: { local: { command: 'node', args: [EVERYTHING] } } }));
    const only = await waitForMcp(other, (list) => list.every((server: any) => server.status !== 'connecting'));
    expect(only.map((server: any) => server.name)).toEqual(['everything', 'shared']);
  });

  it('a server that never starts does not fail the run; GET /mcp says why', { timeout: 60_000 }, async () => {
    harness = await startAgentHarness([call('glob', { pattern: '*' }), { text: 'done without it' }], { env: ENV });
    const id = await harness.createConversation({ mcp_servers: { broken: { command: 'no-such-mcp-server-binary' } }, initial_message: 'go' });
    await harness.waitForStatus(id, ['idle'], 45_000);
    const schemas = (harness.llm.requests[0]!.body as any).tools as any[];
    expect(schemas.some((tool) => tool.function.name.startsWith('mcp__broken'))).toBe(false);
    const [status] = await waitForMcp(id, (servers) => servers[0]?.status === 'failed');
    expect(status.error).toMatch(/\S/);
  });

  it('a server that crashes mid-call: the call fails with a reason, the server is restarted', { timeout: 60_000 }, async () => {
    harness = await startAgentHarness([call('mcp__fragile__crash'), { text: 'it crashed' }], { env: ENV });
    const id = await harness.createConversation({});
    const workdir = (await harness.get(`/conversations/${id}`)).body.workdir as string;
    const sdk = path.join(NODE_MODULES, '@modelcontextprotocol/sdk/dist/esm');
    fs.writeFileSync(
      path.join(workdir, 'fragile.mjs'),
      [
        `import { McpServer } from '${sdk}/server/mcp.js';`,
        `import { StdioServerTransport } from '${sdk}/server/stdio.js';`,
        `const server = new McpServer({ name: 'fragile', version: '1.0.0' });`,
        `server.registerTool('crash', { description: 'exits mid-call' }, async () => { setTimeout(() => process.exit(3), 50); await new Promise(() => {}); });`,
        `await server.connect(new StdioServerTransport());`,
      ].join('\n'),
    );
    await fetch(`${harness.server.url}/conversations/${id}/config`, { method: 'PUT', headers: { ...harness.server.auth, 'content-type': 'application/json' }, body: JSON.stringify({ mcp_servers: { fragile: { command: 'node', args: ['fragile.mjs'] } } }) });
    await harness.post(`/conversations/${id}/messages`, { content: 'crash it' });
    await harness.waitForStatus(id, ['idle'], 45_000);
    const [result] = await observations(id);
    expect(result).toMatchObject({ is_error: true, data: { error: 'mcp_server_stopped' } });
    expect(result.content).toContain('The MCP server "fragile" stopped during the call');
    // Restarted with backoff: connected again without another run.
    await waitForMcp(id, (servers) => servers[0]?.status === 'connected', 30_000);
  });
});

/** A Streamable HTTP MCP server built with the SDK, one McpServer per session. */
async function startHttpServer(): Promise<{ url: string; calls: string[]; addLateTool: () => void; slowStarted: Promise<void> }> {
  const transports = new Map<string, StreamableHTTPServerTransport>();
  const servers: McpServer[] = [];
  const calls: string[] = [];
  let signalSlow: () => void = () => {};
  const slowStarted = new Promise<void>((resolve) => (signalSlow = resolve));
  const build = () => {
    const server = new McpServer({ name: 'remote', version: '1.0.0' });
    server.registerTool('add', { description: 'adds', inputSchema: { a: z.number(), b: z.number() } }, async ({ a, b }) => {
      calls.push('add');
      return { content: [{ type: 'text', text: String(a + b) }] };
    });
    server.registerTool('slow', { description: 'takes a minute unless cancelled' }, async (extra) => {
      calls.push('slow');
      signalSlow();
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, 60_000);
        extra.signal.addEventListener('abort', () => {
          clearTimeout(timer);
          calls.push('slow aborted');
          resolve();
        });
      });
      return { content: [{ type: 'text', text: 'slow done' }] };
    });
    servers.push(server);
    return server;
  };
  const listener = http.createServer(async (request, response) => {
    let text = '';
    for await (const chunk of request) text += chunk;
    const body = text ? JSON.parse(text) : undefined;
    const sessionId = request.headers['mcp-session-id'] as string | undefined;
    let transport = sessionId ? transports.get(sessionId) : undefined;
    if (!transport && request.method === 'POST' && isInitializeRequest(body)) {
      transport = new StreamableHTTPServerTransport({ sessionIdGenerator: randomUUID, onsessioninitialized: (id) => void transports.set(id, transport!) });
      await build().connect(transport);
    }
    if (!transport) {
      response.writeHead(400).end();
      return;
    }
    await transport.handleRequest(request, response, body);
  });
  await new Promise<void>((resolve) => listener.listen(0, '127.0.0.1', resolve));
  cleanups.push(async () => {
    for (const server of servers) await server.close().catch(() => undefined);
    listener.closeAllConnections();
    await new Promise((resolve) => listener.close(resolve));
  });
  const addLateTool = () => {
    for (const server of servers) server.registerTool('late', { description: 'added later' }, async () => ({ content: [{ type: 'text', text: 'late tool ran' }] }));
  };
  return { url: `http://127.0.0.1:${(listener.address() as AddressInfo).port}/mcp`, calls, addLateTool, slowStarted };
}

describe('Streamable HTTP MCP servers', () => {
  it('a tool list change reaches the model mid-run', { timeout: 60_000 }, async () => {
    const remote = await startHttpServer();
    let conversationId = '';
    harness = await startAgentHarness(
      [
        call('mcp__remote__add', { a: 1, b: 2 }),
        async () => {
          // The server announces a new tool; agentd hears tools/list_changed and refreshes.
          remote.addLateTool();
          await waitForMcp(conversationId, (servers) => servers[0]?.tools.includes('mcp__remote__late'));
          return call('mcp__remote__late');
        },
        { text: 'done' },
      ],
      { env: ENV },
    );
    const id = await harness.createConversation({ mcp_servers: { remote: { url: remote.url, headers: { Authorization: 'Bearer hdr-secret-9911' } } } });
    conversationId = id;
    await harness.post(`/conversations/${id}/messages`, { content: 'go' });
    await harness.waitForStatus(id, ['idle'], 45_000);
    const names = (index: number) => ((harness!.llm.requests[index]!.body as any).tools as any[]).map((tool) => tool.function.name);
    expect(names(0)).toContain('mcp__remote__add');
    expect(names(0)).not.toContain('mcp__remote__late');
    expect(names(2)).toContain('mcp__remote__late');
    const results = await observations(id);
    expect(results.map((result) => result.content)).toEqual(['3', 'late tool ran']);
    expect((await harness.get(`/conversations/${id}`)).body.mcp_servers.remote.headers).toEqual({ Authorization: '********' });
    const [status] = await waitForMcp(id, (servers) => servers[0]?.status === 'connected');
    expect(status).toMatchObject({ transport: 'http' });
  });

  it('pause interrupts a slow MCP tool and cancels it on the server', { timeout: 60_000 }, async () => {
    const remote = await startHttpServer();
    harness = await startAgentHarness([call('mcp__remote__slow'), { text: 'resumed' }], { env: ENV });
    const id = await harness.createConversation({ mcp_servers: { remote: { url: remote.url } }, initial_message: 'go' });
    await remote.slowStarted;
    const paused = await harness.post(`/conversations/${id}/pause`);
    expect(paused.body.status).toBe('paused');
    const [result] = await observations(id);
    expect(result).toMatchObject({ is_error: true, data: { interrupted: true } });
    const deadline = Date.now() + 5_000;
    while (!remote.calls.includes('slow aborted') && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 50));
    expect(remote.calls).toContain('slow aborted');
  });
});
