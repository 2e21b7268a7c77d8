import { expandSecrets } from '../schemas/mcp-servers.js';
import type { LlmSettings } from './llm.js';

const REFERENCE = /\$\{[A-Za-z_][A-Za-z0-9_]*(?::-[^}]*)?\}/;

/**
 * The settings a run's requests are made with: a fallback's `api_key` written `${NAME}` is read
 * from the conversation's secrets (as MCP servers' values are), at each request, so a secret
 * changed mid-conversation is used from the next one. Settings without such a key are returned as they are.
 */
export function withFallbackKeys(settings: LlmSettings, secrets: Readonly<Record<string, string>>): LlmSettings {
  const fallbacks = settings.fallbacks;
  if (!fallbacks?.some((fallback) => fallback.api_key !== undefined && REFERENCE.test(fallback.api_key))) return settings;
  return {
    ...settings,
    fallbacks: fallbacks.map((fallback) => {
      if (fallback.api_key === undefined || !REFERENCE.test(fallback.api_key)) return fallback;
      const key = expandSecrets(fallback.api_key, secrets);
      const { api_key: _reference, ...rest } = fallback;
      return key === '' ? rest : { ...rest, api_key: key };
    }),
  };
}
