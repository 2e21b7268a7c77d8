// A live subscriber is woken after the immediates of the turn that stored its events: an HTTP
// request that turn sent on a kept-alive connection (the agent's next LLM request, right after it
// stored a tool's result) is written by undici from an immediate of its own, and goes out first.
import { randomUUID } from 'node:crypto';
import diagnostics from 'node:diagnostics_channel';
import http from 'node:http';
import path from 'node:path';
import type { AddressInfo } from 'node:net';
import { Agent, request } from 'undici';
import { afterEach, expect, it } from 'vitest';
import { FileEventLog } from '../../src/adapters/files/event-log/file-event-log.js';
import { tempDir } from '../support/agentd.js';

const closers: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  for (const close of closers.splice(0).reverse()) await close();
});

it("writes a request sent in the turn that stored an event before the event's subscriber is woken", async () => {
  const server = http.createServer((_request, response) => response.end('ok'));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  closers.push(() => new Promise((resolve) => server.close(resolve)));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/`;
  const agent = new Agent();
  closers.push(() => agent.close());
  // A first request leaves its connection open and idle, as between two LLM requests of a run.
  await (await request(url, { dispatcher: agent })).body.text();

  const dir = tempDir();
  const log = new FileEventLog({ conversationsDir: path.join(dir, 'conversations'), firehoseFile: path.join(dir, 'firehose') });
  closers.push(() => log.close());
  const id = randomUUID();
  const order: string[] = [];
  const sent = () => order.push('request written');
  diagnostics.subscribe('undici:client:sendHeaders', sent);
  closers.push(async () => diagnostics.unsubscribe('undici:client:sendHeaders', sent));
  const subscription = log.subscribe({ conversationId: id, after: 0 });
  const batches = subscription.batches();
  const delivered = batches.next().then(() => order.push('subscriber woken'));
  // Caught up (no history): waiting for live events.
  while (!subscription.live) await new Promise((resolve) => setImmediate(resolve));

  await log.append(id, { kind: 'message', source: 'user', role: 'user', content: 'a tool result' });
  const answered = request(url, { dispatcher: agent }).then((answer) => answer.body.text());
  await Promise.all([delivered, answered]);
  subscription.close();
  expect(order).toEqual(['request written', 'subscriber woken']);
});
