/**
 * The fetch the openai SDK sends LLM requests through, over undici's `request()` instead of the
 * WHATWG fetch. Node's fetch costs ~1 ms of CPU per request before any byte of the answer is
 * read (its Request and body streams, header validation, a copy of the body); a run pays that at
 * every step. This sends the SDK's text body as it is and hands the SDK a standard Response over
 * the answer's stream, so the SDK reads, parses and reports errors exactly as it does with fetch.
 * What it cannot send this way (a body that is not text, a `Request` object) and a redirect go
 * through Node's fetch, as before.
 */
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
  // The body stream is async-iterable: the Response reads it as its ReadableStream.
  return new Response(answer.body as unknown as ReadableStream<Uint8Array>, { status: answer.statusCode, headers: responseHeaders });
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
