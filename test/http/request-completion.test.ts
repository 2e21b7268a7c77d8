/**
 * One request line and one count in the request metrics for every request that reaches a route
 * (or the 404 handler), written when its response has finished (request-completion.ts). Also for
 * answers given in an onRequest hook (401).
 */
import { Writable } from 'node:stream';
import { afterEach, describe, expect, it } from 'vitest';
import { startServer, type TestServer } from '../support/agentd.js';

describe('a finished request', () => {
  let server: TestServer | undefined;
  afterEach(async () => {
    await server?.close();
    server = undefined;
  });

  it('is logged once and counted once, with its route and status', async () => {
    const lines: Record<string, unknown>[] = [];
    const logStream = new Writable({
      write(chunk, _encoding, done) {
        for (const line of String(chunk).split('\n').filter(Boolean)) lines.push(JSON.parse(line));
        done();
      },
    });
    server = await startServer({ logStream });
    const { url, auth } = server;
    const created = await fetch(`${url}/conversations`, { method: 'POST', headers: { ...auth, 'content-type': 'application/json' }, body: '{}' });
    const { id } = (await created.json()) as { id: string };
    const answers = [
      await fetch(`${url}/alive`),
      await fetch(`${url}/conversations/${id}`, { headers: auth }),
      await fetch(`${url}/conversations/${id}`),
      await fetch(`${url}/no-such-route`, { headers: auth }),
      await fetch(`${url}/conversations/not-a-uuid`, { headers: auth }),
    ];
    expect(answers.map((answer) => answer.status)).toEqual([200, 200, 401, 404, 400]);
    const completedLines = () => lines.filter((line) => line.msg === 'request completed');
    const seen = completedLines().map((line) => [line.method, line.route, line.status, line.reqId]);
    const ids = [created, ...answers].map((answer) => answer.headers.get('x-request-id'));
    expect(seen).toEqual([
      ['POST', '/conversations', 201, ids[0]],
      ['GET', '/alive', 200, ids[1]],
      ['GET', '/conversations/:id', 200, ids[2]],
      ['GET', '/conversations/:id', 401, ids[3]],
      ['GET', 'unmatched', 404, ids[4]],
      ['GET', '/conversations/:id', 400, ids[5]],
    ]);
    expect(completedLines()[2]).toMatchObject({ conversation_id: id, url: `/conversations/${id}`, ip: '127.0.0.1' });
    expect(typeof completedLines()[2]!.ms).toBe('number');

    const metrics = await (await fetch(`${url}/metrics`, { headers: auth })).text();
    expect(metrics).toContain('agentd_http_requests_total{method="GET",route="/alive",status="200"} 1\n');
    expect(metrics).toContain('agentd_http_requests_total{method="GET",route="/conversations/:id",status="200"} 1\n');
    expect(metrics).toContain('agentd_http_requests_total{method="GET",route="/conversations/:id",status="401"} 1\n');
    expect(metrics).toContain('agentd_http_requests_total{method="GET",route="unmatched",status="404"} 1\n');
    expect(metrics).toMatch(/agentd_http_request_duration_seconds_count\{method="GET",route="\/alive"\} 1\n/);
  });
});
