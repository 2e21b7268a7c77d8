import { describe, expect, it } from 'vitest';
import { EventUpdates } from '../../src/cli/acp/event-updates.js';
import type { StreamEvent } from '../../src/client/index.js';
import { rulesFor } from '../../src/cli/acp/permission-prompts.js';
import { messageContent, mcpServers } from '../../src/cli/acp/session-inputs.js';

/**
 * The mapping of agentd events to ACP updates, on events written by hand: the streamed text and
 * its persisted message never show twice, and a message whose deltas were lost (a dropped
 * connection) still shows whole. Reasoning events (v3) become thought chunks.
 */
const envelope = { id: '00000000-0000-4000-8000-000000000001', conversation_id: '00000000-0000-4000-8000-000000000002', timestamp: '2026-01-01T00:00:00.000Z' };
let seq = 0;
const persisted = (fields: Record<string, unknown>) => ({ ...envelope, seq: ++seq, ...fields }) as unknown as StreamEvent;
const delta = (text: string) => ({ kind: 'message_delta', conversation_id: envelope.conversation_id, run_id: null, content_delta: text }) as StreamEvent;

function texts(updates: ReturnType<EventUpdates['of']>): string[] {
  return updates.map((update) => {
    const content = 'content' in update && !Array.isArray(update.content) ? update.content : null;
    return `${update.sessionUpdate}:${content && content.type === 'text' ? content.text : ''}`;
  });
}

describe('event updates', () => {
  it('sends the part of a message its deltas did not, and the whole message when they were lost', () => {
    const mapper = new EventUpdates({ workdir: '/w', contextTokens: 1000 });
    const streamed = [...mapper.of(delta('Hel')), ...mapper.of(delta('lo')), ...mapper.of(persisted({ kind: 'message', source: 'agent', role: 'assistant', content: 'Hello there' }))];
    expect(texts(streamed)).toEqual(['agent_message_chunk:Hel', 'agent_message_chunk:lo', 'agent_message_chunk: there']);
    expect(texts(mapper.of(persisted({ kind: 'message', source: 'agent', role: 'assistant', content: 'Second answer' })))).toEqual(['agent_message_chunk:Second answer']);
  });

  it('shows reasoning as thought chunks, streamed or persisted, once', () => {
    const mapper = new EventUpdates({ workdir: '/w', contextTokens: 1000 });
    const live = [
      ...mapper.of({ kind: 'reasoning_delta', content_delta: 'Think' } as StreamEvent),
      ...mapper.of({ kind: 'reasoning_delta', content_delta: 'ing' } as StreamEvent),
      ...mapper.of(persisted({ kind: 'reasoning', source: 'agent', content: 'Thinking hard' })),
    ];
    expect(texts(live)).toEqual(['agent_thought_chunk:Think', 'agent_thought_chunk:ing', 'agent_thought_chunk: hard']);
    const replay = new EventUpdates({ workdir: '/w', contextTokens: 1000 });
    expect(texts(replay.of(persisted({ kind: 'reasoning', source: 'agent', content: 'Thinking hard' })))).toEqual(['agent_thought_chunk:Thinking hard']);
  });

  it("shows a turn's text once for all of its calls, and leaves subagents' messages out", () => {
    const mapper = new EventUpdates({ workdir: '/w', contextTokens: 1000 });
    const action = (id: string) => persisted({ kind: 'action', source: 'agent', tool_call_id: id, tool_name: 'grep', arguments: { pattern: 'x' }, thought: 'Searching.', run_id: null, llm_response_id: 'r1' });
    expect(texts([...mapper.of(action('a')), ...mapper.of(action('b'))])).toEqual(['agent_message_chunk:Searching.', 'tool_call:', 'tool_call:']);
    expect(mapper.of(persisted({ kind: 'message', source: 'agent', role: 'assistant', content: 'inner', parent_tool_call_id: 't1', agent: 'general-purpose' }))).toEqual([]);
  });

  it('words an "always" answer as rules agentd matches: one per command of a bash line, without redirections', () => {
    expect(rulesFor({ tool_name: 'bash', arguments: { command: 'npm test > out.txt 2>&1 && git status' } })).toEqual(['bash(npm test)', 'bash(git status)']);
    expect(rulesFor({ tool_name: 'bash', arguments: { command: 'echo $(whoami)' } })).toEqual(['bash(echo $(whoami))']);
    expect(rulesFor({ tool_name: 'file_editor', arguments: { command: 'create', path: 'src/a.ts' } })).toEqual(['file_editor(src/a.ts)']);
    expect(rulesFor({ tool_name: 'mcp__fs__read', arguments: {} })).toEqual(['mcp__fs__read']);
  });

  it("turns prompts and MCP servers into agentd's shapes", () => {
    expect(messageContent([{ type: 'text', text: 'Look' }, { type: 'resource', resource: { uri: 'file:///w/a.ts', text: 'const a = 1;' } }])).toBe('Look\n\n<context uri="file:///w/a.ts">\nconst a = 1;\n</context>');
    expect(messageContent([{ type: 'text', text: 'See' }, { type: 'image', data: 'iVBORw0KGgo=', mimeType: 'image/png' }])).toEqual([{ type: 'text', text: 'See' }, { type: 'image', data: 'iVBORw0KGgo=', media_type: 'image/png' }]);
    expect(() => messageContent([{ type: 'audio', data: 'AAAA', mimeType: 'audio/wav' }])).toThrow(/not supported/);
    expect(mcpServers([
      { name: 'my files', command: 'npx', args: ['server'], env: [{ name: 'TOKEN', value: 't' }] },
      { type: 'http', name: 'my files', url: 'https://mcp.example.com/mcp', headers: [{ name: 'Authorization', value: 'Bearer x' }] },
    ])).toEqual({
      'my-files': { command: 'npx', args: ['server'], env: { TOKEN: 't' } },
      'my-files-2': { type: 'http', url: 'https://mcp.example.com/mcp', headers: { Authorization: 'Bearer x' } },
    });
  });
});
