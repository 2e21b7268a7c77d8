/**
 * What a fake of another wire protocol than chat completions provides to the fake LLM server
 * (fake-llm-server.ts, option `protocol`): its path, its strict validation, how a scripted turn
 * is answered (server-sent events with an `event:` name, or one JSON body) and its error shape.
 */
import { createHmac } from 'node:crypto';
import type { IncomingHttpHeaders } from 'node:http';
import type { ChatRequestBody, FakeResponseTurn } from './fake-llm-types.js';

/** A scripted answer in a protocol that has more to say than chat: Anthropic's redacted thinking. */
export interface FakeProtocolTurn extends FakeResponseTurn {
  /** Anthropic: a `redacted_thinking` block (its `data` is opaque) before the answer. */
  redactedThinking?: boolean;
  /** Streaming: after the opening event, the protocol's own error event (Anthropic `error` overloaded, Responses `response.failed`) ends the stream. */
  failMidStream?: boolean;
}

/** What a fake remembers of its own answers, to check they come back unaltered. */
export interface ProtocolState {
  /** Opaque payloads the fake issued (signatures, encrypted items), by what identifies them. */
  issued: Map<string, unknown>;
  /** Tool call ids the fake issued with reasoning before them. */
  callsAfterReasoning: Set<string>;
  /** The prompt prefix (system + tools) of the previous request, for cache usage. */
  cachedPrefix: string | null;
  callCounter: number;
}

export interface ProtocolAnswer {
  /** Streamed: each event with its name; else one JSON body. */
  events?: Array<{ event: string; data: unknown }>;
  json?: unknown;
}

export interface FakeProtocol {
  path: RegExp;
  /** Whether the request carries the key as this protocol sends it. */
  carriesKey(headers: IncomingHttpHeaders, key: string): boolean;
  validate(body: unknown, headers: IncomingHttpHeaders, state: ProtocolState): string[];
  /** The request as chat messages (system, then the first user text), for the summarizer and routes. */
  chatView(body: Record<string, unknown>): ChatRequestBody;
  errorBody(message: string): unknown;
  answer(args: { turn: FakeProtocolTurn; body: Record<string, unknown>; state: ProtocolState; index: number; chunkSize: number }): ProtocolAnswer;
}

const SECRET = 'fake-llm-signing-key';

/** What the fake signs its opaque payloads with: an altered text no longer matches. */
export function sign(kind: string, text: string): string {
  return Buffer.from(`${kind}:${createHmac('sha256', SECRET).update(`${kind}\0${text}`).digest('hex')}`).toString('base64');
}

export function split(text: string, size: number): string[] {
  const pieces: string[] = [];
  for (let at = 0; at < text.length; at += size) pieces.push(text.slice(at, at + size));
  return pieces;
}

export function argumentsText(args: Record<string, unknown> | string | undefined): string {
  return typeof args === 'string' ? args : JSON.stringify(args ?? {});
}

/** About four characters a token, as the chat fake estimates. */
export function tokensOf(value: unknown): number {
  const text = typeof value === 'string' ? value : JSON.stringify(value ?? '');
  return Math.max(1, Math.ceil(text.length / 4));
}

export function newProtocolState(): ProtocolState {
  return { issued: new Map(), callsAfterReasoning: new Set(), cachedPrefix: null, callCounter: 0 };
}
