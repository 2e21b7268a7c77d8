/**
 * Shared pieces of the reliability suites (test/reliability-*.test.ts): the heavy-variant flag,
 * a small JSON client for a server on a port, the whole event list of a conversation, the
 * invariants every conversation's events must keep, and an independent webhook signature check.
 */
import fs from 'node:fs';
import { createHmac } from 'node:crypto';
import { expect } from 'vitest';
import { TEST_KEY } from './agentd.js';
import type { ReceivedWebhook } from './webhook-receiver.js';
import { commandLineOf, runsIn } from './processes.js';

/** `AGENTD_HEAVY_TESTS=1` runs the heavier variants (more kills, more load). */
export const HEAVY = process.env.AGENTD_HEAVY_TESTS === '1';

export function scaled<T>(light: T, heavy: T): T {
  return HEAVY ? heavy : light;
}

export interface ApiResponse {
  status: number;
  text: string;
  json(): any;
}

export interface Api {
  url: string;
  request(method: string, path: string, body?: unknown): Promise<ApiResponse>;
  get(path: string): Promise<ApiResponse>;
  post(path: string, body?: unknown): Promise<ApiResponse>;
}

/** JSON over fetch with the test key. */
export function apiClient(url: string): Api {
  const request = async (method: string, path: string, body?: unknown): Promise<ApiResponse> => {
    const response = await fetch(`${url}${path}`, {
      method,
      headers: { authorization: `Bearer ${TEST_KEY}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
    const text = await response.text();
    return { status: response.status, text, json: () => JSON.parse(text) };
  };
  return { url, request, get: (path) => request('GET', path), post: (path, body) => request('POST', path, body ?? {}) };
}

/** Every conversation id the list gives, walking the pages. */
export async function allConversationIds(api: Api): Promise<string[]> {
  const ids: string[] = [];
  let pageId: string | null = null;
  do {
    const page = await api.get(`/conversations?limit=1000${pageId ? `&page_id=${pageId}` : ''}`);
    expect(page.status, page.text.slice(0, 300)).toBe(200);
    const body = page.json() as { items: { id: string }[]; next_page_id: string | null };
    ids.push(...body.items.map((item) => item.id));
    pageId = body.next_page_id;
  } while (pageId);
  return ids;
}

/** JSON with object keys sorted: the same text for the same value, whatever the key order. */
export function canonicalJson(value: unknown): string {
  return JSON.stringify(value, (_key, item: unknown) => (item && typeof item === 'object' && !Array.isArray(item) ? Object.fromEntries(Object.entries(item).sort(([a], [b]) => (a < b ? -1 : 1))) : item));
}

export interface StoredEventLike {
  id: string;
  seq: number;
  kind: string;
  conversation_id: string;
  tool_call_id?: string;
  [key: string]: unknown;
}

/** Every event of a conversation, walking the pages; `texts[i]` is the JSON of `events[i]` as listed. */
export async function allEvents(api: Api, conversationId: string): Promise<{ events: StoredEventLike[]; texts: string[] }> {
  const events: StoredEventLike[] = [];
  let pageId: string | null = null;
  do {
    const page = await api.get(`/conversations/${conversationId}/events?limit=1000${pageId ? `&page_id=${pageId}` : ''}`);
    expect(page.status, page.text.slice(0, 300)).toBe(200);
    const body = page.json() as { items: StoredEventLike[]; next_page_id: string | null };
    events.push(...body.items);
    pageId = body.next_page_id;
  } while (pageId);
  return { events, texts: events.map((event) => JSON.stringify(event)) };
}

/**
 * What must hold for any conversation's events: seqs 1..n without gap or duplicate, unique ids,
 * and every `action` answered by an `observation` or a `rejection` (unless it is still pending
 * confirmation). Returns the problems found (empty when all hold).
 */
export function eventProblems(events: readonly StoredEventLike[], options: { pendingCallIds?: readonly string[] } = {}): string[] {
  const problems: string[] = [];
  events.forEach((event, index) => {
    if (event.seq !== index + 1) problems.push(`event #${index + 1} has seq ${event.seq}`);
  });
  if (new Set(events.map((event) => event.id)).size !== events.length) problems.push('event ids repeat');
  const answered = new Set(events.filter((event) => event.kind === 'observation' || event.kind === 'rejection').map((event) => event.tool_call_id));
  const pending = new Set(options.pendingCallIds ?? []);
  for (const action of events.filter((event) => event.kind === 'action')) {
    if (!answered.has(action.tool_call_id) && !pending.has(action.tool_call_id!)) problems.push(`action ${action.tool_call_id} (seq ${action.seq}) has no observation or rejection`);
  }
  return problems;
}

/** The Standard Webhooks signature, computed here independently of the server's code. */
export function expectedSignature(secret: string, request: ReceivedWebhook): string {
  const key = secret.startsWith('whsec_') ? Buffer.from(secret.slice('whsec_'.length), 'base64') : Buffer.from(secret, 'utf8');
  const signed = `${String(request.headers['webhook-id'])}.${String(request.headers['webhook-timestamp'])}.${request.body}`;
  return `v1,${createHmac('sha256', key).update(signed, 'utf8').digest('base64')}`;
}

export async function until(check: () => boolean | Promise<boolean>, what: string, timeoutMs = 15_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

export const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/** Live processes (but `except`) whose command line names `dir` or whose cwd lies inside it. */
export function processesUsing(dir: string, except: readonly number[] = []): string[] {
  const found: string[] = [];
  for (const entry of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(entry) || except.includes(Number(entry))) continue;
    const cmdline = (commandLineOf(entry) ?? '').trim();
    if (cmdline === '') continue; // gone, a zombie or a kernel thread
    if (cmdline.includes(dir) || runsIn(entry, dir)) found.push(`${entry} ${cmdline.slice(0, 100)}`);
  }
  return found;
}
