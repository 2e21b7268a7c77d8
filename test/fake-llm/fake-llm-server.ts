/**
 * A scripted OpenAI-compatible Chat Completions server on 127.0.0.1 for tests (the ScriptedModel
 * idea of openai-agents-js, over real HTTP). It answers from a queue of turns, records every
 * request and rejects (400 + a recorded violation) what a strict provider would reject.
 *
 *   const fake = await startFakeLlm([{ toolCalls: [{ name: 'bash', arguments: { command: 'ls' } }] }, { text: 'All done.' }]);
 *   // settings: { model: 'fake', base_url: fake.url, api_key: 'k' }
 *   expect(fake.violations).toEqual([]);
 *   await fake.close();
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { completionBody, streamChunks, type ResponseShape } from './chat-response-chunks.js';
import type { ChatRequestBody, FakeFaultTurn, FakeResponseTurn, FakeStaticTurn, FakeTurn, FakeTurnFn, RecordedRequest } from './fake-llm-types.js';
import { PROVIDER_PROFILES, type ProviderName, type ProviderProfile } from './provider-profiles.js';
import { validateChatRequest } from './validate-chat-request.js';
import { newProtocolState, type FakeProtocol } from './fake-protocol.js';
import { FAKE_RESPONSES_API } from './fake-responses-api.js';
import { FAKE_ANTHROPIC_API } from './fake-anthropic-api.js';

/** The wire protocols the fake speaks besides chat completions (option `protocol`). */
const FAKE_PROTOCOLS: Record<'responses' | 'anthropic', FakeProtocol> = { responses: FAKE_RESPONSES_API, anthropic: FAKE_ANTHROPIC_API };
import { unknownFieldProblems } from './strict-fields.js';

export type * from './fake-llm-types.js';
export type { ProviderName } from './provider-profiles.js';

/**
 * A script of its own for the requests that match: a subagent's, told apart by a marker in its
 * system prompt or its first user message (a string: contained in either; a function: any test).
 */
export interface FakeRoute {
  when: string | ((request: RecordedRequest) => boolean);
  script: FakeTurn[];
  /** Answer once this route's script is exhausted (default: the main script's `whenExhausted`). */
  whenExhausted?: FakeTurn;
}

export interface FakeLlmOptions {
  script?: FakeTurn[];
  /** Scripts for requests that match a marker (first matching route wins); the rest use `script`. */
  routes?: FakeRoute[];
  /** Reject requests whose first message is not `system` (default true). */
  requireSystemFirst?: boolean;
  /** Answer once the script is exhausted (default `{ text: 'done' }`). */
  whenExhausted?: FakeTurn;
  /** Characters per content delta (default 4). */
  textChunkSize?: number;
  /** Characters per tool-call arguments delta (default 5). */
  argumentsChunkSize?: number;
  /** When set, requests must carry it (`Authorization: Bearer` or `api-key`), else 401. */
  apiKey?: string;
  /** Behave like this provider (provider-profiles.ts): what it rejects, how it answers. */
  provider?: ProviderName;
  /** The profile's context window in tokens, changed (Ollama: what OLLAMA_CONTEXT_LENGTH sets). */
  contextTokens?: number;
  /**
   * Answer agentd's condensation requests (isSummaryRequest) apart from the script: `true` with
   * `SUMMARY of events #a–#b: <first words of each>`, or with the turn a function returns. They are
   * recorded in `requests` and `summaryRequests` and take no turn from the queue.
   */
  summarizer?: true | FakeTurnFn;
  /** Speak OpenAI's Responses API or Anthropic's Messages API instead of chat completions (fake-responses-api.ts, fake-anthropic-api.ts). */
  protocol?: 'responses' | 'anthropic';
  /** Refuse message and tool-call fields a plain Chat Completions server does not know (strict-fields.ts). */
  strictFields?: boolean;
}

/** agentd's condensation request: its system prompt (src/core/agent/condense-prompt.md) opens with these words. */
export function isSummaryRequest(body: ChatRequestBody): boolean {
  const first = body.messages?.[0];
  return first?.role === 'system' && typeof first.content === 'string' && first.content.startsWith("You are condensing the history of a coding agent's conversation");
}

/** The summary the fake writes: the range of event numbers it was given, and the first words of each message. */
export function fakeSummary(body: ChatRequestBody): string {
  const text = String(body.messages?.[1]?.content ?? '');
  const seqs = [...text.matchAll(/\(event #(\d+)\)/g)].map((match) => Number(match[1]));
  const firstWords = [...text.matchAll(/^### [^\n]*\n([^\n]{0,40})/gm)].map((match) => match[1]!.trim());
  return `SUMMARY of events #${Math.min(...seqs)}–#${Math.max(...seqs)}: ${firstWords.join(' | ')}`;
}

export interface FakeLlm {
  /** base_url for the client: `http://127.0.0.1:<port>/v1`. */
  url: string;
  /** `http://127.0.0.1:<port>`: base_url for Azure (`/openai/deployments/...`). */
  origin: string;
  /** Every chat request received, in order (including rejected ones). */
  requests: RecordedRequest[];
  /** Every violation of every request, as `request #<index>: <problem>`. Assert it is empty. */
  violations: string[];
  /** The condensation requests answered by `summarizer`. */
  summaryRequests: RecordedRequest[];
  push(...turns: FakeTurn[]): void;
  setScript(turns: FakeTurn[]): void;
  /** Adds a route (see FakeRoute), tried after the ones given before. */
  route(route: FakeRoute): void;
  /** Turns left in the script. */
  remaining(): number;
  close(): Promise<void>;
}

/** `/v1/chat/completions` and the prefixes real endpoints put before it (`/api/v1`, `/v1beta/openai`, none). */
const CHAT_PATH = /^(?:\/[\w.-]+)*\/chat\/completions$/;
const AZURE_PATH = /^\/openai\/deployments\/([^/]+)\/chat\/completions$/;

export async function startFakeLlm(scriptOrOptions: FakeTurn[] | FakeLlmOptions = {}): Promise<FakeLlm> {
  const options: FakeLlmOptions = Array.isArray(scriptOrOptions) ? { script: scriptOrOptions } : scriptOrOptions;
  let queue: FakeTurn[] = [...(options.script ?? [])];
  const routes: { route: FakeRoute; queue: FakeTurn[] }[] = (options.routes ?? []).map((route) => ({ route, queue: [...route.script] }));
  const requests: RecordedRequest[] = [];
  const summaryRequests: RecordedRequest[] = [];
  const violations: string[] = [];
  let callCounter = 0;
  const profile: ProviderProfile = {
    ...(options.provider ? PROVIDER_PROFILES[options.provider] : {}),
    ...(options.contextTokens !== undefined ? { contextTokens: options.contextTokens } : {}),
  };
  /** Tool calls this fake made, with the fields it attached to them (Gemini's thought signatures). */
  const issued = new Map<string, Record<string, unknown>>();
  const protocol = options.protocol ? FAKE_PROTOCOLS[options.protocol] : null;
  const protocolState = newProtocolState();

  const server = createServer((req, res) => {
    handle(req, res).catch((err: unknown) => {
      if (!res.headersSent) sendJson(res, 500, { error: { message: `fake LLM failure: ${String(err)}`, type: 'server_error' } });
      else res.destroy();
    });
  });

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = new URL(req.url ?? '/', 'http://127.0.0.1');
    const azure = AZURE_PATH.exec(url.pathname);
    if (protocol) return handleProtocol(req, res, url, protocol);
    if (req.method !== 'POST' || (!azure && !CHAT_PATH.test(url.pathname))) {
      sendJson(res, 404, { error: { message: `no route ${req.method} ${url.pathname}`, type: 'invalid_request_error' } });
      return;
    }
    const raw = await readBody(req);
    let body: unknown;
    try {
      body = JSON.parse(raw);
    } catch {
      body = undefined;
    }
    const query = Object.fromEntries(url.searchParams);
    const problems = validateChatRequest(body, { requireSystemFirst: options.requireSystemFirst ?? true, azure: azure !== null, query });
    const asSent = (typeof body === 'object' && body !== null ? body : {}) as ChatRequestBody;
    const recorded: RecordedRequest = {
      index: requests.length,
      method: req.method,
      path: url.pathname,
      query,
      headers: req.headers,
      body: asSent,
      deployment: azure?.[1] ? decodeURIComponent(azure[1]) : null,
      violations: problems,
    };
    if (problems.length === 0 && profile.reject) problems.push(...profile.reject(recorded, issued));
    if (problems.length === 0 && options.strictFields) problems.push(...unknownFieldProblems(asSent));
    requests.push(recorded);
    if (options.apiKey !== undefined && !carriesKey(req, options.apiKey)) {
      sendJson(res, 401, { error: { message: 'Incorrect API key provided.', type: 'invalid_request_error', code: 'invalid_api_key' } });
      return;
    }
    if (problems.length > 0) {
      violations.push(...problems.map((problem) => `request #${recorded.index}: ${problem}`));
      const message = problems.join('; ');
      sendJson(res, 400, profile.errorBody?.(message) ?? { error: { message, type: 'invalid_request_error', param: null, code: null } });
      return;
    }
    if (options.summarizer && isSummaryRequest(recorded.body)) {
      summaryRequests.push(recorded);
      const turn = options.summarizer === true ? { text: fakeSummary(recorded.body) } : await options.summarizer(recorded);
      await answer({ turn, recorded, res });
      return;
    }
    const routed = routes.find(({ route }) => routeMatches(route, recorded));
    const next = routed ? (routed.queue.shift() ?? routed.route.whenExhausted ?? options.whenExhausted ?? { text: 'done' }) : (queue.shift() ?? options.whenExhausted ?? { text: 'done' });
    const turn: FakeStaticTurn = typeof next === 'function' ? await next(recorded) : next;
    await answer({ turn, recorded, res });
  }

  /** A request of another protocol: the same script, queue, summarizer and faults; its own checks and answers. */
  async function handleProtocol(req: IncomingMessage, res: ServerResponse, url: URL, speaking: FakeProtocol): Promise<void> {
    if (req.method !== 'POST' || !speaking.path.test(url.pathname)) {
      sendJson(res, 404, speaking.errorBody(`no route ${req.method} ${url.pathname}`));
      return;
    }
    const raw = await readBody(req);
    let body: unknown;
    try {
      body = JSON.parse(raw);
    } catch {
      body = undefined;
    }
    const problems = speaking.validate(body, req.headers, protocolState);
    const asSent = (typeof body === 'object' && body !== null ? body : {}) as ChatRequestBody;
    const recorded: RecordedRequest = { index: requests.length, method: 'POST', path: url.pathname, query: Object.fromEntries(url.searchParams), headers: req.headers, body: asSent, deployment: null, violations: problems };
    requests.push(recorded);
    if (options.apiKey !== undefined && !speaking.carriesKey(req.headers, options.apiKey)) {
      sendJson(res, 401, speaking.errorBody('invalid x-api-key'));
      return;
    }
    if (problems.length > 0) {
      violations.push(...problems.map((problem) => `request #${recorded.index}: ${problem}`));
      sendJson(res, 400, speaking.errorBody(problems.join('; ')));
      return;
    }
    const view = speaking.chatView(asSent);
    let next: FakeTurn;
    if (options.summarizer && isSummaryRequest(view)) {
      summaryRequests.push(recorded);
      next = options.summarizer === true ? { text: fakeSummary(view) } : options.summarizer;
    } else next = queue.shift() ?? options.whenExhausted ?? { text: 'done' };
    const turn: FakeStaticTurn = typeof next === 'function' ? await next(recorded) : next;
    if ('hang' in turn) return waitForClose(res);
    if ('delayMs' in turn && turn.delayMs) await delay(turn.delayMs, res);
    if (res.destroyed) return;
    if ('disconnect' in turn) return void res.socket?.destroy();
    if ('status' in turn) return sendFault(res, turn);
    if ('chunks' in turn) throw new Error('a recorded chat-completions stream ({ chunks }) cannot be replayed by the fake speaking another protocol');
    const answered = speaking.answer({ turn, body: asSent, state: protocolState, index: recorded.index, chunkSize: options.textChunkSize ?? 4 });
    if (answered.json !== undefined) return sendJson(res, 200, answered.json);
    await sendNamedEvents(res, turn, answered.events ?? []);
  }

  async function answer(args: { turn: FakeStaticTurn; recorded: RecordedRequest; res: ServerResponse }): Promise<void> {
    const { turn, recorded, res } = args;
    if ('hang' in turn) return waitForClose(res);
    if ('delayMs' in turn && turn.delayMs) await delay(turn.delayMs, res);
    if (res.destroyed) return;
    if ('disconnect' in turn) return void res.socket?.destroy();
    if ('status' in turn) return sendFault(res, turn);
    if ('chunks' in turn) return sendStream(res, {}, turn.chunks, profile.sseComments ?? []);
    const toolCallIds = (turn.toolCalls ?? []).map((call) => call.id ?? `call_fake_${++callCounter}`);
    const toolCallExtras = toolCallIds.map((id) => profile.toolCallExtra?.(id) ?? {});
    toolCallIds.forEach((id, i) => issued.set(id, toolCallExtras[i]!));
    const shape: ResponseShape = {
      turn,
      request: recorded.body,
      profile,
      toolCallIds,
      toolCallExtras,
      responseId: `chatcmpl-fake-${recorded.index}`,
      textChunkSize: options.textChunkSize ?? 4,
      argumentsChunkSize: options.argumentsChunkSize ?? 5,
    };
    if (recorded.body.stream !== true) return sendJson(res, 200, completionBody(shape));
    await sendStream(res, turn, streamChunks(shape), profile.sseComments ?? []);
  }

  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  const origin = `http://127.0.0.1:${port}`;
  return {
    url: `${origin}/v1`,
    origin,
    requests,
    violations,
    summaryRequests,
    push: (...turns) => void queue.push(...turns),
    setScript: (turns) => void (queue = [...turns]),
    route: (route) => void routes.push({ route, queue: [...route.script] }),
    remaining: () => queue.length,
    close: () =>
      new Promise<void>((resolve, reject) => {
        server.close((err) => (err ? reject(err) : resolve()));
        server.closeAllConnections();
      }),
  };
}

function routeMatches(route: FakeRoute, request: RecordedRequest): boolean {
  if (typeof route.when === 'function') return route.when(request);
  const messages = request.body.messages ?? [];
  const text = (message: { content?: unknown } | undefined) => (typeof message?.content === 'string' ? message.content : JSON.stringify(message?.content ?? ''));
  const system = messages.find((message) => message.role === 'system');
  const firstUser = messages.find((message) => message.role === 'user');
  return text(system).includes(route.when) || text(firstUser).includes(route.when);
}

async function sendStream(res: ServerResponse, turn: FakeResponseTurn, chunks: unknown[], comments: string[]): Promise<void> {
  res.writeHead(200, { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-cache', connection: 'keep-alive' });
  res.flushHeaders();
  for (const comment of comments) await write(res, `${comment}\n\n`);
  for (const [i, chunk] of chunks.entries()) {
    if (turn.dropAfterChunks !== undefined && i >= turn.dropAfterChunks) return void res.socket?.destroy();
    if (turn.hangAfterChunks !== undefined && i >= turn.hangAfterChunks) return waitForClose(res);
    if (i > 0 && turn.chunkDelayMs) await delay(turn.chunkDelayMs, res);
    if (res.destroyed) return;
    await write(res, `data: ${JSON.stringify(chunk)}\n\n`);
  }
  if (turn.dropAfterChunks !== undefined && turn.dropAfterChunks >= chunks.length) return void res.socket?.destroy();
  res.end('data: [DONE]\n\n');
}

/** Server-sent events with their names, as the Responses and Messages APIs send them (no [DONE]). */
async function sendNamedEvents(res: ServerResponse, turn: FakeResponseTurn, events: Array<{ event: string; data: unknown }>): Promise<void> {
  res.writeHead(200, { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-cache', connection: 'keep-alive' });
  res.flushHeaders();
  for (const [i, event] of events.entries()) {
    if (turn.dropAfterChunks !== undefined && i >= turn.dropAfterChunks) return void res.socket?.destroy();
    if (turn.hangAfterChunks !== undefined && i >= turn.hangAfterChunks) return waitForClose(res);
    if (i > 0 && turn.chunkDelayMs) await delay(turn.chunkDelayMs, res);
    if (res.destroyed) return;
    await write(res, `event: ${event.event}\ndata: ${JSON.stringify(event.data)}\n\n`);
  }
  res.end();
}

function sendFault(res: ServerResponse, turn: FakeFaultTurn): void {
  const headers: Record<string, string> = { ...turn.headers };
  if (turn.retryAfter !== undefined) headers['retry-after'] = String(turn.retryAfter);
  const body = turn.body ?? {
    error: { message: `Scripted fault ${turn.status}`, type: turn.status >= 500 ? 'server_error' : 'invalid_request_error', code: null },
  };
  sendJson(res, turn.status, body, headers);
}

function sendJson(res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  const text = typeof body === 'string' ? body : JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text), ...headers });
  res.end(text);
}

function carriesKey(req: IncomingMessage, key: string): boolean {
  return req.headers.authorization === `Bearer ${key}` || req.headers['api-key'] === key;
}

async function readBody(req: IncomingMessage): Promise<string> {
  const parts: Buffer[] = [];
  for await (const part of req) parts.push(part as Buffer);
  return Buffer.concat(parts).toString('utf8');
}

function write(res: ServerResponse, text: string): Promise<void> {
  return new Promise((resolve) => res.write(text, () => resolve()));
}

/** Resolves once the client is gone (abort) or the fake closes its connections. */
function waitForClose(res: ServerResponse): Promise<void> {
  return new Promise((resolve) => (res.destroyed || res.closed ? resolve() : res.once('close', () => resolve())));
}

/** Waits `ms`, or less if the client goes away first. */
function delay(ms: number, res: ServerResponse): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(done, ms);
    res.once('close', done);
    function done(): void {
      clearTimeout(timer);
      res.off('close', done);
      resolve();
    }
  });
}
