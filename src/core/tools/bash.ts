import { z } from 'zod';
import { loadDescription } from './load-description.js';
import type { ShellRunResult } from './shell-session.js';
import { defineTool, type ToolResult } from './tool.js';

export interface BashToolOptions {
  /** Hard limit when the model gives no `timeout_s`. Default 120 s. */
  defaultTimeoutMs?: number;
  /** Soft limit (no new output) when the model gives no `timeout_s`. Default 30 s. */
  idleTimeoutMs?: number;
  /** Largest `timeout_s` accepted. Default 600 s. */
  maxTimeoutMs?: number;
}

const description = loadDescription(import.meta.url, 'bash.md');
const CWD_STATE_KEY = 'bash.cwd';

export function createBashTool(options: BashToolOptions = {}) {
  const defaultTimeoutMs = options.defaultTimeoutMs ?? 120_000;
  const idleTimeoutMs = options.idleTimeoutMs ?? 30_000;
  const maxTimeoutMs = options.maxTimeoutMs ?? 600_000;
  const parameters = z.object({
    command: z
      .string()
      .describe('The bash command to run; may span several lines. With is_input: the text to send to the running command, "C-c" or "C-d" as keys, or "" to wait for more output.'),
    timeout_s: z
      .number()
      .positive()
      .max(maxTimeoutMs / 1000)
      .optional()
      .describe(
        `Time limit in seconds (default ${defaultTimeoutMs / 1000}, at most ${maxTimeoutMs / 1000}). Without it, a command silent for ${idleTimeoutMs / 1000} s also returns early. Either way a command past its limit keeps running.`,
      ),
    is_input: z.boolean().optional().describe('true: send `command` to the command that is still running instead of starting a new one.'),
  });

  return defineTool({
    name: 'bash',
    description,
    parameters,
    ignoredArguments: ['description'],
    argumentHints: {
      timeout: 'did you mean `timeout_s`? It is in seconds',
      timeout_ms: 'use `timeout_s`, in seconds',
      background: 'end the command with `&` to run it in the background',
      run_in_background: 'end the command with `&` to run it in the background',
    },
    async execute(input, context): Promise<ToolResult> {
      const isInput = input.is_input ?? false;
      if (context.signal.aborted) return { content: 'Not run: the run was stopped.', isError: true };
      if (!isInput && input.command.trim() === '') {
        return { content: 'The command is empty. To see more output of a running command, set is_input: true.', isError: true };
      }
      const timeoutMs = Math.min(input.timeout_s !== undefined ? input.timeout_s * 1000 : defaultTimeoutMs, maxTimeoutMs);
      const limits = { timeoutMs, idleTimeoutMs: input.timeout_s !== undefined ? timeoutMs : Math.min(idleTimeoutMs, timeoutMs) };
      const startedAt = Date.now();
      try {
        const shell = await context.shell();
        const result = await shell.run(input.command, { ...limits, signal: context.signal, isInput });
        const previousCwd = context.state.get(CWD_STATE_KEY) ?? context.workdir;
        context.state.set(CWD_STATE_KEY, result.cwd);
        const described: DescribeContext = {
          ...limits,
          isInput,
          elapsedMs: Date.now() - startedAt,
          aborted: context.signal.aborted,
          abortReason: context.signal.aborted && context.signal.reason instanceof Error ? context.signal.reason.message : null,
          shellAlive: shell.alive,
          cwdChanged: typeof previousCwd === 'string' && previousCwd !== result.cwd,
        };
        // The executor caps the output and saves it whole; the notes around it are kept whole.
        const frame = (shown: string): string => describeResult(result, shown, described);
        const data: Record<string, unknown> = { exit_code: result.exitCode, cwd: result.cwd, timed_out: result.timedOut, still_running: result.stillRunning };
        if (result.pid !== undefined) data.pid = result.pid;
        const output = { text: result.output, frame, ...(result.omitted && { omitted: result.omitted }) };
        return { content: frame(result.output), isError: result.busy === true, data, output };
      } catch (error) {
        return { content: `The shell failed: ${error instanceof Error ? error.message : String(error)}`, isError: true };
      }
    },
  });
}

/** The default instance: 120 s hard limit, 30 s without output, `timeout_s` up to 600 s. */
export const bashTool = createBashTool();

interface DescribeContext {
  isInput: boolean;
  timeoutMs: number;
  idleTimeoutMs: number;
  elapsedMs: number;
  aborted: boolean;
  /** The message of the abort reason: `interrupt` when a user message interrupted the call. */
  abortReason: string | null;
  shellAlive: boolean;
  cwdChanged: boolean;
}

function ranFor(result: ShellRunResult): string {
  return result.elapsedMs === undefined ? '' : ` after ${formatSeconds(result.elapsedMs)}`;
}

function formatSeconds(ms: number): string {
  const seconds = Math.round(ms / 1000);
  return seconds < 60 ? `${seconds} s` : `${Math.floor(seconds / 60)} min ${seconds % 60} s`;
}

/** What the LLM reads: the output (`shown`: as the executor cut it), then short bracketed notes on anything unusual. */
function describeResult(result: ShellRunResult, shown: string, context: DescribeContext): string {
  const notes: string[] = [];
  if (result.pid !== undefined) {
    const log = result.logFile ?? 'its log file';
    notes.push(`[Running in the background with pid ${result.pid}; its output goes to ${log}. Read it with \`tail ${log}\`, stop it with \`kill ${result.pid}\`.]`);
  }
  if (context.aborted) {
    const why = context.abortReason === 'interrupt' ? 'the user sent a new message' : 'the run was paused or cancelled';
    notes.push(result.stillRunning ? `[Stopped waiting: ${why}; the command may still be running.]` : `[Interrupted: ${why}.]`);
  } else if (result.stillRunning && result.interrupted === 'killed') {
    notes.push('[Sent C-c again: the processes of the command were killed (SIGKILL). If it still runs (a loop of the shell itself), one more "C-c" ends the shell; call bash with is_input: true and command "" to see the end.]');
  } else if (result.stillRunning && result.interrupted === 'interrupt') {
    notes.push(`[Sent C-c (SIGINT), but the command is still running${ranFor(result)}: it may ignore interrupts. Send "C-c" again to kill it.]`);
  } else if (result.stillRunning && result.timedOut) {
    const hitHardLimit = context.elapsedMs >= context.timeoutMs - 100;
    const why = hitHardLimit ? `time limit of ${context.timeoutMs / 1000} s reached` : `no new output for ${context.idleTimeoutMs / 1000} s`;
    notes.push(`[Still running${ranFor(result)} (${why}). Call bash with is_input: true and command "" to wait for more output, text to send it input, or "C-c" to interrupt it.]`);
  }
  if (result.exitCode !== null && result.pid === undefined && (context.isInput || result.interrupted)) {
    const how = result.interrupted === 'killed' ? ' (killed by a repeated C-c)' : result.interrupted === 'interrupt' ? ' (after C-c)' : '';
    notes.push(`[The command finished${how} with exit code ${result.exitCode}${ranFor(result)}.]`);
  } else if (result.exitCode !== null && result.exitCode !== 0) notes.push(`[Exit code ${result.exitCode}]`);
  if (context.cwdChanged && !result.stillRunning) notes.push(`[Current directory: ${result.cwd}]`);
  if (!context.shellAlive) notes.push('[The shell exited. A fresh one starts in the workdir with the next command; directory, variables and functions set before are lost.]');
  const parts: string[] = [];
  if (result.restarted) parts.push('[The shell had exited and was restarted in the workdir: directory, variables and functions set before are lost.]');
  if (result.resumed) {
    const idle = result.resumed.idleSeconds >= 120 ? `${Math.round(result.resumed.idleSeconds / 60)} min` : `${result.resumed.idleSeconds} s`;
    parts.push(`[The shell was stopped after ${idle} idle and restarted: the directory (${result.resumed.cwd}) and exported variables were restored; background processes, shell functions, aliases and unexported variables are gone.]`);
  }
  const output = shown.replace(/^\n+|\n+$/g, '');
  if (output !== '') parts.push(output);
  else if (!result.stillRunning && result.pid === undefined && notes.length === 0) parts.push('(no output)');
  return [...parts, ...notes].join('\n');
}
