// The LLM fetch (src/adapters/undici-llm-fetch.ts) hands the SDK a standard Response; a successful
// event stream is read from undici's stream alone (answerBodyOf), so its Response has no body
// stream of its own. Every other answer keeps its body on the Response, for the SDK to read.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { answerBodyOf, llmFetch } from '../../src/adapters/llm/undici-llm-fetch.js';

let server: http.Server;
let base = '';

beforeAll(async () => {
  server = http.createServer((request, response) => {
    const [status, type] = request.url === '/stream' ? [200, 'text/event-stream; charset=utf-8'] : request.url === '/json' ? [200, 'application/json'] : [400, 'text/event-stream'];
    response.writeHead(status, { 'content-type': type });
    response.end(type.startsWith('text/event-stream') ? 'data: {"n":1}\n\ndata: [DONE]\n\n' : '{"n":1}');
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(async () => new Promise<void>((resolve) => server.close(() => resolve())));

async function text(stream: AsyncIterable<Buffer | string>): Promise<string> {
  let out = '';
  for await (const chunk of stream) out += chunk.toString();
  return out;
}

describe('the LLM fetch', () => {
  it('leaves a successful event stream to undici\'s stream alone, and every other body on the Response', async () => {
    const streamed = await llmFetch(`${base}/stream`, { method: 'POST', body: '{}' });
    expect(streamed.status).toBe(200);
    expect(streamed.body).toBeNull();
    expect(await text(answerBodyOf(streamed)!)).toBe('data: {"n":1}\n\ndata: [DONE]\n\n');

    const json = await llmFetch(`${base}/json`, { method: 'POST', body: '{}' });
    expect(json.body).not.toBeNull();
    expect(await json.json()).toEqual({ n: 1 });

    // An error is read by the SDK from the Response, whatever its type.
    const failed = await llmFetch(`${base}/error`, { method: 'POST', body: '{}' });
    expect(failed.status).toBe(400);
    expect(await failed.text()).toBe('data: {"n":1}\n\ndata: [DONE]\n\n');
  });
});
