import { z } from 'zod';
import type { ToolDefinition, ToolResult } from '../tools/tool.js';
import type { McpCallResult, McpToolInfo } from './mcp-client.js';

/** OpenAI-compatible tool names: letters, digits, `_` and `-`, at most 64. */
const TOOL_NAME = /^[A-Za-z0-9_-]{1,64}$/;
const MAX_IMAGE_DATA_CHARS = 2_000_000;

export function mcpToolName(server: string, tool: string): string | null {
  const name = `mcp__${server}__${tool}`;
  return TOOL_NAME.test(name) ? name : null;
}

/**
 * An MCP tool as an agent tool: its JSON Schema is what the LLM sees and what the arguments are
 * validated against (zod's fromJSONSchema; a schema it cannot read validates as any object).
 */
export function mcpToolDefinition(options: {
  server: string;
  tool: McpToolInfo;
  call: (args: Record<string, unknown>, signal: AbortSignal) => Promise<ToolResult>;
}): ToolDefinition | null {
  const name = mcpToolName(options.server, options.tool.name);
  if (name === null) return null;
  const schema = { type: 'object', ...options.tool.inputSchema };
  let parameters: z.ZodType;
  try {
    parameters = z.fromJSONSchema(schema as Parameters<typeof z.fromJSONSchema>[0]);
  } catch {
    parameters = z.record(z.string(), z.unknown());
  }
  return {
    name,
    description: options.tool.description || `${options.tool.name} (MCP server ${options.server})`,
    parameters,
    jsonSchema: schema,
    execute: (input, context) => options.call(input as Record<string, unknown>, context.signal),
  };
}

/** An MCP result as an observation: text as is, images as data, resources by their text or uri. */
export function mcpResultToObservation(result: McpCallResult): ToolResult {
  const parts: string[] = [];
  const images: { media_type: string; data: string }[] = [];
  for (const item of result.content) {
    if (item.type === 'text') parts.push(item.text);
    else if (item.type === 'image' || item.type === 'audio') {
      parts.push(`[${item.type}: ${item.mimeType}, ${Math.round((item.data.length * 3) / 4)} bytes]`);
      if (item.type === 'image' && item.data.length <= MAX_IMAGE_DATA_CHARS) images.push({ media_type: item.mimeType, data: item.data });
    } else if (item.type === 'resource') parts.push(item.text !== undefined ? `[resource ${item.uri}]\n${item.text}` : `[resource ${item.uri}${item.mimeType ? ` (${item.mimeType})` : ''}]`);
    else if (item.type === 'resource_link') parts.push(`[resource link ${item.uri}${item.name ? ` (${item.name})` : ''}]`);
  }
  if (parts.length === 0 && result.structuredContent !== undefined) parts.push(JSON.stringify(result.structuredContent));
  const content = parts.join('\n') || (result.isError ? 'The tool failed without a message.' : '(no output)');
  return {
    content,
    isError: result.isError,
    data: { ...(images.length > 0 && { images }), ...(result.structuredContent !== undefined && { structured_content: result.structuredContent }) },
  };
}
