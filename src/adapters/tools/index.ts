import type { Config } from '../../config.js';
import { VERSION } from '../../version.js';
import type { ProcessLauncher } from '../process/process-launcher.js';
import type { SpawnProcess } from '../process/process-spawner.js';
import { textSearcherOnFirstUse } from '../search/ripgrep-searcher.js';
import { UndiciWebFetcher } from '../web/undici-web-fetcher.js';
import { ProviderWebSearcher } from '../web/web-search-providers.js';
import { askUserTool } from '../../core/tools/ask-user.js';
import { bashTool } from '../../core/tools/bash.js';
import type { CommandRunner } from '../../core/commands/command-runner.js';
import { createFileEditorTool } from '../../core/tools/file-editor.js';
import { CommandSyntaxChecker } from '../../core/tools/syntax-check.js';
import { finishTool } from '../../core/tools/finish.js';
import { globTool } from '../../core/tools/glob.js';
import { createGrepTool } from '../../core/tools/grep.js';
import { skillTool } from '../../core/tools/skill.js';
import { slashCommandTool } from '../../core/tools/slash-command.js';
import { taskTrackerTool } from '../../core/tools/task-tracker.js';
import { taskTool } from '../../core/tools/task.js';
import type { ToolDefinition } from '../../core/tools/tool.js';
import { createWebFetchTool } from '../../core/tools/web-fetch.js';
import { createWebSearchTool } from '../../core/tools/web-search.js';

/**
 * The built-in tools, in the order the LLM is offered them: grep searches with ripgrep when the
 * machine has it, and web_search exists only when the operator configured a provider.
 */
export async function createTools(config: Config, launcher: ProcessLauncher, spawn?: SpawnProcess, commandRunner?: CommandRunner): Promise<{ tools: ToolDefinition[]; close(): Promise<void> }> {
  // file_editor checks what it wrote with the one-off command runner (in the sandbox), unless AGENTD_CHECK_EDITS_S is 0.
  const checker = commandRunner && config.editCheckTimeoutMs > 0 ? new CommandSyntaxChecker({ runner: commandRunner, timeoutMs: config.editCheckTimeoutMs }) : undefined;
  const fileEditorTool = createFileEditorTool(checker ? { checker } : {});
  const webFetcher = new UndiciWebFetcher({ ...config.web.fetch, userAgent: `agentd/${VERSION} (web_fetch)` });
  const webSearcher = config.web.search ? new ProviderWebSearcher({ ...config.web.search, timeoutMs: config.web.fetch.timeoutMs, userAgent: `agentd/${VERSION}` }) : null;
  const grep = createGrepTool(textSearcherOnFirstUse({ launcher, env: { ...config.agentEnv.hostEnv }, ...(spawn && { spawn }) }));
  const tools = [bashTool, fileEditorTool, globTool, grep, taskTrackerTool, askUserTool, createWebFetchTool(webFetcher), ...(webSearcher ? [createWebSearchTool(webSearcher)] : []), taskTool, skillTool, slashCommandTool, finishTool] as ToolDefinition[];
  return {
    tools,
    /** Closes the web tools' connection pools. */
    async close() {
      await webFetcher.close();
      await webSearcher?.close();
    },
  };
}
