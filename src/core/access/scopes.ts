import { z } from 'zod';

/** What a key may do: each route declares the one scope it needs (its OpenAPI `security`). */
export const SCOPES = [
  'conversations:read',
  'conversations:write',
  'runs:write',
  'files:read',
  'files:write',
  'commands:run',
  'secrets:write',
  'webhooks:write',
  'schedules:write',
  'audit:read',
  'keys:admin',
] as const;

export const Scope = z.enum(SCOPES).meta({ id: 'Scope' });
export type Scope = z.infer<typeof Scope>;

/** The scope that lets a caller read its own key (GET /keys/me): any valid key may. */
export const ANY_KEY = 'key:self';
