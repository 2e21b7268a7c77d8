/**
 * TextSearcher backed by ripgrep (`rg`), used when it is on PATH; the composition root calls
 * `selectTextSearcher()` once and hands the result to `createGrepTool`. rg respects .gitignore,
 * skips hidden and binary files. rg's own `--sortr modified` only sorts within each directory,
 * so matches are collected (at most COLLECT_FACTOR × maxMatches, and maxMatches + 1 per file),
 * then ordered by file mtime here. Output is capped (records and bytes) and the process is
 * killed on cap, timeout or abort.
 * A pattern rg cannot compile but JS can (look-arounds, backreferences) is run by the fallback.
 */
import { spawn } from 'node:child_process';
import type { ProcessLauncher } from '../process/process-launcher.js';
import type { SpawnProcess } from '../process/process-spawner.js';
import { onClose, spawnHere } from '../process/spawn-here.js';
import { signalQuietly } from '../process/process-tree.js';
import { stat } from 'node:fs/promises';
import type { Readable } from 'node:stream';
import { jsTextSearcher } from './js-searcher.js';
import { SearchPatternError } from '../../core/workspace/search-pattern-error.js';
import {
  truncateLine,
  type TextMatch,
  type TextSearcher,
  type TextSearchOptions,
  type TextSearchResult,
} from '../../core/workspace/text-searcher.js';

export interface RipgrepSearcherOptions {
  /** Executable name or path. Default 'rg' (looked up on PATH by the OS). */
  command?: string;
  /** Kill rg after this long and return what it found. Default 20 s. */
  timeoutMs?: number;
  /** Stop reading after this much output. Default 8 MB. */
  maxOutputBytes?: number;
  /** Used for patterns rg rejects but JS accepts. Default: the JS searcher. */
  fallback?: TextSearcher;
  /**
   * Runs rg where the agent's own commands run (the sandbox: only the workdir is there), so a
   * directory swapped for a symlink during the search leads nowhere the agent could not read
   * itself. Default: on the host.
   */
  launcher?: ProcessLauncher;
  /** rg's environment (PATH above all) when it runs through the launcher. */
  env?: Record<string, string>;
  /** Spawns rg (the server's ProcessSpawner). Default: spawned by this process. */
  spawn?: SpawnProcess;
}

const COLLECT_FACTOR = 20;

const detected = new Map<string, Promise<string | undefined>>();

/** `rg --version`'s first line when rg runs, undefined otherwise. Memoised per command. */
export function detectRipgrep(command = 'rg'): Promise<string | undefined> {
  let pending = detected.get(command);
  if (!pending) {
    pending = new Promise((resolve) => {
      let output = '';
      const child = spawn(command, ['--version'], { stdio: ['ignore', 'pipe', 'ignore'] });
      const timer = setTimeout(() => child.kill('SIGKILL'), 5_000);
      child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString('utf8')));
      child.on('error', () => {
        clearTimeout(timer);
        resolve(undefined);
      });
      child.on('close', (code) => {
        clearTimeout(timer);
        resolve(code === 0 && output.startsWith('ripgrep') ? output.split('\n')[0] : undefined);
      });
    });
    detected.set(command, pending);
  }
  return pending;
}

/** ripgrep when it is on PATH, the JS searcher otherwise. */
export async function selectTextSearcher(options: RipgrepSearcherOptions = {}): Promise<TextSearcher> {
  return (await detectRipgrep(options.command)) ? createRipgrepSearcher(options) : jsTextSearcher;
}

/**
 * selectTextSearcher's choice, made at the first search rather than at start-up: a server answers
 * before any `rg --version` has run (the warm-up runs it early, cli/warm-up.ts). Its name is the
 * chosen searcher's once a search has started.
 */
export function textSearcherOnFirstUse(options: RipgrepSearcherOptions = {}): TextSearcher {
  let selecting: Promise<TextSearcher> | undefined;
  let chosen: TextSearcher | undefined;
  return {
    get name() {
      return chosen?.name ?? 'not chosen yet';
    },
    async search(searchOptions) {
      chosen ??= await (selecting ??= selectTextSearcher(options));
      return chosen.search(searchOptions);
    },
  };
}

export function createRipgrepSearcher(options: RipgrepSearcherOptions = {}): TextSearcher {
  const settings = {
    command: options.command ?? 'rg',
    timeoutMs: options.timeoutMs ?? 20_000,
    maxOutputBytes: options.maxOutputBytes ?? 8 * 1024 * 1024,
    fallback: options.fallback ?? jsTextSearcher,
    launcher: options.launcher,
    env: options.env ?? {},
    spawn: options.spawn ?? spawnHere,
  };
  return {
    name: 'ripgrep',
    async search(searchOptions: TextSearchOptions): Promise<TextSearchResult> {
      const outcome = await runRipgrep(settings, searchOptions);
      if (outcome.patternError === undefined) return outcome.result;
      try {
        return await settings.fallback.search(searchOptions);
      } catch (error) {
        if (error instanceof SearchPatternError) throw new SearchPatternError(outcome.patternError);
        throw error;
      }
    },
  };
}

function ripgrepArguments(options: TextSearchOptions): string[] {
  const args = [
    '--no-config',
    '--no-heading',
    '--with-filename',
    '--line-number',
    '--null',
    '--color=never',
    '--no-messages',
    `--max-count=${options.maxMatches + 1}`,
    '--max-filesize=10M',
    `--max-columns=${Math.max(options.maxLineLength * 2, 1000)}`,
    '--max-columns-preview',
    '--glob=!.git',
    '--glob=!node_modules',
  ];
  if (options.include) args.push(`--glob=${options.include}`);
  args.push(`--regexp=${options.pattern}`, '--', options.searchPath);
  return args;
}

interface RunOutcome {
  result: TextSearchResult;
  /** Set when rg could not compile the pattern. */
  patternError?: string;
}

async function runRipgrep(
  settings: { command: string; timeoutMs: number; maxOutputBytes: number; launcher: ProcessLauncher | undefined; env: Record<string, string>; spawn: SpawnProcess },
  options: TextSearchOptions,
): Promise<RunOutcome> {
  const spec = { command: settings.command, args: ripgrepArguments(options), cwd: options.root, env: settings.env };
  const prepared = settings.launcher?.prepare({ ...spec, sandbox: { workdir: options.root, network: false } });
  const child = await settings.spawn({ ...(prepared ?? { ...spec, env: hostEnv() }), detached: false, stdio: ['ignore', 'pipe', 'pipe'] });
  const stdout = child.stdio[1] as Readable;
  const stderrStream = child.stdio[2] as Readable;
  let released = false;
  const release = (): void => {
    if (!released) prepared?.release?.();
    released = true;
  };
  return new Promise((resolve, reject) => {
    onClose(child, release);
    const records: Array<{ path: string; line: number; text: string }> = [];
    const collectLimit = Math.max(options.maxMatches * COLLECT_FACTOR, 2000);
    let pending = '';
    let stderr = '';
    let outputBytes = 0;
    let truncated = false;
    let incomplete: string | undefined;
    let stopped = false;

    const stop = (reason?: string) => {
      if (stopped) return;
      stopped = true;
      if (reason) incomplete = reason;
      if (child.pid !== undefined) signalQuietly(child.pid, 'SIGKILL');
    };
    const timer = setTimeout(() => stop(`timed out after ${settings.timeoutMs / 1000} s`), settings.timeoutMs);
    const onAbort = () => stop('aborted');
    options.signal?.addEventListener('abort', onAbort, { once: true });
    if (options.signal?.aborted) onAbort();

    const takeLine = (record: string) => {
      const nul = record.indexOf('\0');
      const colon = record.indexOf(':', nul + 1);
      if (nul < 0 || colon < 0) return; // e.g. "binary file matches" notices
      const line = Number(record.slice(nul + 1, colon));
      if (!Number.isInteger(line)) return;
      if (records.length >= collectLimit) {
        truncated = true;
        stop();
        return;
      }
      records.push({ path: record.slice(0, nul), line, text: truncateLine(record.slice(colon + 1), options.maxLineLength) });
    };

    stdout.on('data', (chunk: Buffer) => {
      if (stopped) return;
      outputBytes += chunk.length;
      pending += chunk.toString('utf8');
      const lines = pending.split('\n');
      pending = lines.pop() ?? '';
      for (const line of lines) {
        if (stopped) break;
        takeLine(line);
      }
      if (outputBytes > settings.maxOutputBytes) stop('output limit reached');
    });
    stderrStream.on('data', (chunk: Buffer) => {
      if (stderr.length < 64 * 1024) stderr += chunk.toString('utf8');
    });
    child.once('error', (error) => {
      release();
      clearTimeout(timer);
      options.signal?.removeEventListener('abort', onAbort);
      reject(error);
    });
    onClose(child, (code) => {
      clearTimeout(timer);
      options.signal?.removeEventListener('abort', onAbort);
      if (!stopped && pending) takeLine(pending);
      if (!stopped && code === 2 && records.length === 0 && /regex|pattern/i.test(stderr)) {
        resolve({ result: { matches: [], truncated: false }, patternError: `Invalid regular expression: ${stderr.trim()}` });
        return;
      }
      if (!stopped && code === 2 && records.length === 0 && stderr.trim()) {
        reject(new Error(`ripgrep failed: ${stderr.trim().split('\n')[0] ?? ''}`));
        return;
      }
      withModifiedTimes(records)
        .then((sorted) => {
          const matches = sorted.slice(0, options.maxMatches);
          const capped = truncated || sorted.length > options.maxMatches;
          resolve({ result: incomplete ? { matches, truncated: capped, incomplete } : { matches, truncated: capped } });
        })
        .catch(reject);
    });
  });
}

async function withModifiedTimes(records: Array<{ path: string; line: number; text: string }>): Promise<TextMatch[]> {
  const modifiedTimes = new Map<string, number>();
  for (const record of records) {
    if (modifiedTimes.has(record.path)) continue;
    const stats = await stat(record.path).catch(() => undefined);
    modifiedTimes.set(record.path, stats?.mtimeMs ?? 0);
  }
  return records
    .map((record) => ({ ...record, mtimeMs: modifiedTimes.get(record.path) ?? 0 }))
    .sort((a, b) => b.mtimeMs - a.mtimeMs || (a.path < b.path ? -1 : a.path > b.path ? 1 : a.line - b.line));
}

/** rg on the host: this process's environment, as a spawn without `env` would give it. */
function hostEnv(): Record<string, string> {
  return Object.fromEntries(Object.entries(process.env).filter((entry): entry is [string, string] => entry[1] !== undefined));
}
