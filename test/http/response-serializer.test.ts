import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Conversation } from '../../src/core/schemas/conversation.js';
import { compileFromJsonSchema } from '../../src/http/response-serializer.js';
import { startServer, type TestServer } from '../support/agentd.js';

let server: TestServer;
beforeAll(async () => {
  server = await startServer({ listen: false });
});
afterAll(async () => {
  await server.close();
});

const full = {
  title: 'everything set',
  metadata: { team: 'core' },
  llm: { model: 'm', api_key: 'sk-serializer-test', temperature: 0.5 },
  secrets: { TOKEN: 'tok-serializer-test' },
  hooks: { PreToolUse: [{ matcher: 'bash', hooks: [{ type: 'http', url: 'http://127.0.0.1:9/hook', secret: 'hook-secret-value' }] }] },
  mcp_servers: { files: { command: 'echo', args: ['x'], env: { KEY: 'mcp-env-value' } }, remote: { url: 'http://127.0.0.1:9/mcp', headers: { authorization: 'Bearer mcp-header-value' } } },
  permissions: { allow: ['bash(ls *)'], deny: [], ask: [] },
  agents: { reviewer: { description: 'reviews', prompt: 'review the diff' } },
};

describe('response bodies compiled from the JSON schema', () => {
  it('are what the zod schema makes of the same value, for a conversation with every setting', async () => {
    const created = await server.app.inject({ method: 'POST', url: '/conversations', headers: server.auth, payload: full });
    expect(created.statusCode).toBe(201);
    const { id } = created.json() as { id: string };
    const response = await server.app.inject({ method: 'GET', url: `/conversations/${id}`, headers: server.auth });
    expect(response.statusCode).toBe(200);
    const viaZod = JSON.parse(JSON.stringify(Conversation.parse(server.services.conversations.get(id))));
    expect(response.json()).toEqual(viaZod);
    for (const value of ['sk-serializer-test', 'tok-serializer-test', 'hook-secret-value', 'mcp-env-value', 'mcp-header-value']) expect(response.body).not.toContain(value);
  });

  it('leave out properties the schema does not name (an internal field never leaves)', () => {
    const serialize = compileFromJsonSchema(Conversation)!;
    const conversation = server.services.conversations.list({ sort: 'created_at', order: 'asc', limit: 1 }).items[0]!;
    const body = serialize({ ...conversation, secrets: { TOKEN: 'tok-internal' }, llm: { ...conversation.llm, api_key_plain: 'sk-internal' } });
    expect(body).not.toContain('tok-internal');
    expect(body).not.toContain('sk-internal');
    expect(JSON.parse(body)).toEqual(JSON.parse(JSON.stringify(Conversation.parse(conversation))));
  });

  it('write each value of a union of plain types as zod does: `sandbox.network` true, false or "host", `project_mcp_servers` a boolean or names', () => {
    const serialize = compileFromJsonSchema(Conversation)!;
    const conversation = server.services.conversations.list({ sort: 'created_at', order: 'asc', limit: 1 }).items[0]!;
    for (const [network, projectServers] of [[true, false], [false, true], ['host', ['files', 'web']], [true, []]] as const) {
      const value = { ...conversation, sandbox: { ...conversation.sandbox, network }, project_mcp_servers: projectServers };
      const body = JSON.parse(serialize(value)) as { sandbox: { network: unknown }; project_mcp_servers: unknown };
      expect(body).toEqual(JSON.parse(JSON.stringify(Conversation.parse(value))));
      expect([body.sandbox.network, body.project_mcp_servers]).toEqual([network, projectServers]);
    }
  });

  it('refuse a value missing a required property (a 500, as zod did), never a body without it', () => {
    const serialize = compileFromJsonSchema(Conversation)!;
    expect(() => serialize({ title: 'no id' })).toThrow();
  });
});
