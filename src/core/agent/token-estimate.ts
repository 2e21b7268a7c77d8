import type { LlmMessage, LlmToolSchema } from './llm.js';

/**
 * About how many tokens a message takes in a request: ~4 characters a token for its text, its
 * calls and its reasoning (sent back to the provider within a tool loop), ~1,000 for an image (a
 * typical tile budget), plus a few for the message's framing. Only an estimate: a run calibrates it
 * against the counts the provider reports (see llm-request.ts).
 */
export function estimateTokens(message: LlmMessage): number {
  let chars = 0;
  if (typeof message.content === 'string') chars = message.content.length;
  else if (message.role === 'user') chars = message.content.reduce((sum, part) => sum + (part.type === 'text' ? part.text.length : 4000), 0);
  if (message.role === 'assistant') {
    for (const call of message.tool_calls ?? []) chars += call.name.length + call.arguments.length + 16;
    chars += message.reasoning?.text.length ?? 0;
  }
  return Math.ceil(chars / 4) + 4;
}

const schemaTokens = new WeakMap<LlmToolSchema, number>();

/**
 * The tool schemas a request offers: each schema estimated once (a tool's schema object is made
 * once, see ToolOffer.schemasOf), so a run's list, new at each run and changed in place when an
 * MCP server's tools change, costs a sum, not its JSON again.
 */
export function estimateToolTokens(tools: readonly LlmToolSchema[]): number {
  let total = 0;
  for (const tool of tools) {
    let tokens = schemaTokens.get(tool);
    if (tokens === undefined) {
      tokens = Math.ceil(JSON.stringify(tool).length / 4) + 1;
      schemaTokens.set(tool, tokens);
    }
    total += tokens;
  }
  return total;
}
