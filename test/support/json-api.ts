/**
 * JSON requests to a server under test, with the test key: the one request helper tests share.
 * `requestJson` returns what came back (for assertions on status and body), `okJson` throws on an
 * answer other than 2xx (for set-up steps whose failure should stop the test with the server's
 * own message). A body is sent as JSON, with its content type; a request without one has neither.
 * `fetchWithKey` is fetch with the test key, for what is not JSON (uploads, downloads, metrics).
 */
import { TEST_KEY } from './agentd.js';

export interface JsonResponse {
  status: number;
  text: string;
  body: any;
}

/** What the routes are called on: a base URL, or a server (read at each call: tests replace theirs). */
export type ServerLike = string | { url: string };

export function fetchWithKey(server: ServerLike, route: string, init: RequestInit = {}): Promise<Response> {
  const baseUrl = typeof server === 'string' ? server : server.url;
  return fetch(`${baseUrl}${route}`, { ...init, headers: { authorization: `Bearer ${TEST_KEY}`, ...(init.headers as Record<string, string> | undefined) } });
}

export async function requestJson(server: ServerLike, method: string, route: string, body?: unknown): Promise<JsonResponse> {
  const baseUrl = typeof server === 'string' ? server : server.url;
  const response = await fetch(`${baseUrl}${route}`, {
    method,
    headers: { authorization: `Bearer ${TEST_KEY}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  const text = await response.text();
  return { status: response.status, text, body: text ? JSON.parse(text) : null };
}

export async function okJson(server: ServerLike, method: string, route: string, body?: unknown): Promise<any> {
  const answer = await requestJson(server, method, route, body);
  if (answer.status < 200 || answer.status > 299) throw new Error(`${method} ${route}: ${answer.status} ${answer.text}`);
  return answer.body;
}
