import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseEnv } from 'node:util';
import { ConfigError } from '../config.js';

/** The config dir of a user's `agentd run/chat`: its `.env` is the only file they read variables from. */
export function userConfigDir(env: NodeJS.ProcessEnv): string {
  return path.join(env.HOME || os.homedir(), '.agentd');
}

const ENV_ASSIGNMENT = /^\s*(?:export\s+)?[A-Za-z_][A-Za-z0-9_.-]*\s*=(.*)$/;

/**
 * The numbers of the lines node's parseEnv skips without a word: neither blank, nor a comment,
 * nor `NAME=value` (a quoted value may go on over the following lines).
 */
function malformedEnvLines(text: string): number[] {
  const lines = text.split(/\r?\n/);
  const bad: number[] = [];
  let openQuote: string | null = null;
  lines.forEach((line, index) => {
    if (openQuote !== null) {
      if (line.includes(openQuote)) openQuote = null;
      return;
    }
    const trimmed = line.trim();
    if (trimmed === '' || trimmed.startsWith('#')) return;
    const assignment = ENV_ASSIGNMENT.exec(line);
    if (!assignment) return void bad.push(index + 1);
    const value = assignment[1]!.trim();
    const quote = value[0];
    if ((quote === '"' || quote === "'" || quote === '`') && !value.slice(1).includes(quote)) openQuote = quote;
  });
  return bad;
}

/** The variables of `--env-file PATH` (which must exist unless optional), else of `./.env` when there is one; with a warning per line it ignores. */
export function readEnvFile(explicit: string | undefined, cwd: string, options: { optional?: boolean } = {}): { variables: NodeJS.ProcessEnv; warnings: string[] } {
  const file = path.resolve(cwd, explicit ?? '.env');
  let text: string;
  try {
    text = fs.readFileSync(file, 'utf8');
  } catch (error) {
    if ((explicit === undefined || options.optional) && (error as NodeJS.ErrnoException).code === 'ENOENT') return { variables: {}, warnings: [] };
    throw new ConfigError(`cannot read the env file ${file}: ${(error as NodeJS.ErrnoException).code ?? (error as Error).message}`);
  }
  const warnings = malformedEnvLines(text).map((line) => `${file}, line ${line}: not NAME=value, ignored`);
  return { variables: parseEnv(text), warnings };
}
