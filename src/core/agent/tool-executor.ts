import { z } from 'zod';
import { saveFullOutput } from '../tools/agent-area.js';
import type { ToolContext, ToolDefinition, ToolResult } from '../tools/tool.js';
import { cutOutput, joinCut, MAX_OBSERVATION_CHARS, savedText, type ToolOutput } from '../tools/tool-output.js';

export { MAX_OBSERVATION_CHARS } from '../tools/tool-output.js';
const ABORT_GRACE_MS = 3_000;
/** Malformed arguments are shown back to the model up to this many characters (their ends kept). */
const MAX_ECHOED_ARGUMENT_CHARS = 2_000;

export type ParsedArguments = { ok: true; value: Record<string, unknown> } | { ok: false; error: string };

/** The LLM's argument text as an object, or a message it can act on that shows what it sent. */
export function parseArguments(raw: string): ParsedArguments {
  if (raw.trim() === '') return { ok: true, value: {} };
  try {
    const value: unknown = JSON.parse(raw);
    if (typeof value === 'object' && value !== null && !Array.isArray(value)) return { ok: true, value: value as Record<string, unknown> };
    return { ok: false, error: `The arguments must be a JSON object. You sent:\n${echoed(raw)}` };
  } catch (error) {
    return { ok: false, error: `The arguments are not valid JSON (${(error as Error).message}). Send a JSON object that matches the tool's parameters. You sent:\n${echoed(raw)}` };
  }
}

/** Argument text as the model is shown it: whole, or its ends around a marker (one the secret masker knows). */
function echoed(raw: string): string {
  const cut = cutOutput(raw, undefined, MAX_ECHOED_ARGUMENT_CHARS);
  return cut ? joinCut(cut, 'not shown again') : raw;
}

/**
 * The enabled tool a call names: its own name, or the one tool whose name it matches but for
 * case (models write `Bash` or `GREP`); else the name as sent, which the executor refuses.
 */
export function canonicalToolName(tools: ReadonlyMap<string, unknown>, name: string): string {
  if (tools.has(name)) return name;
  const lower = name.toLowerCase();
  const matches = [...tools.keys()].filter((candidate) => candidate.toLowerCase() === lower);
  return matches.length === 1 ? matches[0]! : name;
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
  const checked = checkArgumentNames(tool, args.value);
  if (!checked.ok) return { isError: true, content: checked.error, data: { error: 'invalid_arguments' } };
  const parsed = tool.parameters.safeParse(checked.value);
  if (!parsed.success) {
    return { isError: true, content: `Invalid arguments for ${name}:\n${z.prettifyError(parsed.error)}`, data: { error: 'invalid_arguments' } };
  }
  let result: ToolResult;
  try {
    result = await untilAbortedWithGrace(tool.execute(parsed.data, context), context.signal);
  } catch (error) {
    result = { isError: true, content: `${name} failed: ${(error as Error).message ?? String(error)}`, data: { error: 'tool_failed' } };
  }
  return capOutput(name, result, context);
}

/**
 * The one place tool output is capped: a result longer than MAX_OBSERVATION_CHARS (its raw
 * output, when the tool set one, else all of it) keeps its first and last lines, with a marker
 * between them giving the lines cut and the file under .agentd/outputs/ that holds the full text.
 */
async function capOutput(tool: string, result: ToolResult, context: ToolContext): Promise<ToolResult> {
  const { output: raw, ...rest } = result;
  const output: ToolOutput = raw ?? { text: result.content, frame: (shown) => shown };
  const cut = cutOutput(output.text, output.omitted, MAX_OBSERVATION_CHARS);
  if (!cut) return rest;
  // A workdir that refuses the write (a planted symlink, a full disk) still gets the cut result.
  const saved = await saveFullOutput(savedText(output), { tool, context }).catch(() => null);
  const where = !saved
    ? 'the full output could not be saved'
    : output.omitted
      ? `its first and last parts are in ${saved.relative} (it was too long to keep whole)`
      : `full output in ${saved.relative}`;
  const shown = joinCut(cut, where);
  const hint = saved
    ? `\n[To read the cut part: \`sed -n '${cut.from.line},${cut.from.line + 199}p' ${saved.absolute}\` (or file_editor view with view_range); to search it: \`grep -n PATTERN ${saved.absolute}\`.]`
    : '';
  return { ...rest, content: `${output.frame(shown)}${hint}`, data: { ...rest.data, truncated: true, ...(saved && { full_output: saved.absolute }) } };
}

/** Names other agents use for the same parameter: accepted when the tool has the target and not the alias. */
const ARGUMENT_ALIASES: Record<string, string> = {
  file_path: 'path',
  filePath: 'path',
  filename: 'path',
  old_string: 'old_str',
  new_string: 'new_str',
  content: 'file_text',
  cmd: 'command',
};

/**
 * Unknown argument names are never dropped silently (zod would strip them): a known alias is
 * renamed, anything else is refused with the nearest real name or the tool's own hint.
 */
export function checkArgumentNames(tool: ToolDefinition, value: Record<string, unknown>): ParsedArguments {
  const shape = (tool.parameters as { shape?: Record<string, unknown> }).shape;
  if (!shape || typeof shape !== 'object') return { ok: true, value };
  const known = Object.keys(shape);
  const out: Record<string, unknown> = {};
  const problems: string[] = [];
  for (const [key, arg] of Object.entries(value)) {
    if (known.includes(key)) {
      out[key] = arg;
      continue;
    }
    if (tool.ignoredArguments?.includes(key)) continue;
    const alias = tool.argumentAliases?.[key] ?? ARGUMENT_ALIASES[key];
    if (alias && known.includes(alias) && !(alias in value)) {
      out[alias] = arg;
      continue;
    }
    const hint = tool.argumentHints?.[key] ?? nearestName(key, known);
    problems.push(`\`${key}\`${hint ? ` (${hint})` : ''}`);
  }
  if (problems.length === 0) return { ok: true, value: out };
  return {
    ok: false,
    error: `Not run: ${tool.name} has no argument ${problems.join(', ')}. Its arguments are: ${known.map((name) => `\`${name}\``).join(', ')}. Call it again with those names.`,
  };
}

function nearestName(name: string, known: readonly string[]): string | null {
  const lower = name.toLowerCase();
  let best: { name: string; distance: number } | null = null;
  for (const candidate of known) {
    const distance = candidate.startsWith(lower) || lower.startsWith(candidate) ? 1 : editDistance(lower, candidate);
    if (distance <= Math.max(2, Math.floor(candidate.length / 3)) && (!best || distance < best.distance)) best = { name: candidate, distance };
  }
  return best ? `did you mean \`${best.name}\`?` : null;
}

function editDistance(a: string, b: string): number {
  let previous = Array.from({ length: b.length + 1 }, (_, index) => index);
  for (let i = 1; i <= a.length; i++) {
    const current = [i];
    for (let j = 1; j <= b.length; j++) current[j] = Math.min(previous[j]! + 1, current[j - 1]! + 1, previous[j - 1]! + (a[i - 1] === b[j - 1] ? 0 : 1));
    previous = current;
  }
  return previous[b.length]!;
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
