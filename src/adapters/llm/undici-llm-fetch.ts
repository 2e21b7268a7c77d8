/**
 * The fetch the openai SDK sends LLM requests through, over undici's `request()` instead of the
 * WHATWG fetch. Node's fetch spends CPU on every request before any byte of the answer is read
 * (its Request and body streams, header validation, a copy of the body); a run pays that at every
 * step. This sends the SDK's text body as it is and hands the SDK a standard Response over
 * the answer's stream, so the SDK reads, parses and reports errors exactly as it does with fetch
 * (a streamed answer's events are read from undici's stream itself: answerBodyOf). What it
 * cannot send this way (a body that is not text, a `Request` object) and a redirect go through
 * Node's fetch, as before. Error bodies in other shapes are rewritten as the SDK reads them
 * (fetchWithReadableErrors).
 */
import type { Readable } from 'node:stream';
import { getGlobalDispatcher, request } from 'undici';

/** Statuses whose Response must have no body. */
const NULL_BODY = new Set([101, 103, 204, 205, 304]);
const REDIRECT = new Set([301, 302, 303, 307, 308]);

export async function llmFetch(input: string | URL | Request, init?: RequestInit): Promise<Response> {
  const body = init?.body;
  if (input instanceof Request || (body !== undefined && body !== null && typeof body !== 'string')) return fetchOnce(input, init);
  const headers: Record<string, string> = {};
  new Headers(init?.headers).forEach((value, name) => {
    headers[name] = value;
  });
  const answer = await request(input, {
    method: (init?.method ?? 'GET') as 'POST',
    headers,
    body: body ?? null,
    signal: init?.signal ?? null,
    // undici's global dispatcher: one keep-alive pool per origin, as fetch's (a test may route it, like a hosts file).
    dispatcher: getGlobalDispatcher(),
  });
  if (REDIRECT.has(answer.statusCode) && answer.headers.location !== undefined) {
    // LLM endpoints do not redirect; one that does gets the request again through fetch, which follows it.
    await answer.body.dump().catch(() => undefined);
    return fetch(input, init);
  }
  const responseHeaders = new Headers();
  for (const [name, value] of Object.entries(answer.headers)) {
    if (Array.isArray(value)) for (const item of value) responseHeaders.append(name, item);
    else if (value !== undefined) responseHeaders.append(name, value);
  }
  if (NULL_BODY.has(answer.statusCode)) {
    await answer.body.dump().catch(() => undefined);
    return new Response(null, { status: answer.statusCode, headers: responseHeaders });
  }
  // A streamed answer (2xx, event stream) is read from undici's stream alone (answerBodyOf): the SDK
  // reads no successful body itself, and wrapping it in a WHATWG stream costs CPU on every call.
  // Any other body stream is async-iterable: the Response reads it as its ReadableStream (only once read).
  const readHere = answer.statusCode >= 200 && answer.statusCode < 300 && isEventStream(answer.headers['content-type']);
  const response = new Response(readHere ? null : (answer.body as unknown as ReadableStream<Uint8Array>), { status: answer.statusCode, headers: responseHeaders });
  answerBodies.set(response, answer.body);
  return response;
}

function isEventStream(contentType: string | string[] | undefined): boolean {
  return typeof contentType === 'string' && /^\s*text\/event-stream\s*(;|$)/i.test(contentType);
}

/** undici's body stream behind each Response made here (see answerBodyOf). */
const answerBodies = new WeakMap<Response, Readable>();

/**
 * The body of an answer as undici's stream, for a reader that goes without the Response's
 * WHATWG stream (chat-stream-reader.ts); undefined for a Response not made here. Read one or
 * the other, never both: a successful event stream has only this one (its Response's body is null).
 */
export function answerBodyOf(response: Response): Readable | undefined {
  return answerBodies.get(response);
}

/**
 * fetch without a copy of the request body: with the default redirect mode fetch clones every
 * request (a tee of its body) in case a redirect needs it again. A redirect is followed by
 * sending the request again (only a text body can be sent twice).
 */
async function fetchOnce(input: string | URL | Request, init?: RequestInit): Promise<Response> {
  try {
    return await fetch(input, { ...init, redirect: 'error', window: null });
  } catch (error) {
    const redirected = error instanceof TypeError && (error.cause as Error | undefined)?.message === 'unexpected redirect';
    if (!redirected || (init?.body !== undefined && init.body !== null && typeof init.body !== 'string')) throw error;
    return fetch(input, init);
  }
}

/**
 * The SDK reads an error body's `error` member only, so two common shapes came out as
 * "400 status code (no body)": Gemini's array (`[{"error": {...}}]`) and vLLM's and TGI's
 * top-level `{"object": "error", "message": ...}`. This fetch rewrites both into
 * `{"error": {...}}` before the SDK sees them; every other response passes untouched.
 */
export async function fetchWithReadableErrors(input: string | URL | Request, init?: RequestInit): Promise<Response> {
  const response = await llmFetch(input, init);
  if (response.ok || !/json/i.test(response.headers.get('content-type') ?? '')) return response;
  const text = await response.text();
  const headers = new Headers(response.headers);
  headers.delete('content-length'); // the body was decoded and may have been rewritten
  headers.delete('content-encoding');
  return new Response(normalizeErrorBody(text) ?? text, { status: response.status, statusText: response.statusText, headers });
}

/** `{"error": {...}}` for an error body in another shape; undefined when it already is one or is not JSON. */
export function normalizeErrorBody(text: string): string | undefined {
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    return undefined;
  }
  const first: unknown = Array.isArray(body) ? body[0] : body;
  if (!first || typeof first !== 'object') return undefined;
  const record = first as { error?: unknown; message?: unknown; status?: unknown };
  if (!Array.isArray(body) && record.error && typeof record.error === 'object') return undefined;
  const inner = (record.error && typeof record.error === 'object' ? record.error : record) as { message?: unknown; status?: unknown; code?: unknown; type?: unknown };
  if (typeof inner.message !== 'string') return undefined;
  // Gemini's status ("INVALID_ARGUMENT") says more than its numeric code.
  const message = typeof inner.status === 'string' ? `${inner.status}: ${inner.message}` : inner.message;
  return JSON.stringify({ error: { ...inner, message } });
}
