import { z } from 'zod';
import type { ToolContext, ToolDefinition, ToolResult } from '../tools/tool.js';

export const MAX_OBSERVATION_CHARS = 60_000;
const ABORT_GRACE_MS = 3_000;

/** Cut the middle out of text longer than `max`, with a marker saying how much went. */
export function truncateMiddle(text: string, max: number): { text: string; truncated: boolean } {
  if (text.length <= max) return { text, truncated: false };
  const keep = Math.floor((max - 80) / 2);
  const cut = text.length - 2 * keep;
  return { text: `${text.slice(0, keep)}\n[... ${cut} characters truncated ...]\n${text.slice(text.length - keep)}`, truncated: true };
}

export type ParsedArguments = { ok: true; value: Record<string, unknown> } | { ok: false; error: string };

/** The LLM's argument text as an object, or a message it can act on. */
export function parseArguments(raw: string): ParsedArguments {
  if (raw.trim() === '') return { ok: true, value: {} };
  try {
    const value: unknown = JSON.parse(raw);
    if (typeof value === 'object' && value !== null && !Array.isArray(value)) return { ok: true, value: value as Record<string, unknown> };
    return { ok: false, error: 'The arguments must be a JSON object.' };
  } catch (error) {
    return { ok: false, error: `The arguments are not valid JSON (${(error as Error).message}). Send a JSON object that matches the tool's parameters.` };
  }
}

/**
 * Runs one tool call: re-validates the arguments against the tool's schema, turns failures into
 * text the model can act on, caps the output, and returns promptly on abort even if the tool
 * does not.
 */
export async function executeTool(options: {
  tools: ReadonlyMap<string, ToolDefinition>;
  name: string;
  args: ParsedArguments;
  context: ToolContext;
}): Promise<ToolResult> {
  const { tools, name, args, context } = options;
  const tool = tools.get(name);
  if (!tool) {
    return { isError: true, content: `There is no tool named "${name}". Available tools: ${[...tools.keys()].join(', ')}.`, data: { error: 'unknown_tool' } };
  }
  if (!args.ok) return { isError: true, content: args.error, data: { error: 'invalid_arguments' } };
  const parsed = tool.parameters.safeParse(args.value);
  if (!parsed.success) {
    return { isError: true, content: `Invalid arguments for ${name}:\n${z.prettifyError(parsed.error)}`, data: { error: 'invalid_arguments' } };
  }
  let result: ToolResult;
  try {
    result = await untilAbortedWithGrace(tool.execute(parsed.data, context), context.signal);
  } catch (error) {
    result = { isError: true, content: `${name} failed: ${(error as Error).message ?? String(error)}`, data: { error: 'tool_failed' } };
  }
  const capped = truncateMiddle(result.content, MAX_OBSERVATION_CHARS);
  return capped.truncated ? { ...result, content: capped.text, data: { ...result.data, truncated: true } } : result;
}

function untilAbortedWithGrace(work: Promise<ToolResult>, signal: AbortSignal): Promise<ToolResult> {
  return new Promise((resolve, reject) => {
    let timer: NodeJS.Timeout | undefined;
    const onAbort = () => {
      timer = setTimeout(() => resolve({ isError: true, content: 'Interrupted: the run was stopped while this tool was running.', data: { interrupted: true } }), ABORT_GRACE_MS);
    };
    if (signal.aborted) onAbort();
    else signal.addEventListener('abort', onAbort, { once: true });
    work.then(resolve, reject).finally(() => {
      if (timer) clearTimeout(timer);
      signal.removeEventListener('abort', onAbort);
    });
  });
}
