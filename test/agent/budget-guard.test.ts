// The guard a run and its subagents share: a limit that ended one agent of the run ends the others
// at their next request without a second event, unless the limit changed meanwhile; a notify is
// told once per run.
import { expect, it } from 'vitest';
import { runSpendChecks } from '../../src/core/agent/budget-guard.js';
import type { Budget } from '../../src/core/schemas/budget.js';
import { zeroUsage } from '../../src/core/schemas/usage.js';

const spent = (tokens: number) => ({ run: { ...zeroUsage(), prompt_tokens: tokens }, conversation: { ...zeroUsage(), prompt_tokens: tokens } });

it('says a pause or stop once, and again for a limit raised meanwhile that is still short', () => {
  let budget: Budget = { max_tokens: 1000, per: 'run', on_exceed: 'pause' };
  let tokens = 900;
  const { checkBudget } = runSpendChecks({ budget: () => budget, spend: () => spent(tokens) });
  expect(checkBudget()).toBeNull();
  tokens = 1000;
  expect(checkBudget()).toEqual({ recorded: false, breach: { limit: { max_tokens: 1000 }, used: { cost_usd: 0, tokens: 1000 }, per: 'run', action: 'pause' } });
  // Another agent of the run (the parent of the subagent that met it) ends without a second event.
  expect(checkBudget()).toMatchObject({ recorded: true });
  budget = { max_tokens: 1000, per: 'run', on_exceed: 'stop' };
  expect(checkBudget()).toMatchObject({ recorded: false, breach: { action: 'stop' } });
  budget = { max_tokens: 900, per: 'run', on_exceed: 'stop' };
  expect(checkBudget()).toMatchObject({ recorded: false, breach: { limit: { max_tokens: 900 } } });
});

it('tells a notify once, whichever agent of the run asks', () => {
  const { checkBudget } = runSpendChecks({ budget: () => ({ max_tokens: 10, per: 'conversation', on_exceed: 'notify' }), spend: () => spent(20) });
  expect(checkBudget()).toMatchObject({ recorded: false, breach: { action: 'notify', per: 'conversation' } });
  expect(checkBudget()).toBeNull();
});

it("passes the owner's spend verdict through", async () => {
  const verdict = { limit: 1, used: 2, per: 'total' as const, message: 'Paused: over.' };
  await expect(runSpendChecks({ budget: () => null, spend: () => spent(0), ownerSpend: async () => verdict }).spendCheck?.()).resolves.toBe(verdict);
  expect(runSpendChecks({ budget: () => null, spend: () => spent(0) }).spendCheck).toBeUndefined();
});
