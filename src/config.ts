import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { z } from 'zod';

/**
 * The only reader of process.env. Flags override env; everything is parsed once with zod and
 * frozen; a bad value stops start-up with one clear line.
 */
const LogLevel = z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']);

const boolText = z
  .enum(['true', 'false', '1', '0', 'yes', 'no'])
  .transform((value) => value === 'true' || value === '1' || value === 'yes');

const commaList = z.string().transform((value) => value.split(',').map((item) => item.trim()).filter(Boolean));
/** A limit (AGENTD_LIMIT_*): 0 turns it off. */
const limit = (min: number, fallback: number) =>
  z.coerce.number().int().refine((value) => value === 0 || value >= min, `must be 0 (no limit) or at least ${min}`).default(fallback);

const EnvSchema = z.object({
  AGENTD_HOST: z.string().min(1).default('127.0.0.1'),
  AGENTD_PORT: z.coerce.number().int().min(0).max(65535).default(8000),
  AGENTD_DATA_DIR: z.string().min(1).default(path.join(os.homedir(), '.agentd')),
  AGENTD_WORKDIR_BASE: z.string().min(1).optional(),
  AGENTD_LOG_LEVEL: LogLevel.default('info'),
  AGENTD_MASTER_KEY: z.string().optional(),
  AGENTD_LLM_MODEL: z.string().min(1).optional(),
  AGENTD_LLM_BASE_URL: z.url().optional(),
  AGENTD_LLM_API_KEY: z.string().min(1).optional(),
  OPENAI_BASE_URL: z.url().optional(),
  OPENAI_API_KEY: z.string().min(1).optional(),
  AGENTD_SECRET_KEY: z.string().min(16, 'must be at least 16 characters').optional(),
  AGENTD_FSYNC: boolText.default(false),
  AGENTD_MAX_BODY_BYTES: z.coerce.number().int().min(1024).default(10 * 1024 * 1024),
  AGENTD_MAX_UPLOAD_BYTES: z.coerce.number().int().min(1).default(100 * 1024 * 1024),
  AGENTD_SSE_HEARTBEAT_S: z.coerce.number().min(0.05).max(15).default(15),
  AGENTD_SSE_MAX_BUFFERED: z.coerce.number().int().min(10).default(10_000),
  AGENTD_PUBLIC_METRICS: boolText.default(false),
  AGENTD_CORS_ORIGINS: z
    .string()
    .transform((value) => value.split(',').map((origin) => origin.trim()).filter(Boolean))
    .pipe(z.array(z.union([z.literal('*'), z.url({ protocol: /^https?$/, error: 'must be * or comma-separated http(s) origins' })])))
    .optional(),
  AGENTD_WEBHOOK_URLS: z
    .string()
    .transform((value) => value.split(',').map((url) => url.trim()).filter(Boolean))
    .pipe(z.array(z.url({ protocol: /^https?$/, error: 'must be comma-separated http(s) URLs' })))
    .optional(),
  AGENTD_WEBHOOK_SECRET: z
    .string()
    .refine((value) => !value.startsWith('whsec_') || /^whsec_(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=|[A-Za-z0-9+/]{4})$/.test(value), 'a whsec_ secret must continue with base64')
    .optional(),
  AGENTD_WEBHOOK_TIMEOUT_S: z.coerce.number().min(0.05).max(300).default(10),
  AGENTD_WEBHOOK_RETRY_BASE_MS: z.coerce.number().int().min(1).default(1_000),
  AGENTD_WEBHOOK_RETRY_MAX_MS: z.coerce.number().int().min(1).default(10 * 60_000),
  AGENTD_WEBHOOK_RETRY_WINDOW_S: z.coerce.number().min(0).default(24 * 60 * 60),
  AGENTD_SANDBOX: z.enum(['auto', 'bwrap', 'none']).default('auto'),
  AGENTD_SANDBOX_NETWORK: z.enum(['isolated', 'none', 'host']).default('isolated'),
  AGENTD_SANDBOX_NETWORK_HOST: boolText.default(false),
  AGENTD_MAX_CONNECTIONS: z.coerce.number().int().min(0).default(4096),
  AGENTD_MAX_CONNECTIONS_PER_CLIENT: z.coerce.number().int().min(0).default(256),
  AGENTD_HEADERS_TIMEOUT_S: z.coerce.number().min(1).max(600).default(30),
  AGENTD_KEEP_ALIVE_TIMEOUT_S: z.coerce.number().min(1).max(600).default(72),
  AGENTD_SANDBOX_RO_PATHS: commaList.pipe(z.array(z.string().startsWith('/', 'must be comma-separated absolute paths'))).optional(),
  AGENTD_PASS_ENV: commaList.pipe(z.array(z.string().regex(/^[A-Za-z_][A-Za-z0-9_]*$/, 'must be comma-separated variable names'))).optional(),
  AGENTD_LIMIT_CPU_S: limit(1, 600),
  AGENTD_LIMIT_MEMORY_MB: limit(64, 4096),
  AGENTD_LIMIT_PROCESSES: limit(16, 1024),
  AGENTD_LIMIT_FILE_MB: limit(1, 4096),
  AGENTD_LIMIT_TMP_MB: limit(1, 1024),
  AGENTD_LIMIT_WORKDIR_MB: limit(1, 20_480),
  AGENTD_SANDBOX_CGROUPS: boolText.default(true),
});

export interface Config {
  host: string;
  port: number;
  dataDir: string;
  workdirBase: string;
  logLevel: z.infer<typeof LogLevel>;
  /** Keys from AGENTD_MASTER_KEY; empty means "generate or load the key file in the data dir". */
  masterKeys: readonly string[];
  defaultLlm: { model: string; base_url: string | null; api_key: string | null } | null;
  secretKey: string | null;
  fsync: boolean;
  maxBodyBytes: number;
  maxUploadBytes: number;
  sseHeartbeatMs: number;
  sseMaxBuffered: number;
  publicMetrics: boolean;
  /** Browser origins allowed to call the API (CORS); empty: no CORS headers. */
  corsOrigins: readonly string[];
  /** Webhook delivery: server-wide callback URLs and secret, attempt timeout, retry schedule. */
  webhooks: { urls: readonly string[]; secret: string | null; timeoutMs: number; retryBaseMs: number; retryMaxMs: number; retryWindowMs: number };
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
    network: { default: boolean | 'host'; hostAllowed: boolean };
    readOnlyPaths: readonly string[];
    /** Whole-sandbox memory and process limits with cgroups where the host allows (AGENTD_SANDBOX_CGROUPS). */
    cgroups: boolean;
    limits: { cpuSeconds: number | null; memoryMb: number | null; processes: number | null; fileMb: number | null; tmpMb: number | null; workdirMb: number | null };
  };
  /** All agent processes may take from the server's environment: PATH, LANG, LC_ALL and the AGENTD_PASS_ENV names, captured here. */
  agentEnv: { passEnv: readonly string[]; hostEnv: Readonly<Record<string, string>> };
}

export class ConfigError extends Error {}

export const HELP = `agentd: an agent server for coding-agent conversations over HTTP.

Usage: agentd [--host H] [--port P] [--data-dir D]

Options:
  --host H        address to listen on (AGENTD_HOST, default 127.0.0.1)
  --port P        port to listen on (AGENTD_PORT, default 8000)
  --data-dir D    where state lives (AGENTD_DATA_DIR, default ~/.agentd)
  --help          print this help
  --version       print the version

Environment: see the README's configuration table (every variable starts with AGENTD_).
`;

export type CliAction = { action: 'help' } | { action: 'version' } | { action: 'serve'; config: Config };

export function parseCli(argv: readonly string[], env: NodeJS.ProcessEnv): CliAction {
  let flags;
  try {
    flags = parseArgs({
      args: [...argv],
      options: {
        host: { type: 'string' },
        port: { type: 'string' },
        'data-dir': { type: 'string' },
        help: { type: 'boolean', short: 'h' },
        version: { type: 'boolean', short: 'v' },
      },
      strict: true,
      allowPositionals: false,
    }).values;
  } catch (error) {
    throw new ConfigError(`${(error as Error).message} (see --help)`);
  }
  if (flags.help) return { action: 'help' };
  if (flags.version) return { action: 'version' };
  const merged = { ...env };
  if (flags.host !== undefined) merged.AGENTD_HOST = flags.host;
  if (flags.port !== undefined) merged.AGENTD_PORT = flags.port;
  if (flags['data-dir'] !== undefined) merged.AGENTD_DATA_DIR = flags['data-dir'];
  return { action: 'serve', config: loadConfig(merged) };
}

export function loadConfig(env: NodeJS.ProcessEnv): Config {
  const known = Object.fromEntries(Object.keys(EnvSchema.shape).filter((key) => env[key] !== undefined && env[key] !== '').map((key) => [key, env[key]]));
  const parsed = EnvSchema.safeParse(known);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    const name = String(issue.path[0] ?? 'environment');
    throw new ConfigError(`invalid ${name}: ${issue.message}`);
  }
  const e = parsed.data;
  const dataDir = path.resolve(e.AGENTD_DATA_DIR);
  const model = e.AGENTD_LLM_MODEL;
  return Object.freeze({
    host: e.AGENTD_HOST,
    port: e.AGENTD_PORT,
    dataDir,
    workdirBase: path.resolve(e.AGENTD_WORKDIR_BASE ?? path.join(dataDir, 'workspaces')),
    logLevel: e.AGENTD_LOG_LEVEL,
    masterKeys: Object.freeze((e.AGENTD_MASTER_KEY ?? '').split(',').map((key) => key.trim()).filter(Boolean)),
    defaultLlm: model
      ? {
          model,
          base_url: e.AGENTD_LLM_BASE_URL ?? e.OPENAI_BASE_URL ?? null,
          api_key: e.AGENTD_LLM_API_KEY ?? e.OPENAI_API_KEY ?? null,
        }
      : null,
    secretKey: e.AGENTD_SECRET_KEY ?? null,
    fsync: e.AGENTD_FSYNC,
    maxBodyBytes: e.AGENTD_MAX_BODY_BYTES,
    maxUploadBytes: e.AGENTD_MAX_UPLOAD_BYTES,
    sseHeartbeatMs: Math.round(e.AGENTD_SSE_HEARTBEAT_S * 1000),
    sseMaxBuffered: e.AGENTD_SSE_MAX_BUFFERED,
    publicMetrics: e.AGENTD_PUBLIC_METRICS,
    corsOrigins: Object.freeze(e.AGENTD_CORS_ORIGINS ?? []),
    webhooks: Object.freeze({
      urls: Object.freeze(e.AGENTD_WEBHOOK_URLS ?? []),
      secret: e.AGENTD_WEBHOOK_SECRET ?? null,
      timeoutMs: Math.round(e.AGENTD_WEBHOOK_TIMEOUT_S * 1000),
      retryBaseMs: e.AGENTD_WEBHOOK_RETRY_BASE_MS,
      retryMaxMs: Math.max(e.AGENTD_WEBHOOK_RETRY_MAX_MS, e.AGENTD_WEBHOOK_RETRY_BASE_MS),
      retryWindowMs: Math.round(e.AGENTD_WEBHOOK_RETRY_WINDOW_S * 1000),
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
      }),
      readOnlyPaths: Object.freeze(e.AGENTD_SANDBOX_RO_PATHS ?? []),
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
    agentEnv: agentEnvFrom(env, e.AGENTD_PASS_ENV ?? []),
  });
}

function agentEnvFrom(env: NodeJS.ProcessEnv, passEnv: string[]): Config['agentEnv'] {
  const hostEnv: Record<string, string> = {};
  for (const name of ['PATH', 'LANG', 'LC_ALL', ...passEnv]) {
    const value = env[name];
    if (value !== undefined) hostEnv[name] = value;
  }
  return Object.freeze({ passEnv: Object.freeze([...passEnv]), hostEnv: Object.freeze(hostEnv) });
}
