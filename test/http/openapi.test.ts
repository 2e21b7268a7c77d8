import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generateOpenApi } from '../../src/cli/openapi-document.js';
import { startServer, type TestServer } from '../support/agentd.js';
import { CONTRACT_ROUTES } from '../support/contract-routes.js';
import { SCOPES } from '../../src/core/access/scopes.js';

interface OperationObject {
  operationId?: string;
  tags?: string[];
  security?: unknown[];
  requestBody?: unknown;
  parameters?: { in: string; name: string }[];
  responses?: Record<string, unknown>;
}
interface Document {
  openapi: string;
  tags?: { name: string }[];
  paths: Record<string, Record<string, OperationObject>>;
  components?: { securitySchemes?: Record<string, { type: string; scheme?: string }> };
  security?: Record<string, unknown[]>[];
}

const COMMITTED = path.resolve(import.meta.dirname, '../../openapi/openapi.json');
const PUBLIC_PATHS = ['/alive', '/health', '/openapi.json', '/asyncapi.json'];

let generated: Document;
let server: TestServer;

const operations = () =>
  Object.entries(generated.paths).flatMap(([route, methods]) => Object.entries(methods).map(([method, operation]) => ({ route, method, operation })));

beforeAll(async () => {
  generated = (await generateOpenApi()) as unknown as Document;
  server = await startServer({ listen: false });
});
afterAll(async () => {
  await server?.close();
});

describe('openapi/openapi.json', () => {
  it('is committed and equals what the code generates', () => {
    const stale = 'openapi/openapi.json is out of date with the routes: run `npm run openapi` and commit the result';
    expect(fs.existsSync(COMMITTED), `openapi/openapi.json is missing: run \`npm run openapi\``).toBe(true);
    const committed = JSON.parse(fs.readFileSync(COMMITTED, 'utf8')) as unknown;
    expect(committed, stale).toEqual(generated);
    expect(fs.readFileSync(COMMITTED, 'utf8'), stale).toBe(`${JSON.stringify(generated, null, 2)}\n`);
  });

  it('is what the server serves at /openapi.json', async () => {
    const response = await server.app.inject({ method: 'GET', url: '/openapi.json' });
    expect(response.statusCode).toBe(200);
    expect(response.json()).toEqual(generated);
  });
});

describe('the generated document', () => {
  it('is OpenAPI 3.1 with the bearer security scheme applied globally', () => {
    expect(generated.openapi).toBe('3.1.0');
    const schemes = generated.components?.securitySchemes ?? {};
    const bearer = Object.entries(schemes).find(([, scheme]) => scheme.type === 'http' && scheme.scheme === 'bearer');
    expect(bearer, 'an http bearer security scheme').toBeDefined();
    expect(generated.security).toEqual([{ [bearer![0]]: [] }]);
  });

  it('gives every operation a unique operationId and declared tags', () => {
    const declared = new Set((generated.tags ?? []).map((tag) => tag.name));
    const ids = new Set<string>();
    for (const { route, method, operation } of operations()) {
      const where = `${method.toUpperCase()} ${route}`;
      expect(operation.operationId, `${where} has no operationId`).toMatch(/^[a-z]+\.[a-zA-Z]+$/);
      expect(ids.has(operation.operationId!), `${where}: duplicate operationId ${operation.operationId}`).toBe(false);
      ids.add(operation.operationId!);
      expect(operation.tags?.length, `${where} has no tags`).toBeGreaterThan(0);
      for (const tag of operation.tags!) expect(declared.has(tag), `${where}: tag ${tag} is not declared`).toBe(true);
    }
    expect(ids.size).toBe(CONTRACT_ROUTES.length);
    expect(operations().map(({ route, method }) => `${method.toUpperCase()} ${route}`).sort()).toEqual([...CONTRACT_ROUTES].sort());
  });

  it('covers the contract\'s spine routes', () => {
    const present = new Set(operations().map(({ route, method }) => `${method.toUpperCase()} ${route}`));
    for (const expected of [
      'GET /alive', 'GET /health', 'GET /info', 'GET /openapi.json',
      'POST /conversations', 'GET /conversations', 'GET /conversations/count', 'GET /conversations/{id}', 'PUT /conversations/{id}/config', 'DELETE /conversations/{id}',
      'POST /conversations/{id}/messages',
      'GET /conversations/{id}/events', 'GET /conversations/{id}/events/count', 'GET /conversations/{id}/events/{event_id}', 'GET /conversations/{id}/events/stream', 'GET /events/stream',
    ]) {
      expect(present.has(expected), `${expected} is missing`).toBe(true);
    }
  });

  it('declares the error responses: 401 on every non-public route, 400 wherever there is input, 404 under a conversation', () => {
    for (const { route, method, operation } of operations()) {
      const where = `${method.toUpperCase()} ${route}`;
      const codes = Object.keys(operation.responses ?? {});
      expect(codes.some((code) => code.startsWith('2')), `${where} declares no success response`).toBe(true);
      if (PUBLIC_PATHS.includes(route)) {
        expect(operation.security, `${where} should be public`).toEqual([]);
        continue;
      }
      // Every keyed route names the one scope it needs (GET /keys/me: any valid key); a route added
      // without one (at a merge, say) fails here, and the server lets only admins call it.
      expect(operation.security, `${where} declares no scope`).toBeDefined();
      expect(operation.security, `${where} must name one scope`).toHaveLength(1);
      const scopes = (operation.security![0] as { bearerAuth: string[] }).bearerAuth;
      if (`${method.toUpperCase()} ${route}` === 'GET /keys/me') expect(scopes).toEqual([]);
      else {
        expect(scopes, `${where} must name one scope`).toHaveLength(1);
        expect(SCOPES as readonly string[], `${where} names an unknown scope`).toContain(scopes[0]);
      }
      expect(codes, `${where} does not declare 403`).toContain('403');
      expect(codes, `${where} does not declare 401`).toContain('401');
      if (operation.requestBody || (operation.parameters ?? []).length > 0) expect(codes, `${where} does not declare 400`).toContain('400');
      if (operation.requestBody) expect(codes, `${where} does not declare 415`).toContain('415');
      if (route.startsWith('/conversations/{id}')) expect(codes, `${where} does not declare 404`).toContain('404');
    }
  });
});
