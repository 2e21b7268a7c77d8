// ConversationHistory.hasSystemPromptOf: whether a run's system prompt and tool schemas are the
// ones its history last recorded (the run then records none). The same schema objects as at the
// last match are taken without their JSON; anything else is compared by its JSON.
import { describe, expect, it, vi } from 'vitest';
import { ConversationHistory } from '../../src/core/agent/conversation-history.js';
import type { AgentEvent } from '../../src/core/schemas/event.js';

const bash = { name: 'bash', description: 'Run a command', parameters: { type: 'object', properties: { command: { type: 'string' } } } };
const view = { name: 'view', description: 'Read a file', parameters: { type: 'object', properties: { path: { type: 'string' } } } };

function recorded(history: ConversationHistory, seq: number, content: string, tools: unknown[]): void {
  // As folded from the log: the event holds copies, never the objects the runtime offers.
  history.apply({ id: `e${seq}`, conversation_id: 'c', timestamp: '2026-01-01T00:00:00.000Z', seq, kind: 'system_prompt', source: 'system', content, tools: JSON.parse(JSON.stringify(tools)) } as unknown as AgentEvent);
}

describe('the system prompt a run would record', () => {
  it('matches the recorded one by content and tool schemas, whatever objects hold them, and stops matching when either changes', () => {
    const history = new ConversationHistory();
    expect(history.hasSystemPromptOf('prompt', [bash])).toBe(false);
    recorded(history, 1, 'prompt', [bash, view]);
    expect(history.hasSystemPromptOf('prompt', [bash, view])).toBe(true);
    // The same objects again (the runtime's next run), and equal copies.
    expect(history.hasSystemPromptOf('prompt', [bash, view])).toBe(true);
    expect(history.hasSystemPromptOf('prompt', JSON.parse(JSON.stringify([bash, view])))).toBe(true);
    expect(history.hasSystemPromptOf('other prompt', [bash, view])).toBe(false);
    expect(history.hasSystemPromptOf('prompt', [bash])).toBe(false);
    expect(history.hasSystemPromptOf('prompt', [view, bash])).toBe(false);
    expect(history.hasSystemPromptOf('prompt', [bash, { ...view, description: 'Read a file whole' }])).toBe(false);
    expect(history.hasSystemPromptOf('prompt', [bash, view])).toBe(true);
    // A new prompt recorded with other tools: the objects that matched before no longer do.
    recorded(history, 2, 'prompt', [bash]);
    expect(history.hasSystemPromptOf('prompt', [bash, view])).toBe(false);
    expect(history.hasSystemPromptOf('prompt', [bash])).toBe(true);
    recorded(history, 3, 'prompt', []);
    expect(history.hasSystemPromptOf('prompt', [bash])).toBe(false);
    expect(history.hasSystemPromptOf('prompt', [])).toBe(true);
  });

  it('takes the objects of a prompt this process recorded (its next run offers the same) without their JSON', () => {
    const history = new ConversationHistory();
    const tools = [bash, view];
    // As appended by this process: the event holds the schema objects themselves.
    history.apply({ id: 'e1', conversation_id: 'c', timestamp: '2026-01-01T00:00:00.000Z', seq: 1, kind: 'system_prompt', source: 'system', content: 'prompt', tools } as unknown as AgentEvent);
    const stringify = vi.spyOn(JSON, 'stringify');
    try {
      expect(history.hasSystemPromptOf('prompt', [bash, view])).toBe(true);
      expect(stringify).not.toHaveBeenCalled();
      // Copies are still compared by their JSON.
      expect(history.hasSystemPromptOf('prompt', [bash, { ...view }])).toBe(true);
      expect(stringify).toHaveBeenCalled();
    } finally {
      stringify.mockRestore();
    }
  });
});
