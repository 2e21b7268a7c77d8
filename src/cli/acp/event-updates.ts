import type * as acp from '@agentclientprotocol/sdk';
import type { EventOf, StreamEvent } from '../../client/index.js';
import { planOf, toolCallOf } from './tool-calls.js';

export interface UpdateContext {
  /** The conversation's workdir: tool paths are shown absolute. */
  workdir: string;
  /** The context window the usage is measured against (the condenser's threshold). */
  contextTokens: number;
}

/**
 * Turns a conversation's events into ACP `session/update`s, live and on replay alike: the text of
 * a persisted message (or an action's thought, or a reasoning event) is sent as the part its
 * streamed deltas did not already send, so a stream resumed after a dropped connection (whose
 * deltas were lost) still shows the whole text once, and a replay shows it from the log alone.
 */
export class EventUpdates {
  private streamedText = '';
  private streamedThought = '';
  /** The LLM response whose text was last shown: its other calls carry the same thought. */
  private shownTurn: string | null = null;
  /** task_tracker calls shown as a plan, not as tool calls: their results are not shown either. */
  private readonly planCalls = new Set<string>();
  /** The action of each call, for its observation (an edit's diff). */
  private readonly actions = new Map<string, EventOf<'action'>>();

  constructor(private readonly context: UpdateContext) {}

  of(event: StreamEvent): acp.SessionUpdate[] {
    if ('parent_tool_call_id' in event && event.parent_tool_call_id && event.kind !== 'action' && event.kind !== 'observation') return [];
    switch (event.kind) {
      case 'message_delta':
        this.streamedText += event.content_delta;
        return text('agent_message_chunk', event.content_delta);
      case 'reasoning_delta':
        this.streamedThought += event.content_delta;
        return text('agent_thought_chunk', event.content_delta);
      case 'reasoning': {
        const rest = unsent(event.content, this.streamedThought);
        this.streamedThought = '';
        return text('agent_thought_chunk', rest);
      }
      case 'message':
        return this.message(event);
      case 'action':
        return this.action(event);
      case 'observation':
        return this.observation(event);
      case 'rejection':
        if (this.planCalls.has(event.tool_call_id)) return [];
        return [{ sessionUpdate: 'tool_call_update', toolCallId: event.tool_call_id, status: 'failed', content: [textContent(`Rejected: ${event.reason}`)] }];
      case 'question':
        return text('agent_message_chunk', questionText(event));
      case 'usage':
        return [{ sessionUpdate: 'usage_update', used: (event.prompt_tokens ?? 0) + (event.completion_tokens ?? 0), size: this.context.contextTokens, cost: { amount: event.totals.cost, currency: 'USD' } }];
      case 'agent_error':
        return text('agent_message_chunk', `\n\nagentd: ${event.error}: ${event.message}`);
      default:
        return [];
    }
  }

  private message(event: EventOf<'message'>): acp.SessionUpdate[] {
    this.shownTurn = null;
    if (event.source === 'user') {
      // A user's message is shown on replay; live, the editor already shows what it sent.
      this.streamedText = '';
      return event.answers_tool_call_id ? [] : text('user_message_chunk', event.content);
    }
    if (event.source !== 'agent') return [];
    const rest = unsent(event.content, this.streamedText);
    this.streamedText = '';
    return text('agent_message_chunk', rest);
  }

  private action(event: EventOf<'action'>): acp.SessionUpdate[] {
    const updates: acp.SessionUpdate[] = [];
    const turn = event.llm_response_id ?? `${event.run_id}:${event.thought}`;
    if (!event.parent_tool_call_id && turn !== this.shownTurn) {
      // The turn's text came first (its deltas); the thought is on each of the turn's calls.
      updates.push(...text('agent_message_chunk', event.thought ? unsent(event.thought, this.streamedText) : ''));
      this.streamedText = '';
      this.shownTurn = turn;
    }
    this.actions.set(event.tool_call_id, event);
    const plan = planOf(event);
    if (plan) {
      this.planCalls.add(event.tool_call_id);
      return [...updates, { sessionUpdate: 'plan', entries: plan }];
    }
    return [...updates, { sessionUpdate: 'tool_call', ...toolCallOf(event, this.context.workdir) }];
  }

  private observation(event: EventOf<'observation'>): acp.SessionUpdate[] {
    if (this.planCalls.has(event.tool_call_id)) return [];
    const action = this.actions.get(event.tool_call_id);
    const edit = action && !event.is_error ? toolCallOf(action, this.context.workdir).content?.filter((item) => item.type === 'diff') : undefined;
    const content: acp.ToolCallContent[] = edit?.length ? edit : event.content ? [textContent(event.content)] : [];
    return [{ sessionUpdate: 'tool_call_update', toolCallId: event.tool_call_id, status: event.is_error ? 'failed' : 'completed', content, rawOutput: { content: event.content, ...event.data } }];
  }
}

/** What of `full` the deltas did not already send: all of it when they sent something else. */
function unsent(full: string, streamed: string): string {
  if (!streamed) return full;
  return full.startsWith(streamed) ? full.slice(streamed.length) : '';
}

function text(kind: 'agent_message_chunk' | 'agent_thought_chunk' | 'user_message_chunk', value: string): acp.SessionUpdate[] {
  return value ? [{ sessionUpdate: kind, content: { type: 'text', text: value } }] : [];
}

function textContent(value: string): acp.ToolCallContent {
  return { type: 'content', content: { type: 'text', text: value } };
}

export function questionText(event: EventOf<'question'>): string {
  const options = event.options?.length ? `\n${event.options.map((option) => `- ${option}`).join('\n')}` : '';
  return `\n\n${event.question}${options}\n`;
}
