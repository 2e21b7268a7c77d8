import type { LlmUsage } from './llm.js';

/** US dollars per token; a cached prompt token costs `cached_input_cost_per_token` (default: the input price). */
export interface ModelPrice {
  input_cost_per_token: number;
  output_cost_per_token: number;
  cached_input_cost_per_token?: number;
}

/**
 * List prices of a few common models, for a budget when the provider reports no cost and the
 * conversation sets no per-token prices. The operator's AGENTD_PRICES_FILE adds to and overrides
 * these (prices change; this list is a starting point, not a source of truth).
 */
const PER_MILLION: Record<string, [input: number, output: number, cached?: number]> = {
  'gpt-4o': [2.5, 10, 1.25],
  'gpt-4o-mini': [0.15, 0.6, 0.075],
  'gpt-4.1': [2, 8, 0.5],
  'gpt-4.1-mini': [0.4, 1.6, 0.1],
  'gpt-5': [1.25, 10, 0.125],
  'gpt-5-mini': [0.25, 2, 0.025],
  o3: [2, 8, 0.5],
  'o4-mini': [1.1, 4.4, 0.275],
  'claude-sonnet-4': [3, 15, 0.3],
  'claude-opus-4': [15, 75, 1.5],
  'claude-3-5-haiku': [0.8, 4, 0.08],
  'deepseek-chat': [0.27, 1.1, 0.07],
  'deepseek-reasoner': [0.55, 2.19, 0.14],
};

export const DEFAULT_PRICES: Readonly<Record<string, ModelPrice>> = Object.freeze(
  Object.fromEntries(
    Object.entries(PER_MILLION).map(([model, [input, output, cached]]) => [
      model,
      { input_cost_per_token: input / 1e6, output_cost_per_token: output / 1e6, ...(cached !== undefined && { cached_input_cost_per_token: cached / 1e6 }) },
    ]),
  ),
);

/** Prices by model: exact name first, then without a provider prefix (`openai/gpt-4o`), then without a date suffix (`gpt-4o-2024-08-06`). */
export class PriceTable {
  private readonly prices: ReadonlyMap<string, ModelPrice>;

  constructor(overrides: Readonly<Record<string, ModelPrice>> = {}) {
    this.prices = new Map(Object.entries({ ...DEFAULT_PRICES, ...overrides }));
  }

  priceOf(model: string): ModelPrice | null {
    const bare = model.slice(model.lastIndexOf('/') + 1);
    const undated = bare.replace(/-(\d{4}-\d{2}-\d{2}|\d{8}|latest)$/, '');
    return this.prices.get(model) ?? this.prices.get(bare) ?? this.prices.get(undated) ?? null;
  }

  /**
   * The usage with a cost: its own when it has one (the provider reported it, or the settings'
   * per-token prices gave it), else from this table; unchanged for a model the table does not know.
   */
  priced(usage: LlmUsage, model: string): LlmUsage {
    if (usage.cost > 0 || usage.prompt_tokens + usage.completion_tokens === 0) return usage;
    const price = this.priceOf(model);
    if (!price) return usage;
    const cached = Math.min(usage.cached_tokens, usage.prompt_tokens);
    const cost = (usage.prompt_tokens - cached) * price.input_cost_per_token + cached * (price.cached_input_cost_per_token ?? price.input_cost_per_token) + usage.completion_tokens * price.output_cost_per_token;
    return { ...usage, cost };
  }
}
