import type { ShellState } from '../../core/tools/shell-session.js';

/** Variables bash manages itself: never restored. */
const BASH_OWN = new Set(['PWD', 'OLDPWD', 'SHLVL', '_']);
const DECLARE = /^declare -x ([A-Za-z_][A-Za-z0-9_]*)(?:="((?:[^"\\]|\\[\s\S])*)"|=\$'((?:[^'\\]|\\[\s\S])*)')?$/gm;
const ANSI_C = /\\(x[0-9A-Fa-f]{1,2}|u[0-9A-Fa-f]{1,4}|U[0-9A-Fa-f]{1,8}|[0-7]{1,3}|c.|[\s\S])/g;
const SIMPLE_ESCAPES: Record<string, string> = { n: '\n', t: '\t', r: '\r', a: '\x07', b: '\b', e: '\x1b', E: '\x1b', f: '\f', v: '\v' };

/** The value of a `$'...'` word (bash's ANSI-C quoting); octal and hex escapes are bytes of UTF-8 text. */
function decodeAnsiC(text: string): string {
  const parts: Buffer[] = [];
  let last = 0;
  for (const match of text.matchAll(ANSI_C)) {
    parts.push(Buffer.from(text.slice(last, match.index), 'utf8'));
    last = match.index + match[0].length;
    const escape = match[1] as string;
    const head = escape[0] as string;
    if (escape.length > 1 && (head === 'u' || head === 'U')) parts.push(Buffer.from(String.fromCodePoint(parseInt(escape.slice(1), 16)), 'utf8'));
    else if (escape.length > 1 && head === 'x') parts.push(Buffer.from([parseInt(escape.slice(1), 16)]));
    else if (/^[0-7]/.test(escape)) parts.push(Buffer.from([parseInt(escape, 8) & 0xff]));
    else if (head === 'c' && escape.length === 2) parts.push(Buffer.from([escape.charCodeAt(1) & 0x1f]));
    else parts.push(Buffer.from(SIMPLE_ESCAPES[escape] ?? escape, 'utf8'));
  }
  parts.push(Buffer.from(text.slice(last), 'utf8'));
  return Buffer.concat(parts).toString('utf8');
}

/**
 * The command whose output `shellStateFrom` reads: bash's `export -p` (`declare -x NAME="value"`
 * with `"`, `\`, `$` and backquotes escaped, or `NAME=$'value'` when it holds control characters).
 */
export const EXPORTS_COMMAND = 'export -p';

/**
 * What to restore in a fresh shell: exported variables whose values differ from what the server
 * sets (`serverEnv`, which the fresh shell gets anyway, current values included) and server-set
 * variables the shell unset. Variables exported without a value are skipped.
 */
export function shellStateFrom(options: { cwd: string; exports: string; serverEnv: Readonly<Record<string, string>> }): ShellState {
  const current = new Map<string, string>();
  for (const match of options.exports.matchAll(DECLARE)) {
    const [, name, quoted, ansiC] = match;
    if (name === undefined || BASH_OWN.has(name)) continue;
    if (quoted !== undefined) current.set(name, quoted.replace(/\\([\s\S])/g, '$1'));
    else if (ansiC !== undefined) current.set(name, decodeAnsiC(ansiC));
  }
  const env: Record<string, string> = {};
  for (const [name, value] of current) if (options.serverEnv[name] !== value) env[name] = value;
  const unset = Object.keys(options.serverEnv).filter((name) => !current.has(name) && !BASH_OWN.has(name));
  return { cwd: options.cwd, env, unset };
}
