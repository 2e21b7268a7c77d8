/**
 * Issue 22: each recipe of docs/providers.md (once the README's "Pointing it at an LLM") runs as
 * written. The variables of a provider's recipe configure a real server (its default LLM); the
 * recipe's host is answered by the fake LLM's profile of that provider, which rejects what the
 * real provider rejects. The host is redirected, not rewritten in the settings: what agentd
 * detects from it (Gemini, Azure, OpenRouter, OpenAI's own API) is what a user of the recipe gets.
 */
import fs from 'node:fs';
import path from 'node:path';
import { getGlobalDispatcher, setGlobalDispatcher, type Dispatcher } from 'undici';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { PROVIDER_NAMES, type ProviderName } from '../fake-llm/provider-profiles.js';
import { startAgentHarness, type AgentHarness } from '../support/agent-harness.js';

const PROVIDERS = fs.readFileSync(path.resolve(import.meta.dirname, '../../docs/providers.md'), 'utf8');

/** The page's recipe headings, and the fake profile each is run against. */
const PROFILE_OF: Record<string, ProviderName> = {
  OpenAI: 'openai',
  'Azure OpenAI': 'azure-legacy',
  'Azure OpenAI, api_version before 2024-10-21': 'azure-legacy',
  Gemini: 'gemini',
  Ollama: 'ollama',
  vLLM: 'vllm',
  OpenRouter: 'openrouter',
  LiteLLM: 'litellm',
  'DeepSeek (thinking mode)': 'deepseek',
  'Qwen (DashScope)': 'dashscope',
  Groq: 'groq',
  xAI: 'xai',
  Mistral: 'mistral',
};

/** Recipes of the other wire protocols, run against the fake speaking that protocol. */
const PROTOCOL_OF: Record<string, 'responses' | 'anthropic'> = {
  Anthropic: 'anthropic',
  'OpenAI Responses API': 'responses',
  'OpenAI Responses API on Azure': 'responses',
};

/** Profiles of reasoning models: the scripted answers reason first, in the profile's field (DeepSeek wants it back). */
const REASONING: ReadonlySet<ProviderName> = new Set(['deepseek', 'dashscope', 'xai', 'groq']);

interface Recipe {
  heading: string;
  text: string;
  env: Record<string, string>;
}

/** Each `## ` section of the page is one provider's recipe. */
function recipes(): Recipe[] {
  return PROVIDERS.split(/^## /m).slice(1).map((part) => {
    const heading = part.slice(0, part.indexOf('\n')).trim();
    const block = /```sh\n([\s\S]*?)```/.exec(part)?.[1] ?? '';
    const env: Record<string, string> = {};
    for (const line of block.split('\n')) {
      if (line.trim() === '') continue;
      const match = /^((?:AGENTD|OPENAI)_[A-Z_]+)=(.*)$/.exec(line);
      expect(match, `${heading}: "${line}" is not a variable assignment`).not.toBeNull();
      env[match![1]!] = match![2]!.replace(/^'(.*)'$/, '$1');
    }
    return { heading, text: part, env };
  });
}

let harness: AgentHarness | undefined;
let dispatcher: Dispatcher | null = null;
afterEach(async () => {
  vi.unstubAllGlobals();
  if (dispatcher) setGlobalDispatcher(dispatcher);
  dispatcher = null;
  await harness?.close();
  harness = undefined;
});

/** Sends requests for `origin` (the recipe's host) to the fake instead: a hosts-file entry, in effect. */
function redirect(origin: string, to: string): void {
  const realFetch = globalThis.fetch;
  vi.stubGlobal('fetch', (input: string | URL | Request, init?: RequestInit) => {
    const url = typeof input === 'string' || input instanceof URL ? new URL(input) : null;
    if (url && url.origin === origin) return realFetch(`${to}${url.pathname}${url.search}`, init);
    return realFetch(input, init);
  });
  // LLM requests go through undici's request() (src/adapters/undici-llm-fetch.ts): its global dispatcher is routed the same way.
  const previous = (dispatcher ??= getGlobalDispatcher());
  setGlobalDispatcher(previous.compose((dispatch) => (options, handler) => dispatch(new URL(String(options.origin)).origin === origin ? { ...options, origin: to } : options, handler)));
}

const TWO_STEPS = [
  {
    text: 'Creating the file.',
    toolCalls: [
      { name: 'file_editor', arguments: { command: 'create', path: 'notes.txt', file_text: 'from the model\n' } },
      { name: 'bash', arguments: { command: 'wc -l notes.txt', timeout_s: 20 } },
    ],
  },
  { text: 'notes.txt has one line.' },
];

describe("docs/providers.md's LLM recipes", () => {
  it('cover every provider profile, and every recipe is run here', () => {
    const headings = recipes().map((recipe) => recipe.heading);
    expect(headings).toEqual([...Object.keys(PROFILE_OF), ...Object.keys(PROTOCOL_OF)]);
    expect(new Set(Object.values(PROFILE_OF))).toEqual(new Set(PROVIDER_NAMES));
  });

  const targets = [...Object.entries(PROFILE_OF).map(([heading, provider]) => ({ heading, provider, protocol: undefined })), ...Object.entries(PROTOCOL_OF).map(([heading, protocol]) => ({ heading, provider: undefined, protocol }))];
  for (const { heading, provider, protocol } of targets) {
    it(`${heading}: a two-step tool run with the recipe's variables, against the ${provider ?? protocol} ${provider ? 'profile' : 'fake'}`, async () => {
      const recipe = recipes().find((candidate) => candidate.heading === heading)!;
      expect(recipe.env.AGENTD_LLM_MODEL, 'a recipe names its model').toBeTruthy();
      const key = recipe.env.AGENTD_LLM_API_KEY ?? recipe.env.OPENAI_API_KEY;
      // Ollama's recipe says how large a window to start Ollama with: the fake gets that window.
      const window = /OLLAMA_CONTEXT_LENGTH=(\d+)/.exec(recipe.text)?.[1];
      if (provider === 'ollama') expect(window, 'the Ollama recipe sets OLLAMA_CONTEXT_LENGTH').toBeDefined();
      const script = provider && REASONING.has(provider) ? TWO_STEPS.map((turn) => ({ ...turn, reasoning: 'Thinking it over.' })) : TWO_STEPS;
      harness = await startAgentHarness(script, {
        env: recipe.env,
        fake: { ...(provider ? { provider } : { protocol }), ...(key ? { apiKey: key } : {}), ...(window ? { contextTokens: Number(window) } : {}) },
      });
      const base = recipe.env.AGENTD_LLM_BASE_URL ?? recipe.env.OPENAI_BASE_URL ?? 'https://api.openai.com/v1';
      redirect(new URL(base).origin, harness.llm.origin);

      const created = await harness.post('/conversations', { initial_message: 'make notes.txt' });
      expect(created.status, JSON.stringify(created.body)).toBe(201);
      expect(created.body.llm.model).toBe(recipe.env.AGENTD_LLM_MODEL);
      const done = await harness.waitForStatus(created.body.id, ['idle', 'error', 'finished', 'stuck', 'paused']);
      const events = await harness.events(created.body.id);
      const llm = harness.llm;
      expect(llm.violations).toEqual([]);
      expect(done.status, JSON.stringify(events.filter((event) => event.kind === 'agent_error'))).toBe('idle');
      expect(fs.readFileSync(path.join(done.workdir, 'notes.txt'), 'utf8')).toBe('from the model\n');
      expect(events.filter((event) => event.kind === 'observation').map((event) => event.is_error)).toEqual([false, false]);
      expect(events.at(-2)).toMatchObject({ kind: 'message', source: 'agent', content: 'notes.txt has one line.' });
      expect(llm.requests).toHaveLength(2);

      // What the recipe's text promises for this provider, seen on the wire.
      const first = llm.requests[0]!;
      if (protocol === 'anthropic') expect(first.path).toBe('/v1/messages');
      if (protocol === 'responses') expect(first.path).toBe(new URL(`${base}/responses`).pathname);
      if (provider && heading.startsWith('Azure')) {
        expect(first.path).toBe(`/openai/deployments/${recipe.env.AGENTD_LLM_MODEL}/chat/completions`);
        expect(first.query['api-version']).toBe(recipe.env.AGENTD_LLM_API_VERSION);
        expect(first.headers['api-key']).toBe(key);
      }
      if (heading.includes('before 2024-10-21')) expect(first.body.stream_options).toBeUndefined();
      else expect(done.usage.prompt_tokens).toBeGreaterThan(0);
      if (provider === 'gemini') {
        const replayed = llm.requests[1]!.body.messages!.find((message) => message.role === 'assistant')!.tool_calls as unknown as Record<string, unknown>[];
        expect(replayed.every((call) => call.extra_content !== undefined)).toBe(true);
      }
      if (provider === 'openrouter' || provider === 'litellm') {
        expect(first.body.messages![0]!.content).toEqual([{ type: 'text', text: expect.any(String), cache_control: { type: 'ephemeral' } }]);
      }
      if (provider && REASONING.has(provider)) {
        expect(events.filter((event) => event.kind === 'reasoning').map((event) => event.content)).toEqual(['Thinking it over.', 'Thinking it over.']);
        const replayed = llm.requests[1]!.body.messages!.find((message) => message.role === 'assistant')!;
        // Only DeepSeek wants the reasoning back; the others are not sent a field they may reject.
        expect(replayed.reasoning_content).toBe(provider === 'deepseek' ? 'Thinking it over.' : undefined);
      }
      if (provider === 'openrouter') {
        expect(first.headers['x-title']).toBe('agentd');
        const usage = events.filter((event) => event.kind === 'usage');
        expect(done.usage.cost).toBeCloseTo(usage.reduce((sum, event) => sum + event.cost, 0), 12);
        expect(done.usage.cost).toBeGreaterThan(0);
      }
    });
  }
});
