import type { CommandRunner } from '../commands/command-runner.js';

/** What a syntax check of a file found: null when no checker applies (its language, or the program is missing). */
export interface SyntaxReport {
  /** The checker, as the model reads it (`node --check`). */
  checker: string;
  ok: boolean;
  /** Its diagnostics (cut), empty when ok. */
  output: string;
  timedOut: boolean;
}

export interface SyntaxChecker {
  check(options: { workdir: string; path: string; signal: AbortSignal }): Promise<SyntaxReport | null>;
}

/** Exit status of the check's command when the program it needs is not in the sandbox. */
const NO_CHECKER = 127;
const MAX_OUTPUT_CHARS = 2_000;

interface Checker {
  name: string;
  /** The command, given the file's path quoted for the shell; it exits 127 when its program is missing. */
  command(file: string): string;
}

const needs = (program: string) => `command -v ${program} >/dev/null 2>&1 || exit ${NO_CHECKER}; `;

/** By file name: a fast check of the syntax only, never of types or imports, that writes nothing. */
const CHECKERS: readonly [RegExp, Checker][] = [
  [/\.[cm]?js$/, { name: 'node --check', command: (file) => `${needs('node')}node --check ${file}` }],
  [/\.json$/, { name: 'JSON.parse', command: (file) => `${needs('node')}node -e 'JSON.parse(require("fs").readFileSync(process.argv[1], "utf8"))' ${file}` }],
  // compile() parses without writing the __pycache__ that py_compile leaves in the workdir.
  [/\.py$/, { name: 'python3 compile()', command: (file) => `${needs('python3')}python3 -c 'import sys; compile(open(sys.argv[1], "rb").read(), sys.argv[1], "exec")' ${file} 2>&1 | tail -n 6; exit \${PIPESTATUS[0]}` }],
  [/\.(?:sh|bash)$/, { name: 'bash -n', command: (file) => `bash -n ${file}` }],
  [/\.go$/, { name: 'gofmt -e', command: (file) => `${needs('gofmt')}gofmt -e -l ${file} >/dev/null` }],
  // The project's own TypeScript, on that one file: only its syntax errors (TS1xxx) count.
  [/\.[cm]?tsx?$/, { name: 'tsc --noEmit (syntax errors)', command: (file) => `[ -x node_modules/.bin/tsc ] && [ -f tsconfig.json ] || exit ${NO_CHECKER}; out=$(node_modules/.bin/tsc --noEmit --pretty false --skipLibCheck ${file} 2>&1 | grep -E 'error TS1[0-9]{3}'); [ -z "$out" ] || { printf '%s\\n' "$out"; exit 1; }` }],
];

/**
 * Checks a file's syntax after file_editor wrote it: the checker for its language runs as a
 * one-off command in the sandbox (the same launcher as POST /commands, without network),
 * bounded in time.
 */
export class CommandSyntaxChecker implements SyntaxChecker {
  constructor(private readonly options: { runner: CommandRunner; timeoutMs: number }) {}

  async check(options: { workdir: string; path: string; signal: AbortSignal }): Promise<SyntaxReport | null> {
    const checker = CHECKERS.find(([pattern]) => pattern.test(options.path))?.[1];
    if (!checker) return null;
    const result = await this.options.runner.run({
      command: checker.command(shellQuote(options.path)),
      cwd: options.workdir,
      workdir: options.workdir,
      env: {},
      timeoutMs: this.options.timeoutMs,
      signal: options.signal,
      sandbox: { network: false },
    });
    if (result.exit_code === NO_CHECKER) return null;
    const output = `${result.stdout}${result.stderr}`.trim();
    if (result.timed_out) return { checker: checker.name, ok: true, output: '', timedOut: true };
    return { checker: checker.name, ok: result.exit_code === 0, output: output.length > MAX_OUTPUT_CHARS ? `${output.slice(0, MAX_OUTPUT_CHARS)}\n[…]` : output, timedOut: false };
  }
}

function shellQuote(text: string): string {
  return `'${text.replace(/'/g, `'\\''`)}'`;
}
