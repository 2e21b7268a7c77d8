import { z } from 'zod';
import { EMPTY_CATALOG, type ProjectCatalog } from '../catalog/project-catalog.js';
import type { ConversationRecord } from '../conversations/conversation-record.js';
import { SKILL_TOOL_NAME } from '../tools/skill.js';
import { SLASH_COMMAND_TOOL_NAME } from '../tools/slash-command.js';
import { TASK_TOOL_NAME } from '../tools/task.js';
import type { ToolDefinition } from '../tools/tool.js';
import type { LlmToolSchema } from './llm.js';

export interface ToolOfferDeps {
  tools: readonly ToolDefinition[];
  /** The project's skills, slash commands and subagent definitions (never throws: bad files are listed in `errors`). */
  catalog?: ((record: ConversationRecord) => Promise<ProjectCatalog>) | undefined;
  /** Levels of subagents below the main agent (default 1: a subagent has no `task` tool). */
  maxSubagentDepth?: number | undefined;
  /** Models a workdir's agent file may pick besides the conversation's own (default: none). */
  subagentModels?: readonly string[] | undefined;
  onError?: ((error: unknown, context: Record<string, unknown>) => void) | undefined;
}

/** The LLM's view of each tool definition (see schemasOf). */
const toolSchemas = new WeakMap<ToolDefinition, LlmToolSchema>();

/**
 * What a run of a conversation is offered: the tools the conversation enables, narrowed by what
 * the project's catalog holds (skills, slash commands, subagents), and each tool's schema.
 */
export class ToolOffer {
  private readonly toolsByName: ReadonlyMap<string, ToolDefinition>;

  constructor(private readonly deps: ToolOfferDeps) {
    this.toolsByName = new Map(deps.tools.map((tool) => [tool.name, tool]));
  }

  get maxSubagentDepth(): number {
    return this.deps.maxSubagentDepth ?? 1;
  }

  get subagentModels(): readonly string[] {
    return this.deps.subagentModels ?? [];
  }

  /** The skills, slash commands and subagent definitions a run of this conversation can use (GET /skills shows them). */
  async catalogOf(record: ConversationRecord): Promise<ProjectCatalog> {
    if (!this.deps.catalog) return EMPTY_CATALOG;
    try {
      return await this.deps.catalog(record);
    } catch (error) {
      this.deps.onError?.(error, { conversation_id: record.id, stage: 'catalog' });
      return EMPTY_CATALOG;
    }
  }

  enabled(record: ConversationRecord): ToolDefinition[] {
    return record.tools.map((name) => this.toolsByName.get(name)).filter((tool): tool is ToolDefinition => tool !== undefined);
  }

  /** The enabled tools worth offering: `skill` and `slash_command` only when the project has some, `task` while subagents are allowed. */
  offered(record: ConversationRecord, catalog: ProjectCatalog): ToolDefinition[] {
    return this.enabled(record).filter((tool) => {
      if (tool.name === SKILL_TOOL_NAME) return catalog.skills.length > 0;
      if (tool.name === SLASH_COMMAND_TOOL_NAME) return catalog.commands.length > 0;
      if (tool.name === TASK_TOOL_NAME) return this.maxSubagentDepth > 0;
      return true;
    });
  }

  /** Each tool's schema is derived once: a tool definition never changes. */
  schemasOf(tools: readonly ToolDefinition[]): LlmToolSchema[] {
    return tools.map((tool) => {
      let schema = toolSchemas.get(tool);
      if (!schema) {
        const { $schema: _ignored, ...parameters } = tool.jsonSchema ?? (z.toJSONSchema(tool.parameters, { io: 'input' }) as Record<string, unknown>);
        schema = { name: tool.name, description: tool.description, parameters };
        toolSchemas.set(tool, schema);
      }
      return schema;
    });
  }
}

/** Whether the conversation reads the project's own files (AGENTS.md, settings, catalog): `setting_sources` holds `project`. */
export function readsProject(record: ConversationRecord): boolean {
  return (record.setting_sources ?? ['project']).includes('project');
}
