import type { ConversationRecord } from '../../core/conversations/conversation-record.js';
import { SENSITIVE_HEADER } from '../../core/schemas/llm-config.js';
import type { SecretBox } from '../../core/secrets/secret-box.js';
import type { HookMatcher, HookPoint, Hooks } from '../../core/schemas/tool-control.js';
import type { McpServers } from '../../core/schemas/mcp-servers.js';

/**
 * A conversation record as stored (a file, a PostgreSQL row): secret values, the LLM key,
 * auth-like headers, http hook secrets and MCP env/header values sealed with the SecretBox.
 */
export type SealedConversationRecord = Omit<ConversationRecord, 'secrets' | 'llm'> & {
  llm: (Omit<NonNullable<ConversationRecord['llm']>, 'api_key'> & { api_key: string | null }) | null;
  secrets: Record<string, string>;
};

export function sealConversationRecord(record: ConversationRecord, box: SecretBox): SealedConversationRecord {
  const secrets: Record<string, string> = {};
  for (const [name, value] of Object.entries(record.secrets)) secrets[name] = box.encrypt(value);
  const llm = record.llm
    ? { ...record.llm, api_key: record.llm.api_key ? box.encrypt(record.llm.api_key) : null, extra_headers: sealHeaders(record.llm.extra_headers, (value) => box.encrypt(value)), fallbacks: sealFallbackKeys(record.llm.fallbacks, (value) => box.encrypt(value)) }
    : null;
  const retired = record.retired_secrets?.map(([name, value]): [string, string] => [name, box.encrypt(value)]);
  const hooks = record.hooks && sealHookSecrets(record.hooks, (value) => box.encrypt(value));
  const mcp = record.mcp_servers && sealMcpValues(record.mcp_servers, (value) => box.encrypt(value));
  return { ...record, llm, secrets, ...(retired && { retired_secrets: retired }), ...(hooks && { hooks }), ...(mcp && { mcp_servers: mcp }) };
}

export function unsealConversationRecord(disk: SealedConversationRecord, box: SecretBox): ConversationRecord {
  const secrets: Record<string, string> = {};
  for (const [name, value] of Object.entries(disk.secrets ?? {})) secrets[name] = box.decrypt(value);
  const llm = disk.llm
    ? { ...disk.llm, api_key: disk.llm.api_key ? box.decrypt(disk.llm.api_key) : null, extra_headers: sealHeaders(disk.llm.extra_headers, (value) => box.decrypt(value)), fallbacks: sealFallbackKeys(disk.llm.fallbacks, (value) => box.decrypt(value)) }
    : null;
  const retired = disk.retired_secrets?.map(([name, value]): [string, string] => [name, box.decrypt(value)]);
  const hooks = disk.hooks && sealHookSecrets(disk.hooks, (value) => box.decrypt(value));
  const mcp = disk.mcp_servers && sealMcpValues(disk.mcp_servers, (value) => box.decrypt(value));
  return { ...disk, llm, secrets, ...(retired && { retired_secrets: retired }), ...(hooks && { hooks }), ...(mcp && { mcp_servers: mcp }) };
}

/** A fallback model's `api_key` is sealed like the primary's; a `${NAME}` reference is sealed too (it is no secret, but one rule is simpler). */
function sealFallbackKeys<F extends { api_key?: string | undefined }>(fallbacks: F[] | null | undefined, transform: (value: string) => string): F[] | null {
  if (!fallbacks) return null;
  return fallbacks.map((fallback) => (fallback.api_key ? { ...fallback, api_key: transform(fallback.api_key) } : fallback));
}

/** Values of auth-like `extra_headers` are sealed at rest like `api_key`; a record from before they existed has none. */
function sealHeaders(headers: Record<string, string> | null | undefined, transform: (value: string) => string): Record<string, string> | null {
  if (!headers) return null;
  return Object.fromEntries(Object.entries(headers).map(([name, value]) => [name, SENSITIVE_HEADER.test(name) ? transform(value) : value]));
}

/** An http hook's signing secret is sealed at rest like the conversation's secrets. */
function sealHookSecrets(hooks: Hooks, transform: (value: string) => string): Hooks {
  const out: Hooks = {};
  for (const [point, matchers] of Object.entries(hooks) as [HookPoint, HookMatcher[]][]) {
    out[point] = matchers.map((matcher) => ({
      ...matcher,
      hooks: matcher.hooks.map((hook) => (hook.type === 'http' && hook.secret !== undefined ? { ...hook, secret: transform(hook.secret) } : hook)),
    }));
  }
  return out;
}

/** MCP env and header values are secrets: sealed at rest. */
function sealMcpValues(servers: McpServers, transform: (value: string) => string): McpServers {
  const seal = (values: Record<string, string> | undefined) => values && Object.fromEntries(Object.entries(values).map(([key, value]) => [key, transform(value)]));
  const out: McpServers = {};
  for (const [name, server] of Object.entries(servers)) {
    out[name] = 'command' in server ? { ...server, ...(server.env && { env: seal(server.env)! }) } : { ...server, ...(server.headers && { headers: seal(server.headers)! }) };
  }
  return out;
}
