import { z } from 'zod';
import type { ModelPrice } from './price-table.js';

export type { Budget } from '../schemas/budget.js';
export type { ModelPrice };

/** AGENTD_PRICES_FILE: `{"<model>": {"input_cost_per_token", "output_cost_per_token", "cached_input_cost_per_token"?}}`, US dollars per token. */
export const PricesFile = z.record(
  z.string().min(1),
  z
    .object({
      input_cost_per_token: z.number().min(0),
      output_cost_per_token: z.number().min(0),
      cached_input_cost_per_token: z.number().min(0).optional(),
    })
    .strict(),
) satisfies z.ZodType<Record<string, ModelPrice>>;
