import type { AppendedEvent, EventLog } from '../events/event-log.js';
import type { EventReader } from '../events/event-recorder.js';
import { AgentSession } from './agent-session.js';
import type { LlmMessageCodec } from './llm.js';

export interface AgentSessionsOptions {
  /** How histories keep their messages: the LLM client's codec (see LlmMessageCodec). */
  codec?: LlmMessageCodec | undefined;
  /**
   * How many bytes of folded history the sessions keep (AGENTD_HISTORY_CACHE_MB, see
   * ConversationHistory.size): past it,
   * the histories used longest ago are given back, and folded from the log at their next use.
   * The session in use is never given back, nor one a run, question or condensation holds.
   * Absent: no bound.
   */
  historyBudget?: number | undefined;
}

/**
 * The agent's sessions, one per conversation that ran since the server started, and the reader
 * of the log that keeps their LLM history: a session folds its conversation's log in on first
 * use, then reads each event as it is stored (the history fold → the loop). The folded histories
 * stay within their budget: the ones used longest ago are given back first.
 */
export class AgentSessions implements EventReader {
  readonly name = 'LLM history fold';
  private readonly sessions = new Map<string, AgentSession>();
  /** Sessions whose history is being folded in from the log. */
  private readonly loading = new Map<string, Promise<AgentSession>>();
  /** How histories keep their messages: the LLM client's codec (see LlmMessageCodec). */
  private readonly codec: LlmMessageCodec | undefined;
  private readonly budget: number;
  /** Folded histories' sizes as last counted, used longest ago first (see use()). */
  private readonly sizes = new Map<string, number>();
  private held = 0;
  private released = 0;

  constructor(
    private readonly log: EventLog,
    options: AgentSessionsOptions = {},
  ) {
    this.codec = options.codec;
    this.budget = options.historyBudget ?? Infinity;
  }

  read({ event }: AppendedEvent): void {
    this.sessions.get(event.conversation_id)?.receive(event);
  }

  /** The session when it exists (no fold started). */
  peek(conversationId: string): AgentSession | undefined {
    return this.sessions.get(conversationId);
  }

  /** Whether the session's history is being folded in now. */
  isLoading(conversationId: string): boolean {
    return this.loading.has(conversationId);
  }

  all(): AgentSession[] {
    return [...this.sessions.values()];
  }

  /**
   * The conversation's session, its history folded in from the log on first use, and counted as
   * just used (with the size last counted: a history is measured when it is folded and when its
   * run ends, not at every hand-out).
   */
  async get(conversationId: string): Promise<AgentSession> {
    const session = await this.fetch(conversationId);
    this.use(session, this.sizes.get(conversationId));
    return session;
  }

  /**
   * The session's history was used (handed out, or its run ended): it is counted with `size` (by
   * default measured now) and goes last in line. Past the budget, the histories used longest ago
   * are given back (the session just used is not).
   */
  use(session: AgentSession, size = session.history.size): void {
    const id = session.conversationId;
    if (this.sessions.get(id) !== session || session.stale) return;
    this.held -= this.sizes.get(id) ?? 0;
    this.sizes.delete(id);
    this.sizes.set(id, size);
    this.held += size;
    if (this.held <= this.budget) return;
    for (const [otherId, otherSize] of this.sizes) {
      if (this.held <= this.budget) break;
      if (otherId === id) continue;
      const other = this.sessions.get(otherId);
      if (other && (this.loading.has(otherId) || !other.releaseHistory())) continue;
      if (other) this.released += 1;
      this.sizes.delete(otherId);
      this.held -= otherSize;
    }
  }

  /** Bytes of folded history held, as last counted (see use()), and how many histories were given back to stay within the budget. */
  get historyCache(): { bytes: number; released: number } {
    return { bytes: this.held, released: this.released };
  }

  private async fetch(conversationId: string): Promise<AgentSession> {
    const loading = this.loading.get(conversationId);
    if (loading) return loading;
    const known = this.sessions.get(conversationId);
    if (known?.stale && !known.active) {
      // A rewind changed the history: folded again once, before anything reads it.
      const reloaded = known.reload(this.log).then(() => known);
      this.loading.set(conversationId, reloaded);
      try {
        return await reloaded;
      } finally {
        this.loading.delete(conversationId);
      }
    }
    if (known) return known;
    const session = new AgentSession(conversationId, { codec: this.codec });
    // Known at once, so events appended during the fold reach it (held until the fold is done).
    this.sessions.set(conversationId, session);
    const loaded = session.load(this.log).then(
      () => session,
      (error: unknown) => {
        if (this.sessions.get(conversationId) === session) this.sessions.delete(conversationId);
        throw error;
      },
    );
    this.loading.set(conversationId, loaded);
    try {
      return await loaded;
    } finally {
      this.loading.delete(conversationId);
    }
  }

  /** The conversation is gone: its session with it (the caller closes its shell). */
  forget(conversationId: string): AgentSession | undefined {
    const session = this.sessions.get(conversationId);
    this.sessions.delete(conversationId);
    this.held -= this.sizes.get(conversationId) ?? 0;
    this.sizes.delete(conversationId);
    return session;
  }

  /**
   * Secrets changed: a live shell gets them before its next command; so does one still starting
   * (say, started at the conversation's creation), whose environment may predate the change.
   */
  async updateShellEnv(conversationId: string, change: { set: Record<string, string>; unset: string[] }): Promise<void> {
    const shell = await this.sessions.get(conversationId)?.shellStarted();
    if (shell) await shell.setEnv(change.set, change.unset);
  }
}
