import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { McpServers } from './core/schemas/mcp-servers.js';
import { PricesFile, type Budget, type ModelPrice } from './core/agent/spending-config.js';
import { z } from 'zod';
import { envSchema, LogLevel, type Env } from './config-variables.js';
import type { LlmConfigInput } from './core/schemas/llm-config.js';
import { accessConfigFrom, type AccessConfig } from './core/access/access-config.js';

/**
 * The only reader of process.env: the variables (merged with a `.env` file and the flags by
 * cli/command-line.ts) are parsed once with zod into a frozen Config; a bad value stops start-up
 * with one clear line. The variables themselves are data: see config-variables.ts.
 */

export interface Config {
  /** How the LLM client waits: 429s retried for this long in total; a silent stream retried after this. */
  llmClient: { rateLimitWaitMs: number; idleTimeoutMs: number };
  /** After this long without a run a conversation's shell, cached history and open log files are released; 0: never. */
  idleTimeoutMs: number;
  /** How long no run must be in progress before the heap is compacted (0: never; compact-when-idle.ts). */
  compactIdleMs: number;
  /** How many of the next conversations created with the defaults get a shell started before they are asked for (AGENTD_WARM_SHELLS; see agent/warm-shells.ts). */
  warmShells: number;
  /** Bytes of LLM history kept between runs (AGENTD_HISTORY_CACHE_MB): past it, the histories used longest ago are folded again at next use. */
  historyCacheBytes: number;
  /** A shutdown taking longer than this exits anyway (code 1). */
  shutdownTimeoutMs: number;
  /** V8's heap growing factor in percent (AGENTD_HEAP_GROWTH_PERCENT); 0: V8's own. */
  heapGrowthPercent: number;
  /** AGENTD_CONDENSER_MAX_TOKENS: the condensation threshold for models of unknown context window. */
  condenserMaxTokens: number;
  host: string;
  port: number;
  dataDir: string;
  workdirBase: string;
  logLevel: z.infer<typeof LogLevel>;
  /** Standard output's flush window for lines below warn, in ms (AGENTD_LOG_FLUSH_MS); 0: at the end of each event-loop turn. */
  logFlushMs: number;
  /** Keys from AGENTD_MASTER_KEY; empty means "generate or load the key file in the data dir". */
  masterKeys: readonly string[];
  /** The LLM of a conversation created without one: AGENTD_LLM_* (null without AGENTD_LLM_MODEL). */
  defaultLlm: LlmConfigInput | null;
  secretKey: string | null;
  fsync: boolean;
  /** Several instances over PostgreSQL (and NATS): null without AGENTD_DATABASE_URL (files in the data dir). */
  access: AccessConfig; // AGENTD_AUTH and AGENTD_JWT_* (core/access/access-config.ts)
  cluster: { databaseUrl: string; natsUrl: string | null; natsCreds: string | null; natsTlsCa: string | null; instanceUrl: string; leaseTtlMs: number; resumeOnFailover: boolean } | null;
  /**
   * Workdir checkpoints in a shadow git repository (rewind, changes, fork with copy_workdir),
   * under `dir`: the data dir's conversations on one instance; with a database, beside the
   * workdirs (`<workdir base>/.agentd-checkpoints`), on the storage every instance shares, so the
   * instance taking a conversation over can rewind it.
   */
  checkpoints: { enabled: boolean; maxFileBytes: number; dir: string; shared: boolean };
  /** Tests only: the crash point where the server waits forever (AGENTD_TEST_PAUSE_AT). */
  testPauseAt: string | null;
  /** Time zone of schedules created without one (AGENTD_SCHEDULE_TIMEZONE). */
  scheduleTimezone: string;
  maxBodyBytes: number;
  maxUploadBytes: number;
  sseHeartbeatMs: number;
  sseMaxBuffered: number;
  /** Bytes of events buffered for one slow SSE subscriber before it is disconnected. */
  sseMaxBufferedBytes: number;
  publicMetrics: boolean;
  /** Browser origins allowed to call the API (CORS); empty: no CORS headers. */
  corsOrigins: readonly string[];
  /** Webhook delivery: server-wide callback URLs and secret, attempt timeout, retry schedule. */
  /** MCP servers every conversation gets (AGENTD_MCP_CONFIG). */
  mcpServers: McpServers;
  /** The default budget (AGENTD_BUDGET) and the prices that override the built-in table (AGENTD_PRICES_FILE). */
  spending: { defaultBudget: Budget | null; prices: Readonly<Record<string, ModelPrice>> };
  /** Skills every conversation gets (AGENTD_SKILLS_DIR), or null. */
  skillsDir: string | null;
  /** Levels of subagents below the main agent (AGENTD_SUBAGENT_MAX_DEPTH). */
  subagentMaxDepth: number;
  /** How long file_editor's syntax check may take (AGENTD_CHECK_EDITS_S); 0: no checks. */
  editCheckTimeoutMs: number;
  /** AGENTD_SUBAGENT_MODELS: models a workdir's agent file may pick besides the conversation's own (`*`: any). */
  subagentModels: readonly string[];
  webhooks: {
    urls: readonly string[];
    secret: string | null;
    timeoutMs: number;
    retryBaseMs: number;
    retryMaxMs: number;
    retryWindowMs: number;
    /** Where deliveries may go: see webhook-targets.ts. */
    allowPrivate: boolean;
    allowCidrs: readonly string[];
  };
  /** The web tools: where web_fetch may go (see web-fetch-policy.ts), and the web_search provider (null: no web_search). */
  web: {
    fetch: { allowPrivate: boolean; allowCidrs: readonly string[]; timeoutMs: number; html: { maxBytes: number; maxDepth: number; maxElements: number; timeoutMs: number } };
    search: { provider: 'tavily' | 'brave' | 'searxng'; apiKey: string | null; url: string | null } | null;
  };
  /** How agent processes run: the mode asked for, extra read-only paths, per-process limits (null: none). */
  /**
   * Open connections: at most `max` in all and `perClient` per remote address (0: no cap); a
   * connection must send its request headers within `headersTimeoutMs`; idle keep-alive
   * connections close after `keepAliveTimeoutMs`.
   */
  connections: { max: number; perClient: number; headersTimeoutMs: number; keepAliveTimeoutMs: number };
  /**
   * How agent processes run: the mode asked for, the network of conversations created without
   * `sandbox.network` (true: user-mode networking, false: none, 'host': the host's) and whether
   * 'host' may be asked for at all, extra read-only paths, limits (null: none).
   */
  sandbox: {
    mode: 'auto' | 'bwrap' | 'none';
    network: { default: boolean | 'host'; hostAllowed: boolean; helper: 'auto' | 'slirp4netns' | 'pasta' };
    readOnlyPaths: readonly string[];
    /** Whole-sandbox memory and process limits with cgroups where the host allows (AGENTD_SANDBOX_CGROUPS). */
    cgroups: boolean;
    limits: { cpuSeconds: number | null; memoryMb: number | null; processes: number | null; fileMb: number | null; tmpMb: number | null; workdirMb: number | null };
  };
  /** What agent processes get of the server's environment: PATH (AGENTD_AGENT_PATH), LANG, LC_ALL and the AGENTD_PASS_ENV names, captured here. */
  agentEnv: { passEnv: readonly string[]; hostEnv: Readonly<Record<string, string>> };
}

export class ConfigError extends Error {}

export function loadConfig(env: NodeJS.ProcessEnv): Config {
  const schema = envSchema();
  const known = Object.fromEntries(Object.keys(schema.shape).filter((key) => env[key] !== undefined && env[key] !== '').map((key) => [key, env[key]]));
  // Parsed once per start: zod's compiled fast path would cost more to generate than it saves.
  const parsed = schema.safeParse(known, { jitless: true });
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    const name = String(issue.path[0] ?? 'environment');
    throw new ConfigError(`invalid ${name}: ${issue.message}`);
  }
  const e = parsed.data;
  const dataDir = path.resolve(e.AGENTD_DATA_DIR ?? path.join(os.homedir(), '.agentd'));
  const model = e.AGENTD_LLM_MODEL;
  const workdirBase = path.resolve(e.AGENTD_WORKDIR_BASE ?? path.join(dataDir, 'workspaces'));
  return Object.freeze({
    host: e.AGENTD_HOST,
    port: e.AGENTD_PORT,
    dataDir,
    workdirBase,
    logLevel: e.AGENTD_LOG_LEVEL,
    logFlushMs: e.AGENTD_LOG_FLUSH_MS,
    masterKeys: Object.freeze((e.AGENTD_MASTER_KEY ?? '').split(',').map((key) => key.trim()).filter(Boolean)),
    defaultLlm: model
      ? {
          model,
          base_url: e.AGENTD_LLM_BASE_URL ?? e.OPENAI_BASE_URL ?? null,
          api_key: e.AGENTD_LLM_API_KEY ?? e.OPENAI_API_KEY ?? null,
          api_version: e.AGENTD_LLM_API_VERSION ?? null,
          api: e.AGENTD_LLM_API ?? null,
          max_tokens_param: e.AGENTD_LLM_MAX_TOKENS_PARAM ?? null,
          stream_usage: e.AGENTD_LLM_STREAM_USAGE ?? null,
          drop_params: e.AGENTD_LLM_DROP_PARAMS ?? null,
          extra_body: e.AGENTD_LLM_EXTRA_BODY ?? null,
          extra_headers: e.AGENTD_LLM_EXTRA_HEADERS ?? null,
          prompt_cache: e.AGENTD_LLM_PROMPT_CACHE ?? null,
        }
      : null,
    condenserMaxTokens: e.AGENTD_CONDENSER_MAX_TOKENS,
    llmClient: Object.freeze({ rateLimitWaitMs: Math.round(e.AGENTD_LLM_RATE_LIMIT_WAIT_S * 1000), idleTimeoutMs: Math.round(e.AGENTD_LLM_IDLE_TIMEOUT_S * 1000) }),
    idleTimeoutMs: Math.round(e.AGENTD_IDLE_TIMEOUT_S * 1000),
    compactIdleMs: Math.round(e.AGENTD_COMPACT_IDLE_S * 1000),
    warmShells: e.AGENTD_WARM_SHELLS,
    historyCacheBytes: Math.round(e.AGENTD_HISTORY_CACHE_MB * 2 ** 20),
    shutdownTimeoutMs: Math.round(e.AGENTD_SHUTDOWN_TIMEOUT_S * 1000),
    heapGrowthPercent: e.AGENTD_HEAP_GROWTH_PERCENT,
    secretKey: e.AGENTD_SECRET_KEY ?? null,
    mcpServers: e.AGENTD_MCP_CONFIG ? readJsonFile('AGENTD_MCP_CONFIG', e.AGENTD_MCP_CONFIG, McpServers, 'mcpServers') : {},
    spending: Object.freeze({ defaultBudget: e.AGENTD_BUDGET ?? null, prices: e.AGENTD_PRICES_FILE ? readJsonFile('AGENTD_PRICES_FILE', e.AGENTD_PRICES_FILE, PricesFile) : {} }),
    skillsDir: e.AGENTD_SKILLS_DIR ?? null,
    subagentMaxDepth: e.AGENTD_SUBAGENT_MAX_DEPTH,
    editCheckTimeoutMs: Math.round(e.AGENTD_CHECK_EDITS_S * 1000),
    subagentModels: Object.freeze((e.AGENTD_SUBAGENT_MODELS ?? '').split(',').map((model) => model.trim()).filter(Boolean)),
    fsync: e.AGENTD_FSYNC,
    cluster: clusterFrom(e),
    access: accessConfigFrom(e, (message) => new ConfigError(message)),
    checkpoints: Object.freeze({
      enabled: e.AGENTD_CHECKPOINTS,
      maxFileBytes: Math.round(e.AGENTD_CHECKPOINT_MAX_FILE_MB * 1024 * 1024),
      ...(e.AGENTD_DATABASE_URL
        ? { dir: path.join(workdirBase, '.agentd-checkpoints'), shared: true }
        : { dir: path.join(dataDir, 'conversations'), shared: false }),
    }),
    testPauseAt: e.AGENTD_TEST_PAUSE_AT ?? null,
    scheduleTimezone: e.AGENTD_SCHEDULE_TIMEZONE,
    maxBodyBytes: e.AGENTD_MAX_BODY_BYTES,
    maxUploadBytes: e.AGENTD_MAX_UPLOAD_BYTES,
    sseHeartbeatMs: Math.round(e.AGENTD_SSE_HEARTBEAT_S * 1000),
    sseMaxBuffered: e.AGENTD_SSE_MAX_BUFFERED,
    sseMaxBufferedBytes: e.AGENTD_SSE_MAX_BUFFERED_BYTES,
    publicMetrics: e.AGENTD_PUBLIC_METRICS,
    corsOrigins: Object.freeze(e.AGENTD_CORS_ORIGINS ?? []),
    webhooks: Object.freeze({
      urls: Object.freeze(e.AGENTD_WEBHOOK_URLS ?? []),
      secret: e.AGENTD_WEBHOOK_SECRET ?? null,
      timeoutMs: Math.round(e.AGENTD_WEBHOOK_TIMEOUT_S * 1000),
      retryBaseMs: e.AGENTD_WEBHOOK_RETRY_BASE_MS,
      retryMaxMs: Math.max(e.AGENTD_WEBHOOK_RETRY_MAX_MS, e.AGENTD_WEBHOOK_RETRY_BASE_MS),
      retryWindowMs: Math.round(e.AGENTD_WEBHOOK_RETRY_WINDOW_S * 1000),
      allowPrivate: e.AGENTD_WEBHOOK_ALLOW_PRIVATE,
      allowCidrs: Object.freeze(e.AGENTD_WEBHOOK_ALLOW_CIDRS ?? []),
    }),
    web: Object.freeze({
      fetch: Object.freeze({
        allowPrivate: e.AGENTD_WEB_FETCH_ALLOW_PRIVATE,
        allowCidrs: Object.freeze(e.AGENTD_WEB_FETCH_ALLOW_CIDRS ?? []),
        timeoutMs: Math.round(e.AGENTD_WEB_FETCH_TIMEOUT_S * 1000),
        html: Object.freeze({ maxBytes: e.AGENTD_WEB_FETCH_HTML_MAX_BYTES, maxDepth: e.AGENTD_WEB_FETCH_HTML_MAX_DEPTH, maxElements: e.AGENTD_WEB_FETCH_HTML_MAX_ELEMENTS, timeoutMs: Math.round(e.AGENTD_WEB_FETCH_HTML_TIMEOUT_S * 1000) }),
      }),
      search: searchConfig(e.AGENTD_SEARCH_PROVIDER, e.AGENTD_SEARCH_API_KEY, e.AGENTD_SEARCH_URL),
    }),
    connections: Object.freeze({
      max: e.AGENTD_MAX_CONNECTIONS,
      perClient: e.AGENTD_MAX_CONNECTIONS_PER_CLIENT,
      headersTimeoutMs: Math.round(e.AGENTD_HEADERS_TIMEOUT_S * 1000),
      keepAliveTimeoutMs: Math.round(e.AGENTD_KEEP_ALIVE_TIMEOUT_S * 1000),
    }),
    sandbox: Object.freeze({
      mode: e.AGENTD_SANDBOX,
      network: Object.freeze({
        default: ({ isolated: true, none: false, host: 'host' } as const)[e.AGENTD_SANDBOX_NETWORK],
        // A server default of `host` is the operator's opt-in too.
        hostAllowed: e.AGENTD_SANDBOX_NETWORK_HOST || e.AGENTD_SANDBOX_NETWORK === 'host',
        helper: e.AGENTD_SANDBOX_NETWORK_HELPER,
      }),
      // The server's skills directory is readable in the sandbox: a skill's scripts and references sit beside its SKILL.md.
      readOnlyPaths: Object.freeze([...(e.AGENTD_SANDBOX_RO_PATHS ?? []), ...(e.AGENTD_SKILLS_DIR ? [e.AGENTD_SKILLS_DIR] : [])]),
      cgroups: e.AGENTD_SANDBOX_CGROUPS,
      limits: Object.freeze({
        cpuSeconds: e.AGENTD_LIMIT_CPU_S || null,
        memoryMb: e.AGENTD_LIMIT_MEMORY_MB || null,
        processes: e.AGENTD_LIMIT_PROCESSES || null,
        fileMb: e.AGENTD_LIMIT_FILE_MB || null,
        tmpMb: e.AGENTD_LIMIT_TMP_MB || null,
        workdirMb: e.AGENTD_LIMIT_WORKDIR_MB || null,
      }),
    }),
    agentEnv: agentEnvFrom({ env, passEnv: e.AGENTD_PASS_ENV ?? [], agentPath: e.AGENTD_AGENT_PATH }),
  });
}

/** The web_search provider, checked at boot: what each one needs must be set. */
function searchConfig(provider: 'tavily' | 'brave' | 'searxng' | undefined, apiKey: string | undefined, url: string | undefined): Config['web']['search'] {
  if (!provider) {
    if (apiKey || url) throw new ConfigError('AGENTD_SEARCH_API_KEY / AGENTD_SEARCH_URL are set but AGENTD_SEARCH_PROVIDER is not (tavily, brave or searxng)');
    return null;
  }
  if (provider === 'searxng' && !url) throw new ConfigError('AGENTD_SEARCH_PROVIDER=searxng needs AGENTD_SEARCH_URL (the base URL of your SearXNG instance, with the JSON format enabled)');
  if (provider !== 'searxng' && !apiKey) throw new ConfigError(`AGENTD_SEARCH_PROVIDER=${provider} needs AGENTD_SEARCH_API_KEY`);
  return Object.freeze({ provider, apiKey: apiKey ?? null, url: url ?? null });
}

function clusterFrom(e: Env): Config['cluster'] {
  if (!e.AGENTD_DATABASE_URL) {
    if (e.AGENTD_NATS_CREDS || e.AGENTD_NATS_TLS_CA) throw new ConfigError('AGENTD_NATS_CREDS and AGENTD_NATS_TLS_CA are for AGENTD_NATS_URL, which needs AGENTD_DATABASE_URL');
    if (e.AGENTD_NATS_URL) throw new ConfigError('invalid AGENTD_NATS_URL: NATS fans events out between instances that share AGENTD_DATABASE_URL; set that too');
    return null;
  }
  // Every instance must open what the others sealed and accept the keys clients were given.
  if (!e.AGENTD_SECRET_KEY) throw new ConfigError('AGENTD_DATABASE_URL needs AGENTD_SECRET_KEY: every instance must seal secrets with the same key');
  if (!e.AGENTD_MASTER_KEY) throw new ConfigError('AGENTD_DATABASE_URL needs AGENTD_MASTER_KEY: every instance must accept the same API keys');
  if ((e.AGENTD_NATS_CREDS || e.AGENTD_NATS_TLS_CA) && !e.AGENTD_NATS_URL) throw new ConfigError('AGENTD_NATS_CREDS and AGENTD_NATS_TLS_CA need AGENTD_NATS_URL');
  const host = e.AGENTD_HOST === '0.0.0.0' || e.AGENTD_HOST === '::' ? '127.0.0.1' : e.AGENTD_HOST;
  return Object.freeze({
    databaseUrl: e.AGENTD_DATABASE_URL,
    natsUrl: e.AGENTD_NATS_URL ?? null,
    natsCreds: e.AGENTD_NATS_CREDS ?? null,
    natsTlsCa: e.AGENTD_NATS_TLS_CA ?? null,
    instanceUrl: (e.AGENTD_INSTANCE_URL ?? `http://${host.includes(':') ? `[${host}]` : host}:${e.AGENTD_PORT}`).replace(/\/$/, ''),
    leaseTtlMs: Math.round(e.AGENTD_LEASE_TTL_S * 1000),
    resumeOnFailover: e.AGENTD_RESUME_ON_FAILOVER,
  });
}

/** LANG, LC_ALL and the AGENTD_PASS_ENV names from the server's environment; PATH is AGENTD_AGENT_PATH, never the server's. */
function agentEnvFrom({ env, passEnv, agentPath }: { env: NodeJS.ProcessEnv; passEnv: string[]; agentPath: string }): Config['agentEnv'] {
  const hostEnv: Record<string, string> = {};
  for (const name of ['LANG', 'LC_ALL', ...passEnv]) {
    const value = env[name];
    if (value !== undefined) hostEnv[name] = value;
  }
  hostEnv.PATH = agentPath;
  return Object.freeze({ passEnv: Object.freeze([...passEnv]), hostEnv: Object.freeze(hostEnv) });
}

/** A JSON file a variable names (AGENTD_MCP_CONFIG, AGENTD_PRICES_FILE), checked by `schema` at `key`. A bad file stops the server with a clear message. */
function readJsonFile<T>(variable: string, file: string, schema: z.ZodType<T>, key?: string): T {
  let parsed: unknown;
  try {
    parsed = JSON.parse(fs.readFileSync(path.resolve(file), 'utf8'));
  } catch (error) {
    throw new ConfigError(`invalid ${variable}: cannot read ${file} as JSON (${(error as NodeJS.ErrnoException).code ?? (error as Error).message})`);
  }
  const checked = schema.safeParse(key ? ((parsed as Record<string, unknown> | null)?.[key] ?? {}) : parsed);
  if (!checked.success) throw new ConfigError(`invalid ${variable}: ${[key, ...checked.error.issues[0]!.path].filter((part) => part !== undefined).join('.')}: ${checked.error.issues[0]!.message}`);
  return checked.data;
}
