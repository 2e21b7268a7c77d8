import { PassThrough } from 'node:stream';
import { APIError } from 'openai';
import { Stream } from 'openai/streaming';
import { describe, expect, it } from 'vitest';
import { EventDecoder, readChatChunks } from '../../src/adapters/llm/chat-stream-reader.js';

/**
 * readChatChunks reads an answer's events itself instead of through the openai SDK's Stream: it
 * must give the same chunks and the same errors for the same bytes, however they are cut.
 */

const chunk = (n: number, extra = '') => `{"id":"c${n}","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"é${n}${extra}"}}]}`;

const STREAMS: Record<string, string> = {
  plain: `data: ${chunk(1)}\n\ndata: ${chunk(2)}\n\ndata: [DONE]\n\n`,
  'CRLF line ends': `data: ${chunk(1)}\r\n\r\ndata: ${chunk(2)}\r\n\r\ndata: [DONE]\r\n\r\n`,
  'CR line ends': `data: ${chunk(1)}\r\rdata: ${chunk(2)}\r\r`,
  'comments, other fields, no space after the colon': `: keep-alive\n\nid: 7\nretry: 10\ndata:${chunk(1)}\n\n:another\ndata: ${chunk(2)}\n\n`,
  'data over several lines': `data: {"id":"c1","choices":\ndata: [{"index":0,"delta":{"content":"x"}}]}\n\n`,
  'what follows [DONE] is ignored': `data: ${chunk(1)}\n\ndata: [DONE]\n\ndata: not json at all\n\n`,
  'an error in the data mid-stream': `data: ${chunk(1)}\n\ndata: {"error":{"message":"overloaded","type":"server_error","code":"529"}}\n\n`,
  'data that is not JSON': `data: ${chunk(1)}\n\ndata: {"id":\n\n`,
  'a named event': `event: message\ndata: ${chunk(1)}\n\nevent: thread.run.created\ndata: {"id":"run_1"}\n\n`,
  'the last event without its blank line': `data: ${chunk(1)}\n\ndata: ${chunk(2)}\n`,
  'the last line without its end': `data: ${chunk(1)}\n\ndata: ${chunk(2)}`,
  'empty events and an event name alone': `\n\n\nevent: ping\n\ndata: ${chunk(3)}\n\n`,
  'a long line': `data: ${chunk(1, 'x'.repeat(70_000))}\n\n`,
};

type Outcome = { chunks: unknown[]; error?: { name: string; message: string } };

async function collect(iterable: AsyncIterable<unknown>): Promise<Outcome> {
  const chunks: unknown[] = [];
  try {
    for await (const item of iterable) chunks.push(item);
  } catch (error) {
    return { chunks, error: { name: (error as Error).constructor.name, message: (error as Error).message } };
  }
  return { chunks };
}

/** The bytes of `text` cut into pieces at the given byte offsets (a cut may split a character). */
function pieces(text: string, cuts: number[]): Buffer[] {
  const bytes = Buffer.from(text);
  const at = [0, ...cuts.filter((cut) => cut > 0 && cut < bytes.length).sort((a, b) => a - b), bytes.length];
  return at.slice(1).map((end, i) => bytes.subarray(at[i], end));
}

function sdkRead(parts: Buffer[]): Promise<Outcome> {
  const body = new ReadableStream<Uint8Array>({
    start(controller) {
      for (const part of parts) controller.enqueue(new Uint8Array(part));
      controller.close();
    },
  });
  const quiet = { error: () => {}, warn: () => {}, info: () => {}, debug: () => {} };
  return collect(Stream.fromSSEResponse(new Response(body), new AbortController(), { logger: quiet, logLevel: 'off' } as never));
}

function ownRead(parts: Buffer[]): Promise<Outcome> {
  const body = new PassThrough();
  for (const part of parts) body.write(part);
  body.end();
  return collect(readChatChunks({ body, signal: new AbortController().signal, apiError: (error) => new APIError(undefined, error as object, undefined, new Headers()) }));
}

describe('readChatChunks', () => {
  for (const [name, text] of Object.entries(STREAMS)) {
    it(`reads as the SDK does: ${name}`, async () => {
      const length = Buffer.byteLength(text);
      // Whole, byte by byte near the line ends, and cut at pseudo-random places (the same each run).
      const cutSets: number[][] = [[], Array.from({ length: Math.min(length, 400) }, (_, i) => i + 1)];
      let seed = 7;
      for (let i = 0; i < 20; i++) {
        cutSets.push(Array.from({ length: 1 + (i % 6) }, () => ((seed = (seed * 1103515245 + 12345) % 2 ** 31), seed % length)));
      }
      const expected = await sdkRead(pieces(text, []));
      for (const cuts of cutSets) {
        expect(await sdkRead(pieces(text, cuts))).toEqual(expected);
        expect(await ownRead(pieces(text, cuts))).toEqual(expected);
      }
    });
  }

  it('gives the error in the data as the SDK\'s APIError, which the client classifies', async () => {
    const outcome = await ownRead(pieces(STREAMS['an error in the data mid-stream']!, []));
    expect(outcome.chunks).toHaveLength(1);
    expect(outcome.error).toEqual({ name: 'APIError', message: 'overloaded' });
  });

  it('ends quietly when the caller aborts, and destroys the body it did not finish', async () => {
    const body = new PassThrough();
    const controller = new AbortController();
    body.write(`data: ${chunk(1)}\n\n`);
    const seen: unknown[] = [];
    const reading = (async () => {
      for await (const item of readChatChunks({ body, signal: controller.signal, apiError: (error) => new Error(String(error)) })) {
        seen.push(item);
        controller.abort();
        body.destroy(Object.assign(new Error('This operation was aborted'), { name: 'AbortError' }));
      }
    })();
    await expect(reading).resolves.toBeUndefined();
    expect(seen).toHaveLength(1);
    expect(body.destroyed).toBe(true);
  });

  it('destroys a body left unread after an error', async () => {
    const body = new PassThrough();
    body.write('data: {"oops"\n\n');
    await expect(collect(readChatChunks({ body, signal: new AbortController().signal, apiError: (error) => new Error(String(error)) }))).resolves.toMatchObject({ error: { name: 'SyntaxError' } });
    expect(body.destroyed).toBe(true);
  });
});

describe('EventDecoder', () => {
  it('keeps a \\r at the end of a piece until it knows whether \\n follows', () => {
    const decoder = new EventDecoder();
    expect(decoder.push('data: a\r')).toEqual([]);
    expect(decoder.push('\n\r')).toEqual([]);
    expect(decoder.push('\ndata: b\r\r')).toEqual([{ event: null, data: 'a' }]);
    expect(decoder.end()).toEqual([{ event: null, data: 'b' }]);
  });
});
