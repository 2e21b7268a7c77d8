/**
 * P10's client, in its own process as a real client is: it creates conversations, watches each
 * one's SSE stream, and sends a turn's message when the parent asks. The POST goes through the
 * global fetch (as the client SDK's does) and the stream through the tests' SSE reader; their
 * CPU is this process's, not the server's. Instants are CLOCK_MONOTONIC (`monotonicMs`), which
 * the parent shares.
 *
 * Messages from the parent: create → (created); turn → (turned); hop → (hopped); close. Any failure → (failed).
 */
import { connectSse, type SseConnection } from '../../test/support/sse-client.js';
import { monotonicMs } from '../support/stats.js';

export type TurnClientRequest =
  | { type: 'create'; url: string; headers: Record<string, string>; llm: Record<string, string>; workdir?: string }
  | { type: 'turn'; id: string; content: string }
  | { type: 'hop'; url: string; content: string }
  | { type: 'close'; id: string };

export type TurnClientReply =
  | { type: 'created'; id: string }
  | { type: 'turned'; postAt: number; acceptedAt: number; endAt: number; cpuMs: number }
  | { type: 'hopped'; ms: number }
  | { type: 'failed'; message: string };

interface Watched {
  url: string;
  headers: Record<string, string>;
  stream: SseConnection;
}

const conversations = new Map<string, Watched>();

async function create(request: Extract<TurnClientRequest, { type: 'create' }>): Promise<TurnClientReply> {
  const response = await fetch(`${request.url}/conversations`, {
    method: 'POST',
    headers: { ...request.headers, 'content-type': 'application/json' },
    body: JSON.stringify({ llm: request.llm, ...(request.workdir !== undefined && { workdir: request.workdir }) }),
  });
  if (response.status !== 201) throw new Error(`POST /conversations: ${response.status} ${await response.text()}`);
  const { id } = (await response.json()) as { id: string };
  const stream = await connectSse(`${request.url}/conversations/${id}/events/stream`, request.headers);
  conversations.set(id, { url: request.url, headers: request.headers, stream });
  return { type: 'created', id };
}

/** One message with `run: true`; resolves when the run's end arrives on the stream. */
async function turn(request: Extract<TurnClientRequest, { type: 'turn' }>): Promise<TurnClientReply> {
  const watched = conversations.get(request.id);
  if (!watched) throw new Error(`no conversation ${request.id}`);
  const endsBefore = runEnds(watched.stream.messages);
  const cpu = process.cpuUsage();
  const postAt = monotonicMs();
  const posted = await fetch(`${watched.url}/conversations/${request.id}/messages`, {
    method: 'POST',
    headers: { ...watched.headers, 'content-type': 'application/json' },
    body: JSON.stringify({ content: request.content, run: true }),
  });
  const acceptedAt = monotonicMs();
  if (posted.status !== 202) throw new Error(`POST /messages: ${posted.status} ${await posted.text()}`);
  await posted.arrayBuffer();
  await watched.stream.waitFor((messages) => runEnds(messages) > endsBefore, 30_000);
  const endAt = monotonicMs();
  const used = process.cpuUsage(cpu);
  return { type: 'turned', postAt, acceptedAt, endAt, cpuMs: (used.user + used.system) / 1000 };
}

/** The client's own share of a round trip: a POST like a turn's to a server that answers at once, and its answer read. */
async function hop(request: Extract<TurnClientRequest, { type: 'hop' }>): Promise<TurnClientReply> {
  const postAt = monotonicMs();
  const posted = await fetch(request.url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ content: request.content, run: true }) });
  await posted.arrayBuffer();
  return { type: 'hopped', ms: monotonicMs() - postAt };
}

function runEnds(messages: SseConnection['messages']): number {
  return messages.filter((message) => message.event === 'state_update' && !message.data.includes('"status":"running"')).length;
}

process.on('message', (request: TurnClientRequest) => {
  if (request.type === 'close') {
    conversations.get(request.id)?.stream.close();
    conversations.delete(request.id);
    return;
  }
  const work = request.type === 'create' ? create(request) : request.type === 'hop' ? hop(request) : turn(request);
  work.then(
    (reply) => process.send!(reply),
    (error: unknown) => process.send!({ type: 'failed', message: error instanceof Error ? error.message : String(error) } satisfies TurnClientReply),
  );
});
process.on('disconnect', () => process.exit(0));
