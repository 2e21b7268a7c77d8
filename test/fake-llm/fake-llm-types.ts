import type { IncomingHttpHeaders } from 'node:http';

/** A tool call the fake model makes. `arguments` objects are sent as JSON text. */
export interface FakeToolCall {
  name: string;
  arguments?: Record<string, unknown> | string;
  /** Default: a fresh `call_fake_<n>`. */
  id?: string;
}

export interface FakeUsage {
  prompt_tokens: number;
  completion_tokens: number;
}

/** An assistant answer: text and/or tool calls. */
export interface FakeResponseTurn {
  text?: string;
  toolCalls?: FakeToolCall[];
  /** Reported usage. Default: estimated from sizes (~4 characters a token). `null`: none sent. */
  usage?: FakeUsage | null;
  /** Default `tool_calls` when there are tool calls, else `stop`. */
  finishReason?: string;
  /** Streaming: no chunk carries a finish reason (a stream broken before its end, closed cleanly). */
  omitFinishReason?: boolean;
  /** The model declines: OpenAI's `refusal` field instead of content. */
  refusal?: string;
  /** Reasoning text, in the profile's reasoning field (vLLM `reasoning_content`, OpenRouter `reasoning`). */
  reasoning?: string;
  /** Wait before answering (the answer is skipped if the client leaves meanwhile). */
  delayMs?: number;
  /** Streaming: pause between SSE chunks. */
  chunkDelayMs?: number;
  /** Streaming: destroy the connection after this many chunks (a mid-stream failure). */
  dropAfterChunks?: number;
  /** Streaming: stop after this many chunks and hang until the client goes away. */
  hangAfterChunks?: number;
}

/** An HTTP error answer, e.g. `{ status: 429, retryAfter: 1 }`. */
export interface FakeFaultTurn {
  status: number;
  /** JSON body; default an OpenAI-style `{ error: { message, type, code } }`. */
  body?: unknown;
  /** Sent as the `retry-after` header (seconds or an HTTP date). */
  retryAfter?: number | string;
  headers?: Record<string, string>;
  delayMs?: number;
}

/** Never answers: holds the request open until the client aborts (or the fake closes). */
export interface FakeHangTurn {
  hang: true;
}

/** Closes the connection without answering (a connection error on the client side). */
export interface FakeDisconnectTurn {
  disconnect: true;
  delayMs?: number;
}

/** Streams these chunks as they are (a recorded answer: see recordings.ts). */
export interface FakeReplayTurn {
  chunks: unknown[];
}

export type FakeStaticTurn = FakeResponseTurn | FakeFaultTurn | FakeHangTurn | FakeDisconnectTurn | FakeReplayTurn;

/** A dynamic turn: decides from the request it answers. */
export type FakeTurnFn = (request: RecordedRequest) => FakeStaticTurn | Promise<FakeStaticTurn>;

export type FakeTurn = FakeStaticTurn | FakeTurnFn;

export interface FakeChatMessage {
  role: string;
  content?: unknown;
  tool_calls?: Array<{ id: string; type: string; function: { name: string; arguments: string } }>;
  tool_call_id?: string;
  [key: string]: unknown;
}

export interface FakeChatTool {
  type: string;
  function: { name: string; description?: string; parameters?: Record<string, unknown> };
}

/** The parsed JSON body of a chat completion request, as loosely typed as a server sees it. */
export interface ChatRequestBody {
  model?: string;
  messages?: FakeChatMessage[];
  tools?: FakeChatTool[];
  stream?: boolean;
  stream_options?: { include_usage?: boolean };
  [key: string]: unknown;
}

export interface RecordedRequest {
  /** 0-based position among all requests the fake received. */
  index: number;
  method: string;
  path: string;
  query: Record<string, string>;
  headers: IncomingHttpHeaders;
  body: ChatRequestBody;
  /** Azure path form: the `{name}` of `/openai/deployments/{name}/chat/completions`. */
  deployment: string | null;
  /** What a strict provider would reject in this request (answered 400 when not empty). */
  violations: string[];
}
