import { z } from 'zod';

/** What a run or a conversation may spend on the LLM, and what happens when it has. */
export const Budget = z
  .object({
    max_cost_usd: z.number().positive().max(1_000_000).optional().describe('Cost in US dollars: the provider\'s reported cost, else the model\'s price (llm per-token prices, else the price table).'),
    max_tokens: z.int().min(1).max(1_000_000_000_000).optional().describe('Prompt plus completion tokens.'),
    per: z.enum(['run', 'conversation']).default('run').describe('What the limit counts: each run\'s spending, or the whole conversation\'s.'),
    on_exceed: z.enum(['pause', 'stop', 'notify']).default('pause').describe('`pause`: the run pauses before its next LLM request; `stop`: it ends in agent_error `budget_exceeded`; `notify`: a `budget_exceeded` event, and the run goes on.'),
  })
  .strict()
  .refine((budget) => budget.max_cost_usd !== undefined || budget.max_tokens !== undefined, { message: 'a budget sets max_cost_usd, max_tokens or both' })
  .meta({ id: 'Budget' });
export type Budget = z.infer<typeof Budget>;
