/**
 * JSON requests to a server under test, with the test key: `requestJson` returns what came back
 * (for assertions on status and body), `okJson` throws on an answer other than 2xx (for set-up
 * steps whose failure should stop the test with the server's own message).
 */
import { TEST_KEY } from './agentd.js';

export interface JsonResponse {
  status: number;
  text: string;
  body: any;
}

export async function requestJson(baseUrl: string, method: string, route: string, body?: unknown): Promise<JsonResponse> {
  const response = await fetch(`${baseUrl}${route}`, {
    method,
    headers: { authorization: `Bearer ${TEST_KEY}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  const text = await response.text();
  return { status: response.status, text, body: text ? JSON.parse(text) : null };
}

export async function okJson(baseUrl: string, method: string, route: string, body?: unknown): Promise<any> {
  const answer = await requestJson(baseUrl, method, route, body);
  if (answer.status < 200 || answer.status > 299) throw new Error(`${method} ${route}: ${answer.status} ${answer.text}`);
  return answer.body;
}
