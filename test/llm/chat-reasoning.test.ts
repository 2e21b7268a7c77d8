/**
 * Issue 72: `content` in whatever shape a provider streams it, and reasoning in whichever field
 * it uses: text is joined, thinking is reasoning, refusal parts are a refusal, and anything else
 * is kept apart, never turned into text.
 */
import { describe, expect, it } from 'vitest';
import { ChatChunkAccumulator } from '../../src/adapters/llm/chat-chunk-accumulator.js';
import { ReasoningAccumulator, readContent } from '../../src/adapters/llm/chat-reasoning.js';

describe('readContent', () => {
  it('joins text parts, takes thinking as reasoning and refusal parts as a refusal, keeps the rest', () => {
    const audio = { type: 'output_audio', data: 'AAAA' };
    const read = readContent([
      { type: 'thinking', thinking: [{ type: 'text', text: 'Hmm, ' }, { type: 'text', text: 'yes.' }] },
      { type: 'text', text: 'Hello' },
      ' there',
      audio,
      { type: 'refusal', refusal: 'Not that part.' },
    ]);
    expect(read).toEqual({ text: 'Hello there', thinking: 'Hmm, yes.', refusal: 'Not that part.', otherParts: [audio] });
  });

  it('reads a plain string, nothing, and a lone part object', () => {
    expect(readContent('plain').text).toBe('plain');
    expect(readContent(null)).toEqual({ text: '', thinking: '', refusal: '', otherParts: [] });
    expect(readContent({ type: 'text', text: 'alone' }).text).toBe('alone');
  });
});

describe('ChatChunkAccumulator', () => {
  it('returns strings only, whatever the content shape, and keeps unknown parts on the response', () => {
    const accumulator = new ChatChunkAccumulator();
    const image = { type: 'image_url', image_url: { url: 'data:image/png;base64,AA' } };
    const pieces = [
      accumulator.add({ choices: [{ delta: { content: [{ type: 'thinking', thinking: [{ type: 'text', text: 'think' }] }] } }] }),
      accumulator.add({ choices: [{ delta: { content: [{ type: 'text', text: 'say' }, image] } }] }),
      accumulator.add({ choices: [{ delta: { content: 'more' }, finish_reason: 'stop' }] }),
    ];
    expect(pieces).toEqual([{ text: '', reasoning: 'think' }, { text: 'say', reasoning: '' }, { text: 'more', reasoning: '' }]);
    const response = accumulator.result({ model: 'm' });
    expect(response).toMatchObject({ content: 'saymore', reasoning: { text: 'think' }, otherParts: [image] });
  });
});

describe('ReasoningAccumulator', () => {
  it('takes reasoning_content, else reasoning, else the text of reasoning_details, never twice', () => {
    const reasoning = new ReasoningAccumulator();
    expect(reasoning.add({ reasoning_content: 'a' })).toBe('a');
    expect(reasoning.add({ reasoning: 'b', reasoning_details: [{ type: 'reasoning.text', text: 'b', index: 0 }] })).toBe('b');
    expect(reasoning.add({ reasoning_details: [{ type: 'reasoning.summary', summary: 'c', index: 1 }] })).toBe('c');
    expect(reasoning.result(undefined)).toEqual({
      text: 'abc',
      providerData: { reasoning_details: [{ type: 'reasoning.text', text: 'b', index: 0 }, { type: 'reasoning.summary', summary: 'c', index: 1 }] },
    });
  });

  it('is null when the answer had none', () => {
    expect(new ReasoningAccumulator().result({ api: 'chat', model: 'm' })).toBeNull();
  });
});
