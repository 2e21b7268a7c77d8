/**
 * The access matrix of issue 77: every keyed route of the contract × {owner, other owner, missing
 * scope, expired, rotated-in-grace, rotated-after-grace, admin}, with the status each must get.
 * The routes come from CONTRACT_ROUTES and their scopes from the OpenAPI document the server
 * serves, so a route added anywhere is in the matrix, or the matrix fails for want of its fixture.
 */
import { expect } from 'vitest';
import { TEST_KEY } from './agentd.js';
import { CONTRACT_ROUTES } from './contract-routes.js';

export type Who = 'owner' | 'other_owner' | 'missing_scope' | 'expired' | 'rotated_in_grace' | 'rotated_after_grace' | 'admin';
export const EVERYONE: readonly Who[] = ['missing_scope', 'expired', 'rotated_after_grace', 'other_owner', 'owner', 'rotated_in_grace', 'admin'];

/** Every scope a key of a plain user may hold (all but keys:admin). */
export const USER_SCOPES = ['conversations:read', 'conversations:write', 'runs:write', 'files:read', 'files:write', 'commands:run', 'secrets:write', 'webhooks:write', 'schedules:write', 'audit:read'];

export interface Answer {
  status: number;
  body: any;
}

/** A base URL with a bearer secret: JSON in and out; SSE routes answer their status and are closed at once. */
export function client(base: string, secret: string) {
  return async (method: string, path: string, body?: unknown, init: { form?: FormData } = {}): Promise<Answer> => {
    const abort = new AbortController();
    const headers: Record<string, string> = { authorization: `Bearer ${secret}` };
    if (body !== undefined) headers['content-type'] = 'application/json';
    const response = await fetch(`${base}${path}`, { method, headers, signal: abort.signal, ...(init.form ? { body: init.form } : body !== undefined ? { body: JSON.stringify(body) } : {}) });
    if (response.headers.get('content-type')?.startsWith('text/event-stream')) {
      abort.abort();
      return { status: response.status, body: null };
    }
    const text = await response.text();
    let parsed: unknown = text;
    try {
      parsed = text ? JSON.parse(text) : null;
    } catch {
      // Not JSON (a download, the metrics): the text.
    }
    return { status: response.status, body: parsed };
  };
}

type Call = ReturnType<typeof client>;

export interface MatrixWorld {
  base: string;
  admin: Call;
  /** The owner's key (alice), with every user scope. */
  alice: Call;
  /** Alice's conversation every route under /conversations/{id} is called on. */
  conversationId: string;
  runId: string;
  eventId: string;
  callbackId: string;
  /** Alice's schedule (on her conversation) the schedule reads are called on. */
  scheduleId: string;
  /** The fake LLM's settings for conversations that run. */
  llm: Record<string, unknown>;
}

interface Request {
  method: string;
  path: string;
  body?: unknown;
  form?: FormData;
}

/**
 * Per route: the request (fresh resources where the call uses one up) and the status its owner
 * gets; `otherOk` what another owner gets when the route is not under /conversations/{id}.
 */
type Fixture = { ok: number; adminOk?: number; otherOk?: number; make: (world: MatrixWorld) => Promise<Request> | Request };

const conv = (world: MatrixWorld) => `/conversations/${world.conversationId}`;
async function freshConversation(world: MatrixWorld, body: Record<string, unknown> = {}): Promise<string> {
  const created = await world.alice('POST', '/conversations', body);
  expect(created.status).toBe(201);
  return created.body.id;
}
async function freshKey(world: MatrixWorld): Promise<string> {
  const created = await world.admin('POST', '/keys', { name: 'fresh', scopes: ['conversations:read'], owner: 'alice' });
  expect(created.status).toBe(201);
  return created.body.id;
}
/** A schedule of alice's that never fires by itself (1 January): its target is `conversationId` or her main conversation. */
export async function freshSchedule(world: MatrixWorld, conversationId = world.conversationId): Promise<string> {
  const created = await world.alice('POST', '/schedules', { cron: '0 0 1 1 *', message: { content: 'scheduled' }, conversation_id: conversationId });
  expect(created.status).toBe(201);
  return created.body.id;
}
const sched = (id: string) => `/schedules/${id}`;
let counter = 0;
async function freshFile(world: MatrixWorld): Promise<string> {
  const name = `f${++counter}.txt`;
  const form = new FormData();
  form.append('file', new Blob(['hello']), name);
  const uploaded = await world.alice('POST', `${conv(world)}/files/upload`, undefined, { form });
  expect(uploaded.status).toBe(201);
  return name;
}

export const FIXTURES: Record<string, Fixture> = {
  'DELETE /conversations/{id}': { ok: 204, make: async (world) => ({ method: 'DELETE', path: `/conversations/${await freshConversation(world)}` }) },
  'DELETE /conversations/{id}/callbacks/{callback_id}': {
    ok: 204,
    make: async (world) => {
      const created = await world.alice('POST', `${conv(world)}/callbacks`, { url: 'http://127.0.0.1:9/hook' });
      return { method: 'DELETE', path: `${conv(world)}/callbacks/${created.body.id}` };
    },
  },
  'DELETE /conversations/{id}/files/{path}': { ok: 204, make: async (world) => ({ method: 'DELETE', path: `${conv(world)}/files/${await freshFile(world)}` }) },
  'DELETE /conversations/{id}/runs/{run_id}': { ok: 409, make: (world) => ({ method: 'DELETE', path: `${conv(world)}/runs/${world.runId}` }) },
  'DELETE /conversations/{id}/secrets/{name}': {
    ok: 204,
    make: async (world) => {
      await world.alice('PUT', `${conv(world)}/secrets`, { secrets: { GONE: 'x' } });
      return { method: 'DELETE', path: `${conv(world)}/secrets/GONE` };
    },
  },
  'DELETE /keys/{id}': { ok: 204, make: async (world) => ({ method: 'DELETE', path: `/keys/${await freshKey(world)}` }) },
  'GET /audit': { ok: 200, make: () => ({ method: 'GET', path: '/audit?limit=1' }) },
  'GET /conversations': { ok: 200, make: () => ({ method: 'GET', path: '/conversations' }) },
  'GET /conversations/count': { ok: 200, make: () => ({ method: 'GET', path: '/conversations/count' }) },
  'GET /conversations/{id}': { ok: 200, make: (world) => ({ method: 'GET', path: conv(world) }) },
  'GET /conversations/{id}/callbacks': { ok: 200, make: (world) => ({ method: 'GET', path: `${conv(world)}/callbacks` }) },
  'GET /conversations/{id}/changes': { ok: 200, make: (world) => ({ method: 'GET', path: `${conv(world)}/changes` }) },
  'GET /conversations/{id}/checkpoints': { ok: 200, make: (world) => ({ method: 'GET', path: `${conv(world)}/checkpoints` }) },
  'GET /conversations/{id}/callbacks/{callback_id}/deliveries': { ok: 200, make: (world) => ({ method: 'GET', path: `${conv(world)}/callbacks/${world.callbackId}/deliveries` }) },
  'GET /conversations/{id}/events': { ok: 200, make: (world) => ({ method: 'GET', path: `${conv(world)}/events` }) },
  'GET /conversations/{id}/events/count': { ok: 200, make: (world) => ({ method: 'GET', path: `${conv(world)}/events/count` }) },
  'GET /conversations/{id}/events/stream': { ok: 200, make: (world) => ({ method: 'GET', path: `${conv(world)}/events/stream` }) },
  'GET /conversations/{id}/events/{event_id}': { ok: 200, make: (world) => ({ method: 'GET', path: `${conv(world)}/events/${world.eventId}` }) },
  'GET /conversations/{id}/files': { ok: 200, make: (world) => ({ method: 'GET', path: `${conv(world)}/files` }) },
  'GET /conversations/{id}/files-search': { ok: 200, make: (world) => ({ method: 'GET', path: `${conv(world)}/files-search?pattern=*` }) },
  'GET /conversations/{id}/files/{path}': { ok: 200, make: async (world) => ({ method: 'GET', path: `${conv(world)}/files/${await freshFile(world)}` }) },
  'GET /conversations/{id}/mcp': { ok: 200, make: (world) => ({ method: 'GET', path: `${conv(world)}/mcp` }) },
  'GET /conversations/{id}/skills': { ok: 200, make: (world) => ({ method: 'GET', path: `${conv(world)}/skills` }) },
  'GET /conversations/{id}/runs': { ok: 200, make: (world) => ({ method: 'GET', path: `${conv(world)}/runs` }) },
  'GET /conversations/{id}/runs/{run_id}': { ok: 200, make: (world) => ({ method: 'GET', path: `${conv(world)}/runs/${world.runId}` }) },
  'GET /conversations/{id}/secrets': { ok: 200, make: (world) => ({ method: 'GET', path: `${conv(world)}/secrets` }) },
  'GET /events/stream': { ok: 200, make: () => ({ method: 'GET', path: '/events/stream' }) },
  'GET /info': { ok: 200, make: () => ({ method: 'GET', path: '/info' }) },
  'GET /keys': { ok: 200, make: () => ({ method: 'GET', path: '/keys' }) },
  'GET /keys/me': { ok: 200, adminOk: 404, make: () => ({ method: 'GET', path: '/keys/me' }) },
  'GET /keys/{id}': { ok: 200, make: async (world) => ({ method: 'GET', path: `/keys/${await freshKey(world)}` }) },
  'GET /metrics': { ok: 200, make: () => ({ method: 'GET', path: '/metrics' }) },
  'PATCH /keys/{id}': { ok: 200, make: async (world) => ({ method: 'PATCH', path: `/keys/${await freshKey(world)}`, body: { name: 'renamed' } }) },
  'POST /conversations': { ok: 201, make: () => ({ method: 'POST', path: '/conversations', body: {} }) },
  'POST /conversations/{id}/approve': { ok: 409, make: (world) => ({ method: 'POST', path: `${conv(world)}/approve` }) },
  'POST /conversations/{id}/answer': { ok: 409, make: (world) => ({ method: 'POST', path: `${conv(world)}/answer`, body: { content: 'yes' } }) },
  'POST /conversations/{id}/callbacks': { ok: 201, make: (world) => ({ method: 'POST', path: `${conv(world)}/callbacks`, body: { url: 'http://127.0.0.1:9/hook' } }) },
  'POST /conversations/{id}/callbacks/{callback_id}/enable': { ok: 200, make: (world) => ({ method: 'POST', path: `${conv(world)}/callbacks/${world.callbackId}/enable` }) },
  'POST /conversations/{id}/commands': { ok: 200, make: (world) => ({ method: 'POST', path: `${conv(world)}/commands`, body: { command: 'true' } }) },
  'POST /conversations/{id}/condense': { ok: 409, make: (world) => ({ method: 'POST', path: `${conv(world)}/condense` }) },
  'POST /conversations/{id}/confirmation': { ok: 200, make: (world) => ({ method: 'POST', path: `${conv(world)}/confirmation`, body: { enabled: false } }) },
  'POST /conversations/{id}/dirs/{path}': { ok: 201, make: (world) => ({ method: 'POST', path: `${conv(world)}/dirs/d${++counter}` }) },
  'POST /conversations/{id}/files/upload': {
    ok: 201,
    make: (world) => {
      const form = new FormData();
      form.append('file', new Blob(['x']), `u${++counter}.txt`);
      return { method: 'POST', path: `${conv(world)}/files/upload`, form };
    },
  },
  'POST /conversations/{id}/fork': { ok: 201, make: (world) => ({ method: 'POST', path: `${conv(world)}/fork`, body: { copy_workdir: false } }) },
  'POST /conversations/{id}/messages': { ok: 202, make: (world) => ({ method: 'POST', path: `${conv(world)}/messages`, body: { content: 'noted', run: false } }) },
  'POST /conversations/{id}/pause': { ok: 200, make: (world) => ({ method: 'POST', path: `${conv(world)}/pause` }) },
  'POST /conversations/{id}/reject': { ok: 409, make: (world) => ({ method: 'POST', path: `${conv(world)}/reject`, body: {} }) },
  'POST /conversations/{id}/rewind': { ok: 404, make: (world) => ({ method: 'POST', path: `${conv(world)}/rewind`, body: { checkpoint_id: '00000000-0000-4000-8000-000000000000' } }) },
  'POST /conversations/{id}/run': { ok: 202, make: async (world) => ({ method: 'POST', path: `/conversations/${await freshConversation(world, { llm: world.llm })}/run` }) },
  'POST /keys': { ok: 201, make: () => ({ method: 'POST', path: '/keys', body: { name: 'made', scopes: ['conversations:read'] } }) },
  'POST /keys/{id}/rotate': { ok: 200, make: async (world) => ({ method: 'POST', path: `/keys/${await freshKey(world)}/rotate`, body: { grace_s: 0 } }) },
  'POST /conversations/{id}/schedules': { ok: 201, make: (world) => ({ method: 'POST', path: `${conv(world)}/schedules`, body: { cron: '0 0 1 1 *', message: { content: 'scheduled' } } }) },
  'POST /schedules': { ok: 201, otherOk: 404, make: (world) => ({ method: 'POST', path: '/schedules', body: { cron: '0 0 1 1 *', message: { content: 'scheduled' }, conversation_id: world.conversationId } }) },
  'GET /schedules': { ok: 200, make: () => ({ method: 'GET', path: '/schedules' }) },
  'GET /schedules/preview': { ok: 200, make: () => ({ method: 'GET', path: '/schedules/preview?cron=@hourly' }) },
  'GET /schedules/{id}': { ok: 200, otherOk: 404, make: (world) => ({ method: 'GET', path: sched(world.scheduleId) }) },
  'GET /schedules/{id}/fires': { ok: 200, otherOk: 404, make: (world) => ({ method: 'GET', path: `${sched(world.scheduleId)}/fires` }) },
  'PATCH /schedules/{id}': { ok: 200, otherOk: 404, make: (world) => ({ method: 'PATCH', path: sched(world.scheduleId), body: { metadata: { patched: true } } }) },
  'DELETE /schedules/{id}': { ok: 204, otherOk: 404, make: async (world) => ({ method: 'DELETE', path: sched(await freshSchedule(world)) }) },
  // A fire sends its message: to a fresh conversation, so that no run starts in the shared one.
  'POST /schedules/{id}/trigger': { ok: 201, otherOk: 404, make: async (world) => ({ method: 'POST', path: `${sched(await freshSchedule(world, await freshConversation(world, { llm: world.llm })))}/trigger` }) },
  'POST /schedules/{id}/pause': { ok: 200, otherOk: 404, make: async (world) => ({ method: 'POST', path: `${sched(await freshSchedule(world))}/pause`, body: { note: 'matrix' } }) },
  'POST /schedules/{id}/resume': { ok: 200, otherOk: 404, make: async (world) => ({ method: 'POST', path: `${sched(await freshSchedule(world))}/resume` }) },
  'PUT /conversations/{id}/config': { ok: 200, make: (world) => ({ method: 'PUT', path: `${conv(world)}/config`, body: { title: 'renamed' } }) },
  'PUT /conversations/{id}/secrets': { ok: 200, make: (world) => ({ method: 'PUT', path: `${conv(world)}/secrets`, body: { secrets: { TOKEN: 'value' } } }) },
};

/** The status `who` must get on `route` (whose declared scope is `scope`). */
export function expectedStatus(route: string, scope: string | null, who: Who): number {
  const fixture = FIXTURES[route]!;
  if (who === 'expired' || who === 'rotated_after_grace') return 401;
  if (who === 'admin') return fixture.adminOk ?? fixture.ok;
  if (who === 'missing_scope') return scope === null ? fixture.ok : 403;
  if (scope === 'keys:admin') return 403;
  if (who === 'other_owner' && route.startsWith('/conversations/{id}', route.indexOf(' ') + 1)) return 404;
  if (who === 'other_owner' && fixture.otherOk !== undefined) return fixture.otherOk;
  return fixture.ok;
}

/** The keyed routes with the scope each declares in the OpenAPI document (null: any key). */
export async function keyedRoutes(base: string): Promise<{ route: string; scope: string | null }[]> {
  const document = (await (await fetch(`${base}/openapi.json`)).json()) as { paths: Record<string, Record<string, { security?: Record<string, string[]>[] }>> };
  const out: { route: string; scope: string | null }[] = [];
  for (const route of CONTRACT_ROUTES) {
    const [method, path] = route.split(' ') as [string, string];
    const security = document.paths[path]?.[method.toLowerCase()]?.security;
    if (security !== undefined && security.length === 0) continue; // public
    expect(security, `${route} declares no scope`).toHaveLength(1);
    const scopes = security![0]!.bearerAuth!;
    out.push({ route, scope: scopes[0] ?? null });
  }
  return out;
}

export const adminCall = (base: string) => client(base, TEST_KEY);
