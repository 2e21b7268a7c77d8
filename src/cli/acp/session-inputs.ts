import type * as acp from '@agentclientprotocol/sdk';
import type { CreateConversationInput, SendMessageInput } from '../../client/index.js';

type McpServers = NonNullable<CreateConversationInput['mcp_servers']>;
type Part = Exclude<SendMessageInput['content'], string>[number];

const IMAGE_TYPES = new Set(['image/png', 'image/jpeg', 'image/gif', 'image/webp']);

/**
 * A prompt's content blocks as an agentd message: text as text, images inline, embedded context
 * (a file the user attached) as text that says where it comes from, a link as its URI. Audio is
 * not supported (the capabilities say so) and is refused by the caller.
 */
export function messageContent(blocks: readonly acp.ContentBlock[]): SendMessageInput['content'] {
  const parts: Part[] = [];
  for (const block of blocks) {
    switch (block.type) {
      case 'text':
        if (block.text) parts.push({ type: 'text', text: block.text });
        break;
      case 'image':
        if (!IMAGE_TYPES.has(block.mimeType)) throw new UnsupportedContent(`images of type ${block.mimeType} are not supported (PNG, JPEG, GIF, WebP are)`);
        parts.push({ type: 'image', data: block.data, media_type: block.mimeType as 'image/png' });
        break;
      case 'resource':
        parts.push({ type: 'text', text: 'text' in block.resource ? `<context uri="${block.resource.uri}">\n${block.resource.text}\n</context>` : `[attached: ${block.resource.uri}]` });
        break;
      case 'resource_link':
        parts.push({ type: 'text', text: `[${block.name}](${block.uri})` });
        break;
      default:
        throw new UnsupportedContent(`${block.type} content is not supported`);
    }
  }
  if (parts.length === 0) throw new UnsupportedContent('the prompt is empty');
  return parts.every((part) => part.type === 'text') ? parts.map((part) => (part as { text: string }).text).join('\n\n') : parts;
}

/** The editor's MCP servers in the `.mcp.json` shape a conversation takes (names made valid for agentd). */
export function mcpServers(servers: readonly acp.McpServer[]): McpServers {
  const out: McpServers = {};
  for (const server of servers) {
    const name = uniqueName(server.name, out);
    if ('type' in server && (server.type === 'http' || server.type === 'sse')) {
      out[name] = { type: server.type, url: server.url, headers: Object.fromEntries(server.headers.map((header) => [header.name, header.value])) };
    } else if ('command' in server) {
      out[name] = { command: server.command, args: [...server.args], env: Object.fromEntries(server.env.map((variable) => [variable.name, variable.value])) };
    }
  }
  return out;
}

function uniqueName(wanted: string, taken: McpServers): string {
  const base = wanted.replace(/[^A-Za-z0-9_-]+/g, '-').replace(/_{2,}/g, '_').slice(0, 36) || 'server';
  let name = base;
  for (let n = 2; name in taken; n += 1) name = `${base}-${n}`;
  return name;
}

/** A prompt the bridge cannot pass on: a JSON-RPC invalid-params error. */
export class UnsupportedContent extends Error {
  override name = 'UnsupportedContent';
}
