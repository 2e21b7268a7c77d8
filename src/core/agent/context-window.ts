/**
 * Context windows (prompt + answer, in tokens) of model families as their makers publish them,
 * matched on the model name with any provider prefix (`openai/`, `anthropic/`, `models/`) and
 * date or size suffix. Unknown models get null: the server's AGENTD_CONDENSER_MAX_TOKENS applies.
 * The first matching pattern wins, so narrower names come before wider ones.
 */
const CONTEXT_WINDOWS: readonly [RegExp, number][] = [
  [/gpt-4\.1/, 1_047_576],
  [/gpt-5/, 400_000],
  [/gpt-4o|gpt-4-turbo|gpt-4-1106|gpt-4-0125/, 128_000],
  [/gpt-4-32k/, 32_768],
  [/gpt-4(?![.o0-9])/, 8_192],
  [/gpt-3\.5-turbo/, 16_385],
  [/(?:^|\/)o[134](?:-mini|-pro)?(?:$|-)/, 200_000],
  [/claude-(?:sonnet-4|4-sonnet).*1m/, 1_000_000],
  [/claude/, 200_000],
  [/gemini-(?:1\.5|2\.0|2\.5|3)/, 1_048_576],
  [/deepseek/, 128_000],
  [/llama-?3\.[1-3]|llama-?4/, 128_000],
  [/mistral-large|mistral-medium|codestral|devstral/, 128_000],
  [/qwen3-coder/, 262_144],
  [/qwen-?2\.5|qwen3/, 32_768],
  [/grok-4/, 256_000],
  [/grok/, 131_072],
];

export function contextWindowOf(model: string): number | null {
  const name = model.toLowerCase();
  for (const [pattern, tokens] of CONTEXT_WINDOWS) if (pattern.test(name)) return tokens;
  return null;
}

/** The share of the context window past which the history is condensed by default. */
export const DEFAULT_CONDENSE_SHARE = 0.75;

/** The prompt size past which the history is condensed: the conversation's setting, else a share of the window, else the server's. */
export function condenseThreshold(options: { maxTokens: number | null | undefined; model: string; serverDefault: number }): number {
  if (options.maxTokens) return options.maxTokens;
  const window = contextWindowOf(options.model);
  return window ? Math.floor(window * DEFAULT_CONDENSE_SHARE) : options.serverDefault;
}
