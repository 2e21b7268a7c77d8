import { z } from 'zod';
import { ExtraBody, ExtraHeaders, LlmApiName, MaxTokensParam } from './core/schemas/llm-config.js';
import { Budget } from './core/schemas/budget.js';
import { isKnownTimeZone } from './core/schedules/zone-offsets.js';

/** One environment variable the server reads (see configVariables). */
export interface VariableSpec {
  schema: z.ZodType;
  /** The default as people read it (`none`, `generated`, a value). */
  default: string;
  /** One line: what it sets. */
  meaning: string;
  /** The command-line flag that overrides it, if any. */
  flag?: string;
}

export const DEFAULT_AGENT_PATH = '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin';

const boolText = z
  .enum(['true', 'false', '1', '0', 'yes', 'no'])
  .transform((value) => value === 'true' || value === '1' || value === 'yes');
const commaList = z.string().transform((value) => value.split(',').map((item) => item.trim()).filter(Boolean));
/** A per-process limit: 0 turns it off. */
const limit = (min: number, fallback: number) =>
  z.coerce.number().int().refine((value) => value === 0 || value >= min, `must be 0 (no limit) or at least ${min}`).default(fallback);
const spec = <S extends z.ZodType>(value: { schema: S; default: string; meaning: string; flag?: string }) => value;

/** A JSON object in a variable, checked by `schema`. */
const jsonObject = <S extends z.ZodType>(schema: S) =>
  z
    .string()
    .transform((text, ctx) => {
      try {
        return JSON.parse(text) as unknown;
      } catch {
        ctx.addIssue({ code: 'custom', message: 'must be a JSON object, e.g. {"name": "value"}' });
        return z.NEVER;
      }
    })
    .pipe(schema);

export const LogLevel = z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']);

/**
 * Every environment variable the server reads, as data: its zod schema (parsing and the default
 * applied), the default as shown to people, one line of meaning, and the flag that overrides it.
 * `--help`, and the tests that check `.env.example` and docs/configuration.md, read this list.
 * Adding a variable: one entry here, one line in `.env.example`, one row in docs/configuration.md.
 *
 * Made at each call rather than held: a server reads it once, at start, and its hundred zod
 * schemas would otherwise stay in memory for as long as it runs.
 */
export function configVariables() {
  return {
    AGENTD_HOST: spec({ schema: z.string().min(1).default('127.0.0.1'), default: '127.0.0.1', flag: '--host', meaning: 'Address to listen on (0.0.0.0 in containers)' }),
    AGENTD_PORT: spec({ schema: z.coerce.number().int().min(0).max(65535).default(8000), default: '8000', flag: '--port', meaning: 'Port to listen on' }),
    AGENTD_DATA_DIR: spec({ schema: z.string().min(1).optional(), default: '~/.agentd', flag: '--data-dir', meaning: 'Conversations, event logs, keys' }),
    AGENTD_WORKDIR_BASE: spec({ schema: z.string().min(1).optional(), default: '<data dir>/workspaces', meaning: 'Where fresh workdirs are created' }),
    AGENTD_LOG_LEVEL: spec({ schema: LogLevel.default('info'), default: 'info', meaning: 'fatal, error, warn, info, debug, trace or silent' }),
    AGENTD_LOG_FLUSH_MS: spec({ schema: z.coerce.number().int().min(0).max(1000).default(5), default: '5', meaning: 'How long a log line below warn (a request line) may wait to be written with others, in ms (0: at the end of its event-loop turn); warn and above are never held; kill -9 loses at most this much' }),
    AGENTD_MASTER_KEY: spec({ schema: z.string().optional(), default: 'generated', meaning: 'API key(s), comma-separated to allow rotation (unset: <data dir>/master.key)' }),
    AGENTD_LLM_MODEL: spec({ schema: z.string().min(1).optional(), default: 'none', meaning: 'Default model for new conversations' }),
    AGENTD_LLM_BASE_URL: spec({ schema: z.url().optional(), default: 'OPENAI_BASE_URL', meaning: 'Default OpenAI-compatible endpoint' }),
    AGENTD_LLM_API_KEY: spec({ schema: z.string().min(1).optional(), default: 'OPENAI_API_KEY', meaning: 'Default LLM API key (never returned, never logged)' }),
    OPENAI_BASE_URL: spec({ schema: z.url().optional(), default: 'none', meaning: 'Fallback for AGENTD_LLM_BASE_URL' }),
    OPENAI_API_KEY: spec({ schema: z.string().min(1).optional(), default: 'none', meaning: 'Fallback for AGENTD_LLM_API_KEY' }),
    AGENTD_LLM_API: spec({ schema: LlmApiName.optional(), default: 'auto', meaning: 'Default api: chat, responses or anthropic (auto: anthropic for api.anthropic.com, else chat)' }),
    AGENTD_LLM_API_VERSION: spec({ schema: z.string().min(1).max(64).optional(), default: 'none', meaning: 'Default api_version (Azure OpenAI, e.g. 2024-10-21)' }),
    AGENTD_LLM_MAX_TOKENS_PARAM: spec({ schema: MaxTokensParam.optional(), default: 'auto', meaning: 'Default max_tokens_param: auto, max_tokens or max_completion_tokens' }),
    AGENTD_LLM_STREAM_USAGE: spec({ schema: boolText.optional(), default: 'auto', meaning: 'Default stream_usage: false stops sending stream_options (auto: off for old Azure api_versions)' }),
    AGENTD_LLM_DROP_PARAMS: spec({ schema: commaList.optional(), default: 'none', meaning: 'Default drop_params: request fields never sent, comma-separated (e.g. temperature,top_p)' }),
    AGENTD_LLM_EXTRA_BODY: spec({ schema: jsonObject(ExtraBody).optional(), default: 'none', meaning: 'Default extra_body: a JSON object added to every request body' }),
    AGENTD_LLM_EXTRA_HEADERS: spec({ schema: jsonObject(ExtraHeaders).optional(), default: 'none', meaning: 'Default extra_headers: a JSON object of headers sent with every request' }),
    AGENTD_LLM_PROMPT_CACHE: spec({ schema: boolText.optional(), default: 'auto', meaning: 'Default prompt_cache: true marks the prompt prefix with cache_control (auto: on for Claude behind OpenRouter or a LiteLLM host)' }),
    AGENTD_LLM_RATE_LIMIT_WAIT_S: spec({ schema: z.coerce.number().min(0).default(60), default: '60', meaning: 'How long an LLM request rate-limited (429) keeps being retried, in seconds in total' }),
    AGENTD_BUDGET: spec({ schema: jsonObject(Budget).optional(), default: 'none', meaning: 'The budget of conversations created without one, as JSON: {"max_cost_usd", "max_tokens", "per": "run"|"conversation", "on_exceed": "pause"|"stop"|"notify"}' }),
    AGENTD_PRICES_FILE: spec({ schema: z.string().min(1).optional(), default: 'none', meaning: 'A JSON file of model prices in US dollars per token ({"<model>": {"input_cost_per_token", "output_cost_per_token", "cached_input_cost_per_token"?}}) that add to and override the built-in table budgets use when a provider reports no cost' }),
    AGENTD_LLM_IDLE_TIMEOUT_S: spec({ schema: z.coerce.number().min(1).default(120), default: '120', meaning: 'Seconds a streaming LLM response may stay silent before the attempt is retried' }),
    AGENTD_CONDENSER_MAX_TOKENS: spec({ schema: z.coerce.number().int().min(1000).default(100_000), default: '100000', meaning: "Prompt tokens past which a conversation's history is condensed, for models whose context window agentd does not know (known ones: 75% of the window)" }),
    AGENTD_SECRET_KEY: spec({ schema: z.string().min(16, 'must be at least 16 characters').optional(), default: 'generated', meaning: 'Key that encrypts secrets at rest (unset: <data dir>/secret.key, mode 0600)' }),
    AGENTD_FSYNC: spec({ schema: boolText.default(false), default: 'false', meaning: 'true: fsync every append (survives power loss, not only a crash)' }),
    AGENTD_CHECKPOINTS: spec({ schema: boolText.default(true), default: 'true', meaning: 'false: take no workdir checkpoints (rewind of files, /changes and fork with copy_workdir then answer 422)' }),
    AGENTD_CHECKPOINT_MAX_FILE_MB: spec({ schema: z.coerce.number().min(0).default(10), default: '10', meaning: 'Workdir files larger than this are left out of checkpoints (MiB)' }),
    AGENTD_SCHEDULE_TIMEZONE: spec({ schema: z.string().refine(isKnownTimeZone, 'must be an IANA time zone, e.g. Europe/Berlin').default('UTC'), default: 'UTC', meaning: 'Time zone of schedules created without `timezone`' }),
    AGENTD_TEST_PAUSE_AT: spec({ schema: z.string().optional(), default: 'none', meaning: 'Tests only: a crash point (e.g. rewind_before_event) where the server logs it and waits forever, for kill -9 tests' }),
    AGENTD_MAX_BODY_BYTES: spec({ schema: z.coerce.number().int().min(1024).default(10 * 1024 * 1024), default: '10485760', meaning: 'Largest JSON request body' }),
    AGENTD_MAX_UPLOAD_BYTES: spec({ schema: z.coerce.number().int().min(1).default(100 * 1024 * 1024), default: '104857600', meaning: 'Largest uploaded file' }),
    AGENTD_SSE_HEARTBEAT_S: spec({ schema: z.coerce.number().min(0.05).max(15).default(15), default: '15', meaning: 'Seconds between SSE heartbeat comments' }),
    AGENTD_SSE_MAX_BUFFERED: spec({ schema: z.coerce.number().int().min(10).default(10_000), default: '10000', meaning: 'Events buffered for a slow SSE subscriber before it is disconnected' }),
    AGENTD_SSE_MAX_BUFFERED_BYTES: spec({ schema: z.coerce.number().int().min(64 * 1024).default(8 * 1024 * 1024), default: '8388608', meaning: 'Bytes buffered for a slow SSE subscriber before it is disconnected' }),
    AGENTD_PUBLIC_METRICS: spec({ schema: boolText.default(false), default: 'false', meaning: 'Serve /metrics without the key' }),
    AGENTD_CORS_ORIGINS: spec({
      schema: commaList.pipe(z.array(z.union([z.literal('*'), z.url({ protocol: /^https?$/, error: 'must be * or comma-separated http(s) origins' })]))).optional(),
      default: 'none',
      meaning: 'Browser origins allowed to call the API (comma-separated, or *)',
    }),
    AGENTD_WEBHOOK_URLS: spec({
      schema: commaList.pipe(z.array(z.url({ protocol: /^https?$/, error: 'must be comma-separated http(s) URLs' }))).optional(),
      default: 'none',
      meaning: "Comma-separated URLs that receive every conversation's events",
    }),
    AGENTD_WEBHOOK_SECRET: spec({
      schema: z
        .string()
        .refine((value) => !value.startsWith('whsec_') || /^whsec_(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=|[A-Za-z0-9+/]{4})$/.test(value), 'a whsec_ secret must continue with base64')
        .optional(),
      default: 'none',
      meaning: 'Signing secret for AGENTD_WEBHOOK_URLS (whsec_<base64> or any string)',
    }),
    AGENTD_WEBHOOK_TIMEOUT_S: spec({ schema: z.coerce.number().min(0.05).max(300).default(10), default: '10', meaning: 'Per-attempt webhook delivery timeout' }),
    AGENTD_WEBHOOK_RETRY_BASE_MS: spec({ schema: z.coerce.number().int().min(1).default(1_000), default: '1000', meaning: 'First webhook retry delay (doubles, with jitter)' }),
    AGENTD_WEBHOOK_RETRY_MAX_MS: spec({ schema: z.coerce.number().int().min(1).default(10 * 60_000), default: '600000', meaning: 'Webhook retry delay cap' }),
    AGENTD_WEBHOOK_RETRY_WINDOW_S: spec({ schema: z.coerce.number().min(0).default(24 * 60 * 60), default: '86400', meaning: 'Keep retrying an event at least this long, then mark the callback failing' }),
    AGENTD_WEBHOOK_ALLOW_PRIVATE: spec({ schema: boolText.default(false), default: 'false', meaning: 'true: webhooks may go to loopback, private and link-local addresses (local receivers)' }),
    AGENTD_WEBHOOK_ALLOW_CIDRS: spec({
      schema: commaList.pipe(z.array(z.cidrv4().or(z.cidrv6()), { error: 'must be comma-separated CIDRs, e.g. 10.1.0.0/16' })).optional(),
      default: 'none',
      meaning: 'Private address ranges webhooks may go to anyway (comma-separated CIDRs)',
    }),
    AGENTD_WEB_FETCH_ALLOW_PRIVATE: spec({ schema: boolText.default(false), default: 'false', meaning: 'true: web_fetch of a conversation with sandbox.network true may reach loopback, private and link-local addresses (host-network conversations always may)' }),
    AGENTD_WEB_FETCH_ALLOW_CIDRS: spec({
      schema: commaList.pipe(z.array(z.cidrv4().or(z.cidrv6()), { error: 'must be comma-separated CIDRs, e.g. 10.1.0.0/16' })).optional(),
      default: 'none',
      meaning: 'Private address ranges web_fetch may reach anyway (comma-separated CIDRs)',
    }),
    AGENTD_WEB_FETCH_TIMEOUT_S: spec({ schema: z.coerce.number().min(0.1).max(600).default(30), default: '30', meaning: 'Time limit of one web_fetch call, redirects included' }),
    AGENTD_WEB_FETCH_HTML_MAX_BYTES: spec({ schema: z.coerce.number().int().min(1024).default(4 * 1024 * 1024), default: '4194304', meaning: 'web_fetch converts at most this much of a page\'s HTML to Markdown (the rest is cut, and the observation says so)' }),
    AGENTD_WEB_FETCH_HTML_MAX_DEPTH: spec({ schema: z.coerce.number().int().min(8).max(4096).default(512), default: '512', meaning: 'Elements nested deeper than this in a fetched page are left out of its Markdown' }),
    AGENTD_WEB_FETCH_HTML_MAX_ELEMENTS: spec({ schema: z.coerce.number().int().min(100).default(100_000), default: '100000', meaning: 'A fetched page\'s elements past this many are left out of its Markdown' }),
    AGENTD_WEB_FETCH_HTML_TIMEOUT_S: spec({ schema: z.coerce.number().min(0.1).max(600).default(10), default: '10', meaning: 'Time limit of one page\'s conversion to Markdown (in a worker thread, ended past it; the page is then not shown)' }),
    AGENTD_SEARCH_PROVIDER: spec({ schema: z.enum(['tavily', 'brave', 'searxng']).optional(), default: 'none', meaning: 'Offers the web_search tool through this provider: tavily and brave need AGENTD_SEARCH_API_KEY, searxng needs AGENTD_SEARCH_URL' }),
    AGENTD_SEARCH_API_KEY: spec({ schema: z.string().min(1).optional(), default: 'none', meaning: 'The search provider\'s API key (never returned, never logged, never in events)' }),
    AGENTD_SEARCH_URL: spec({ schema: z.url({ protocol: /^https?$/ }).optional(), default: 'provider\'s', meaning: 'The search API\'s base URL: required for searxng (your instance), optional for tavily and brave (a proxy or a compatible endpoint)' }),
    AGENTD_MCP_CONFIG: spec({ schema: z.string().min(1).optional(), default: 'none', meaning: 'A JSON file in the .mcp.json shape ({"mcpServers": {...}}): MCP servers every conversation gets (a conversation\'s own servers of the same name win)' }),
    AGENTD_SKILLS_DIR: spec({ schema: z.string().startsWith('/', 'must be an absolute path').optional(), default: 'none', meaning: 'A directory of skills (<name>/SKILL.md) every conversation gets, after the project\'s own' }),
    AGENTD_CHECK_EDITS_S: spec({ schema: z.coerce.number().min(0).max(120).default(10), default: '10', meaning: "Seconds the syntax check after each file_editor write may take (node --check, python3, bash -n, gofmt, the project's tsc), run in the sandbox; 0: no checks" }),
    AGENTD_SUBAGENT_MAX_DEPTH: spec({ schema: z.coerce.number().int().min(0).max(5).default(1), default: '1', meaning: 'Levels of subagents the task tool may start below the main agent (0: no task tool; 1: subagents start none)' }),
    AGENTD_SUBAGENT_MODELS: spec({ schema: z.string().optional(), default: 'none', meaning: 'Comma-separated models a workdir\'s .claude/agents/*.md may pick besides the conversation\'s own (`*`: any); another one runs on the conversation\'s model, with a note in the task result' }),
    AGENTD_SANDBOX: spec({ schema: z.enum(['auto', 'bwrap', 'none']).default('auto'), default: 'auto', meaning: 'auto (bubblewrap if it works here), bwrap (required) or none (unsandboxed)' }),
    AGENTD_SANDBOX_NETWORK: spec({ schema: z.enum(['isolated', 'none', 'host']).default('isolated'), default: 'isolated', meaning: 'Network of conversations created without sandbox.network: isolated (internet, no host loopback), none, host' }),
    AGENTD_SANDBOX_NETWORK_HELPER: spec({ schema: z.enum(['auto', 'slirp4netns', 'pasta']).default('auto'), default: 'auto', meaning: 'The user-mode network stack behind the isolated network: auto (slirp4netns, else pasta), slirp4netns or pasta (IPv6, more throughput; ~30 MB and ~200 descriptors per sandbox)' }),
    AGENTD_SANDBOX_NETWORK_HOST: spec({ schema: boolText.default(false), default: 'false', meaning: 'true: conversations may ask for sandbox.network "host" (the host\'s network, loopback included)' }),
    AGENTD_MAX_CONNECTIONS: spec({ schema: z.coerce.number().int().min(0).default(4096), default: '4096', meaning: 'Open HTTP connections in all (0: no cap)' }),
    AGENTD_MAX_CONNECTIONS_PER_CLIENT: spec({ schema: z.coerce.number().int().min(0).default(256), default: '256', meaning: 'Open HTTP connections per client address (0: no cap; raise it behind a reverse proxy)' }),
    AGENTD_HEADERS_TIMEOUT_S: spec({ schema: z.coerce.number().min(1).max(600).default(30), default: '30', meaning: 'Seconds a connection has to send its request headers' }),
    AGENTD_KEEP_ALIVE_TIMEOUT_S: spec({ schema: z.coerce.number().min(1).max(600).default(72), default: '72', meaning: 'Seconds an idle keep-alive connection stays open' }),
    AGENTD_SHUTDOWN_TIMEOUT_S: spec({ schema: z.coerce.number().min(0.1).max(600).default(10), default: '10', meaning: 'Seconds a SIGTERM/SIGINT shutdown may take before the server exits anyway (exit code 1)' }),
    AGENTD_HEAP_GROWTH_PERCENT: spec({ schema: z.coerce.number().int().min(0).max(400).default(50), default: '50', meaning: "How far V8 lets the JS heap grow past its live data before a full collection, in percent (0: V8's own heuristics, which let a busy server's heap reach 3-4× its live data)" }),
    AGENTD_IDLE_TIMEOUT_S: spec({ schema: z.coerce.number().min(0).default(900), default: '900', meaning: "Seconds after its last run (or its creation: a conversation that can run starts its shell then) before a conversation's shell (every sandbox process), cached history and open log files are released; 0: never, and no shell starts before a run" }),
    AGENTD_COMPACT_IDLE_S: spec({ schema: z.coerce.number().min(0).default(30), default: '30', meaning: 'Seconds without a run before the server compacts its heap and gives the pages back (0: never)' }),
    AGENTD_WARM_SHELLS: spec({ schema: z.coerce.number().int().min(0).max(64).default(2), default: '2', meaning: "How many of the next conversations created with the defaults (no workdir, the default network, the bash tool) have their workdir and sandboxed shell made ahead, while conversations are being created (and from the start, with a default LLM); each is released after AGENTD_IDLE_TIMEOUT_S unused (0: none)" }),
    AGENTD_HISTORY_CACHE_MB: spec({ schema: z.coerce.number().min(0).max(65536).default(4), default: '4', meaning: "Memory for the LLM histories of conversations between runs, in MiB: past it, the histories used longest ago are dropped and folded from the event log again at their conversation's next use; 0: only the history in use is kept" }),
    AGENTD_SANDBOX_RO_PATHS: spec({ schema: commaList.pipe(z.array(z.string().startsWith('/', 'must be comma-separated absolute paths'))).optional(), default: 'none', meaning: 'Extra read-only paths inside the sandbox' }),
    AGENTD_PASS_ENV: spec({ schema: commaList.pipe(z.array(z.string().regex(/^[A-Za-z_][A-Za-z0-9_]*$/, 'must be comma-separated variable names'))).optional(), default: 'none', meaning: 'Server variables the agent may see, comma-separated' }),
    AGENTD_AGENT_PATH: spec({ schema: z.string().min(1).default(DEFAULT_AGENT_PATH), default: DEFAULT_AGENT_PATH, meaning: "PATH of the agent's shell and of commands (never the server's own PATH)" }),
    AGENTD_LIMIT_CPU_S: spec({ schema: limit(1, 600), default: '600', meaning: 'CPU seconds per agent process (0: no limit)' }),
    AGENTD_LIMIT_MEMORY_MB: spec({ schema: limit(64, 4096), default: '4096', meaning: "Memory of a conversation's sandboxes together (cgroup), else address space per process (0: no limit)" }),
    AGENTD_LIMIT_PROCESSES: spec({ schema: limit(16, 1024), default: '1024', meaning: "Processes and threads of a conversation's sandboxes (cgroup), else per agent user (0: no limit)" }),
    AGENTD_LIMIT_FILE_MB: spec({ schema: limit(1, 4096), default: '4096', meaning: 'Largest file an agent process may write (RLIMIT_FSIZE; 0: no limit)' }),
    AGENTD_LIMIT_TMP_MB: spec({ schema: limit(1, 1024), default: '1024', meaning: "Size of the sandbox's /tmp and of its /dev/shm, each a tmpfs (0: no size)" }),
    AGENTD_LIMIT_WORKDIR_MB: spec({ schema: limit(1, 20_480), default: '20480', meaning: 'Disk usage of the workdir past which the running command is stopped (0: no limit)' }),
    AGENTD_DATABASE_URL: spec({ schema: z.string().regex(/^postgres(ql)?:\/\//, 'must be a postgres:// URL').optional(), default: 'none', meaning: 'PostgreSQL URL: every store (events, conversations, runs, webhooks, secrets) goes there, and several instances can share it' }),
    AGENTD_NATS_URL: spec({ schema: z.string().regex(/^(nats|tls):\/\//, 'must be a nats:// URL').optional(), default: 'none', meaning: 'NATS JetStream URL for cross-instance event fan-out, with credentials if the server wants them (nats://user:password@host:4222, nats://token@host:4222; tls:// for TLS) (needs AGENTD_DATABASE_URL; unset: LISTEN/NOTIFY)' }),
    AGENTD_NATS_CREDS: spec({ schema: z.string().min(1).optional(), default: 'none', meaning: 'File with the NATS credentials: a .creds file (user JWT and seed) or an NKey user seed (SU...)' }),
    AGENTD_NATS_TLS_CA: spec({ schema: z.string().min(1).optional(), default: 'none', meaning: "PEM file of the CA that signed the NATS server's certificate (a private CA; implies TLS)" }),
    AGENTD_INSTANCE_URL: spec({ schema: z.url({ protocol: /^https?$/ }).optional(), default: 'http://<host>:<port>', meaning: 'URL other instances reach this one at (requests for a conversation it owns are forwarded there)' }),
    AGENTD_LEASE_TTL_S: spec({ schema: z.coerce.number().min(1).max(300).default(5), default: '5', meaning: 'Seconds an instance holds a conversation without renewing; a dead owner is replaced after this' }),
    AGENTD_RESUME_ON_FAILOVER: spec({ schema: boolText.default(false), default: 'false', meaning: "true: a run whose instance died is continued by the one taking over (else it is paused)" }),
    AGENTD_AUTH: spec({ schema: z.enum(['master', 'keys', 'jwt']).default('keys'), default: 'keys', meaning: 'Who may call: master (the master key only), keys (and API keys made with POST /keys), jwt (and bearer tokens verified against AGENTD_JWT_JWKS_URL)' }),
    AGENTD_JWT_JWKS_URL: spec({ schema: z.url({ protocol: /^https?$/ }).optional(), default: 'none', meaning: "The identity provider's JWKS (AGENTD_AUTH=jwt)" }),
    AGENTD_JWT_ISSUER: spec({ schema: z.string().min(1).optional(), default: 'none', meaning: 'The `iss` a token must carry (AGENTD_AUTH=jwt)' }),
    AGENTD_JWT_AUDIENCE: spec({ schema: z.string().min(1).optional(), default: 'none', meaning: 'The `aud` a token must carry (AGENTD_AUTH=jwt)' }),
    AGENTD_JWT_OWNER_CLAIM: spec({ schema: z.string().min(1).default('sub'), default: 'sub', meaning: "The claim that names a token's owner" }),
    AGENTD_JWT_SCOPES_CLAIM: spec({ schema: z.string().min(1).default('scope'), default: 'scope', meaning: "The claim that holds a token's scopes (a space-separated string or an array)" }),
    AGENTD_SANDBOX_CGROUPS: spec({ schema: boolText.default(true), default: 'true', meaning: 'false: never create cgroups (memory and processes limited per process only)' }),
  } satisfies Record<string, VariableSpec>;
}

type Variables = ReturnType<typeof configVariables>;
export type VariableName = keyof Variables;
type Shape = { [K in VariableName]: Variables[K]['schema'] };

/** The environment's schema: one object of every variable's (made at each call, like configVariables). */
export function envSchema() {
  return z.object(Object.fromEntries(Object.entries(configVariables()).map(([name, variable]) => [name, variable.schema])) as Shape);
}

/** The parsed environment. */
export type Env = z.infer<ReturnType<typeof envSchema>>;
