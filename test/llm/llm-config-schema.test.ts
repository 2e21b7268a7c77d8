// LLM settings are declared once: the request, the response, the stored config and the
// normalized config must name the same fields, in the same order, unset ones null.
import v8 from 'node:v8';
import { describe, expect, it } from 'vitest';
import { LlmConfig, LlmConfigInput, LlmConfigPublic, REDACTED, StoredLlmConfig, mergeLlmConfig, normalizeLlmConfig, redactLlmConfig } from '../../src/core/schemas/llm-config.js';

const requestFields = Object.keys(LlmConfigInput.shape);
const responseFields = Object.keys(LlmConfigPublic.shape);

describe('the LLM settings schema', () => {
  it('accepts in a request exactly the fields a response shows', () => {
    expect([...requestFields].sort()).toEqual([...responseFields].sort());
    expect(Object.keys(LlmConfig.shape)).toEqual(responseFields);
  });

  it('normalizes a request to every field, in the response order, unset ones null', () => {
    const normalized = normalizeLlmConfig(LlmConfigInput.parse({ model: 'm', temperature: 0.5, api_key: 'sk-1' }));
    expect(Object.keys(normalized)).toEqual(responseFields);
    expect(normalized).toMatchObject({ model: 'm', temperature: 0.5, api_key: 'sk-1', base_url: null, structured_output: null });
    expect(Object.values(normalized).filter((value) => value !== null)).toEqual(['m', 'sk-1', 0.5]);
  });

  it('reads a stored config that lacks newer fields as unset', () => {
    expect(StoredLlmConfig.parse({ model: 'm', stream: false })).toEqual(normalizeLlmConfig({ model: 'm', stream: false }));
  });

  it('rejects in a request what a response may show (the constraints stay on the way in)', () => {
    expect(LlmConfigInput.safeParse({ model: 'm', temperature: 3 }).success).toBe(false);
    expect(LlmConfigInput.safeParse({ model: 'm', base_url: 'file:///etc' }).success).toBe(false);
    expect(LlmConfigInput.safeParse({ model: 'm', unknown_setting: 1 }).success).toBe(false);
    expect(LlmConfigPublic.safeParse({ ...normalizeLlmConfig({ model: 'm' }), temperature: 3 }).success).toBe(true);
  });

  it('shows the key redacted and merges an update field by field', () => {
    const merged = mergeLlmConfig(normalizeLlmConfig({ model: 'm', api_key: 'sk-1', top_p: 0.5 }), { model: 'n', temperature: 1 });
    expect(redactLlmConfig(merged)).toMatchObject({ model: 'n', api_key: REDACTED, top_p: 0.5, temperature: 1 });
  });
});

describe('a normalized LLM config', () => {
  // Every loaded record holds one: a hash table each instead of fields in the object is what P4 measured.
  v8.setFlagsFromString('--allow-natives-syntax');
  const fast = new Function('a', 'return %HasFastProperties(a)') as (a: object) => boolean;

  it('keeps its fields in the object, not in a hash table, from a request, a stored config and a merge', () => {
    const request = normalizeLlmConfig(LlmConfigInput.parse({ model: 'm', api_key: 'sk-1', temperature: 0.5, fallbacks: [{ model: 'f' }] }));
    const stored = StoredLlmConfig.parse({ model: 'm', stream: false });
    const merged = mergeLlmConfig(request, { model: 'n', top_p: 0.5 });
    expect([fast(request), fast(stored), fast(merged)]).toEqual([true, true, true]);
    expect(Object.keys(stored)).toEqual(responseFields);
  });
});
