import path from 'node:path';
import { parseArgs } from 'node:util';
import { ConfigError, loadConfig, type Config } from '../config.js';
import { configVariables } from '../config-variables.js';
import { readEnvFile, userConfigDir } from './env-file.js';

/**
 * The server's command line: the flags, `--help` and where the variables come from. The
 * environment's come first, then a `.env` file's (the working directory's, or `--env-file PATH`)
 * for names the environment does not set; flags override both. config.ts parses the result.
 */

/** Command-line options: flag → the variable it overrides (or none), its argument, its meaning. */
const OPTIONS = [
  { flag: '--host', arg: 'H', meaning: 'address to listen on', variable: 'AGENTD_HOST' },
  { flag: '--port', arg: 'P', meaning: 'port to listen on', variable: 'AGENTD_PORT' },
  { flag: '--data-dir', arg: 'D', meaning: 'where state lives', variable: 'AGENTD_DATA_DIR' },
  { flag: '--env-file', arg: 'F', meaning: 'read variables from F (default: ./.env when it exists); the environment wins', variable: null },
  { flag: '--help', arg: null, meaning: 'print this help', variable: null },
  { flag: '--version', arg: null, meaning: 'print the version', variable: null },
] as const;

/** `--help`: every option and every variable with its default and meaning, from the same data. */
export function helpText(): string {
  const optionLines = OPTIONS.map((option) => {
    const left = option.arg ? `${option.flag} ${option.arg}` : option.flag;
    const variable = option.variable ? ` (${option.variable})` : '';
    return `  ${left.padEnd(16)}${option.meaning}${variable}`;
  });
  const variables = configVariables();
  const width = Math.max(...Object.keys(variables).map((name) => name.length)) + 2;
  const variableLines = Object.entries(variables).flatMap(([name, variable]) => [
    `  ${name.padEnd(width)}${variable.meaning}`,
    `  ${''.padEnd(width)}default: ${variable.default}`,
  ]);
  return [
    'agentd: an agent server for coding-agent conversations over HTTP.',
    '',
    'Usage: agentd [serve] [--host H] [--port P] [--data-dir D] [--env-file F]',
    '',
    'Options:',
    ...optionLines,
    '',
    'Environment (flags override variables; variables set in the environment override the .env file):',
    ...variableLines,
    '',
    'HTTP API: GET /openapi.json and /asyncapi.json on the running server, Swagger UI at /docs.',
    '',
    'Client commands (agentd <command> --help):',
    '  agentd run "prompt"        one prompt headless: progress on stderr, the answer on stdout',
    '  agentd chat                an interactive conversation',
    '  agentd conversations       list conversations',
    "  agentd events ID --follow  print or follow a conversation's events",
    '',
  ].join('\n');
}

export type CliAction = { action: 'help' } | { action: 'version' } | { action: 'serve'; config: Config; warnings: string[] };

export interface ParseCliOptions {
  /** Where `.env` is looked for; default process.cwd(). */
  cwd?: string;
  /**
   * Which `.env` is read: `project` (the operator's `agentd serve`: `./.env` or `--env-file`), or
   * `user` (`agentd run/chat`: `~/.agentd/.env` only, never the directory the client runs in, whose
   * files belong to whatever repository was cloned there).
   */
  envFile?: 'project' | 'user';
}

export function parseCli(argv: readonly string[], env: NodeJS.ProcessEnv, options: ParseCliOptions = {}): CliAction {
  let flags;
  try {
    flags = parseArgs({
      args: [...argv],
      options: {
        host: { type: 'string' },
        port: { type: 'string' },
        'data-dir': { type: 'string' },
        'env-file': { type: 'string' },
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
  // An empty variable counts as unset (see loadConfig), so the file's value applies.
  const merged: NodeJS.ProcessEnv = { ...env };
  const fromUser = options.envFile === 'user';
  const file = fromUser ? readEnvFile(path.join(userConfigDir(env), '.env'), '/', { optional: true }) : readEnvFile(flags['env-file'], options.cwd ?? process.cwd());
  for (const [name, value] of Object.entries(file.variables)) {
    if (merged[name] === undefined || merged[name] === '') merged[name] = value;
  }
  if (flags.host !== undefined) merged.AGENTD_HOST = flags.host;
  if (flags.port !== undefined) merged.AGENTD_PORT = flags.port;
  if (flags['data-dir'] !== undefined) merged.AGENTD_DATA_DIR = flags['data-dir'];
  return { action: 'serve', config: loadConfig(merged), warnings: file.warnings };
}
