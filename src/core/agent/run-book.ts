import type { ConversationStore } from '../conversations/conversation-store.js';
import { ConflictError, NotFoundError } from '../errors.js';
import { decodePageId, encodePageId, type Page } from '../pagination.js';
import type { AgentSessions } from './agent-sessions.js';
import type { Run, RunStore } from './run-record.js';

export interface RunBookDeps {
  conversations: ConversationStore;
  runs: RunStore;
  sessions: AgentSessions;
  /** Stops the conversation's run in progress (see RunDriver.pause). */
  pause: (conversationId: string, stopAs: 'canceled') => Promise<void>;
  /** Masks the conversation's secret values in a text (none: shown as stored). */
  maskText?: (conversationId: string, text: string) => string;
}

const isIndexCursor = (value: unknown): value is { i: number } => typeof value === 'object' && value !== null && Number.isInteger((value as { i: number }).i);

/**
 * A conversation's run records: listed, paged, looked up, and the one in progress canceled. What
 * the agent decided (the files it changed, their names included, its output) is masked as it
 * leaves, like event text: a secret the agent used as a file name stays a `<secret:NAME>`.
 */
export class RunBook {
  constructor(private readonly deps: RunBookDeps) {}

  list(conversationId: string): Run[] {
    this.deps.conversations.record(conversationId);
    return this.deps.runs.list(conversationId).map((run) => this.masked(run));
  }

  /** A page of the run records, oldest first unless `order` is desc. */
  page(conversationId: string, query: { order: 'asc' | 'desc'; pageId?: string | undefined; limit: number }): Page<Run> {
    const all = this.list(conversationId);
    const ordered = query.order === 'asc' ? all : [...all].reverse();
    const start = query.pageId ? decodePageId(query.pageId, isIndexCursor).i : 0;
    const items = ordered.slice(start, start + query.limit);
    return { items, next_page_id: start + query.limit < ordered.length ? encodePageId({ i: start + query.limit }) : null };
  }

  get(conversationId: string, runId: string): Run {
    const run = this.list(conversationId).find((candidate) => candidate.id === runId);
    if (!run) throw new NotFoundError('run', runId);
    return run;
  }

  async cancel(conversationId: string, runId: string): Promise<Run> {
    const run = this.get(conversationId, runId);
    const active = this.deps.sessions.peek(conversationId)?.active;
    if (!active || active.run.id !== runId) throw new ConflictError('run_not_active', `Run ${runId} is not in progress (it is ${run.status}).`, { status: run.status });
    await this.deps.pause(conversationId, 'canceled');
    return this.get(conversationId, runId);
  }

  private masked(run: Run): Run {
    const mask = this.deps.maskText;
    if (!mask) return run;
    const text = (value: string) => mask(run.conversation_id, value);
    return {
      ...run,
      ...(run.files_changed && { files_changed: run.files_changed.map(text) }),
      ...(run.error && { error: { ...run.error, message: text(run.error.message) } }),
      ...(run.output !== undefined && { output: maskStrings(run.output, text) }),
    };
  }
}

function maskStrings(value: unknown, mask: (text: string) => string): unknown {
  if (typeof value === 'string') return mask(value);
  if (Array.isArray(value)) return value.map((item) => maskStrings(item, mask));
  if (value !== null && typeof value === 'object') return Object.fromEntries(Object.entries(value).map(([key, item]) => [key, maskStrings(item, mask)]));
  return value;
}
