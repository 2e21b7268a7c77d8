import type { z } from 'zod';
import type { ProjectCatalog } from '../catalog/project-catalog.js';
import type { WorkdirFileSystem } from '../workspace/workdir-file-system.js';
import type { ShellSession } from './shell-session.js';
import type { ToolOutput } from './tool-output.js';

/** What a tool can reach while it runs: the conversation's workdir, its shell, an abort signal. */
export interface ToolContext {
  conversationId: string;
  /** Absolute, real path of the conversation's workdir. Tools never touch anything outside it. */
  workdir: string;
  /** The workdir's files, every path confined to it (pinned): tools never call node:fs themselves. */
  workdirFs: WorkdirFileSystem;
  /** Aborted on pause, cancel or delete: a tool must stop promptly and return what it has. */
  signal: AbortSignal;
  /** The conversation's persistent shell (started lazily by the runtime). */
  shell: () => Promise<ShellSession>;
  /** Per-conversation scratch state a tool may keep between calls (e.g. file_editor's undo history). */
  state: Map<string, unknown>;
  /** The conversation's `sandbox.network`: what the web tools may reach (false: nothing). */
  network?: boolean | 'host';
  /** The id of the call being executed (set per call by the loop). */
  toolCallId?: string;
  /**
   * Ask the user and wait for the answer (POST /answer or their next message) without holding
   * anything but a promise. Rejects with the abort reason when the run is paused or canceled.
   */
  askUser?: (question: UserQuestion) => Promise<UserAnswer>;
  /** The project's skills, slash commands and subagent definitions, read at the start of the run. */
  catalog?: ProjectCatalog;
  /** Runs a subagent to completion (the `task` tool); absent past the depth limit. */
  runSubagent?: (request: SubagentRequest) => Promise<ToolResult>;
}

export interface UserQuestion {
  toolCallId: string;
  question: string;
  options?: string[] | undefined;
}

export interface UserAnswer {
  content: string;
  /** `answer`: POST /answer; `message`: the user's next message. */
  via: 'answer' | 'message';
}

/** What the `task` tool asks for. */
export interface SubagentRequest {
  toolCallId: string;
  description: string;
  prompt: string;
  subagent_type?: string | undefined;
}

/** What the LLM sees (`content`), whether it is an error, and tool-specific data for the event. */
export interface ToolResult {
  content: string;
  isError: boolean;
  data?: Record<string, unknown>;
  /** The raw output inside `content` (a command's), when the tool has one: what the executor caps and saves. */
  output?: ToolOutput;
}

/**
 * A tool is data plus one `execute`: the zod schema is the single source of the JSON schema the
 * LLM sees and of the validation of the arguments it sends back.
 */
export interface ToolDefinition<Schema extends z.ZodType = z.ZodType> {
  name: string;
  description: string;
  parameters: Schema;
  /** The JSON Schema the LLM sees when it is not derived from `parameters` (MCP tools bring their own). */
  jsonSchema?: Record<string, unknown>;
  /** Arguments models often send that this tool does not take, with what to do instead (the hint in the error). */
  argumentHints?: Record<string, string>;
  /** Names other agents give this tool's parameters (`glob` → `include`): renamed when the real one is absent. */
  argumentAliases?: Record<string, string>;
  /** Arguments that change nothing here (bash `description`): accepted and ignored. */
  ignoredArguments?: readonly string[];
  /** Calls of this tool made in one reply run at the same time (the `task` tool's subagents). */
  concurrent?: boolean;
  execute(input: z.infer<Schema>, context: ToolContext): Promise<ToolResult>;
}

export function defineTool<Schema extends z.ZodType>(tool: ToolDefinition<Schema>): ToolDefinition<Schema> {
  return tool;
}
