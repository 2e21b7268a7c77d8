import { z } from 'zod';
import { Timestamp } from '../schemas/common.js';
import { Scope } from './scopes.js';

export const BudgetPeriod = z.enum(['day', 'month', 'total']).meta({ id: 'BudgetPeriod' });
export type BudgetPeriod = z.infer<typeof BudgetPeriod>;

/** Limits of one key; those of an owner's keys apply to what the owner holds (conversations, runs, spend). */
export const KeyLimits = z
  .object({
    rpm: z.int().min(1).max(1_000_000).optional().describe('Requests per minute with this key.'),
    concurrent_runs: z.int().min(0).max(100_000).optional().describe("Runs of the owner's conversations in progress at once."),
    conversations: z.int().min(0).max(10_000_000).optional().describe('Conversations the owner may hold.'),
    max_cost_usd: z.number().min(0).max(1_000_000_000).optional().describe("What the owner's runs may spend per budget_period; a run reaching it pauses."),
    budget_period: BudgetPeriod.default('month').describe('The period max_cost_usd is counted over (UTC calendar day or month, or all time).'),
  })
  .strict()
  .meta({ id: 'KeyLimits' });
export type KeyLimits = z.infer<typeof KeyLimits>;

const Owner = z.string().min(1).max(200).regex(/^[^\s]+$/, 'must have no spaces');

export const ApiKey = z
  .object({
    id: z.uuid(),
    name: z.string(),
    prefix: z.string().describe('The first characters of the secret, to recognise it (the secret itself is shown once).'),
    owner: z.string(),
    scopes: z.array(Scope),
    expires_at: Timestamp.nullable(),
    limits: KeyLimits.nullable(),
    allowed_models: z.array(z.string()).nullable(),
    created_at: Timestamp,
    rotated_at: Timestamp.nullable(),
    previous_valid_until: Timestamp.nullable().describe('Until when the secret before the last rotation still works.'),
    last_used_at: Timestamp.nullable(),
  })
  .meta({ id: 'ApiKey' });
export type ApiKey = z.infer<typeof ApiKey>;

export const CreatedApiKey = ApiKey.extend({ secret: z.string().describe('The secret: shown this once, stored only as a hash.') }).meta({ id: 'CreatedApiKey' });
export type CreatedApiKey = z.infer<typeof CreatedApiKey>;

export const CreateKeyBody = z
  .object({
    name: z.string().min(1).max(200),
    scopes: z.array(Scope).min(1).max(32),
    owner: Owner.optional().describe("Default: the caller's owner. Only an admin key may name another owner."),
    expires_at: Timestamp.optional(),
    limits: KeyLimits.optional(),
    allowed_models: z.array(z.string().min(1).max(200)).max(100).optional(),
  })
  .strict()
  .meta({ id: 'CreateKey' });
export type CreateKeyBody = z.infer<typeof CreateKeyBody>;

export const UpdateKeyBody = z
  .object({
    name: z.string().min(1).max(200).optional(),
    scopes: z.array(Scope).min(1).max(32).optional(),
    expires_at: Timestamp.nullable().optional(),
    limits: KeyLimits.nullable().optional(),
    allowed_models: z.array(z.string().min(1).max(200)).max(100).nullable().optional(),
  })
  .strict()
  .meta({ id: 'UpdateKey' });
export type UpdateKeyBody = z.infer<typeof UpdateKeyBody>;

export const RotateKeyBody = z
  .object({ grace_s: z.int().min(0).max(30 * 24 * 3600).default(0).describe('How long the old secret keeps working.') })
  .strict()
  .meta({ id: 'RotateKey' });

/** What the store keeps: the public fields and the secrets' hashes (never a secret). */
export const KeyRecord = ApiKey.extend({
  secret_hash: z.string(),
  previous_hash: z.string().nullable(),
});
export type KeyRecord = z.infer<typeof KeyRecord>;

export function publicKey(record: KeyRecord): ApiKey {
  const { secret_hash: _secret, previous_hash: _previous, ...rest } = record;
  return rest;
}
