import type { AppendedEvent, EventLog } from '../events/event-log.js';
import type { EventReader } from '../events/event-recorder.js';
import { AgentSession } from './agent-session.js';
import type { LlmMessageCodec } from './llm.js';

/**
 * The agent's sessions, one per conversation that ran since the server started, and the reader
 * of the log that keeps their LLM history: a session folds its conversation's log in on first
 * use, then reads each event as it is stored (the history fold → the loop).
 */
export class AgentSessions implements EventReader {
  readonly name = 'LLM history fold';
  private readonly sessions = new Map<string, AgentSession>();
  /** Sessions whose history is being folded in from the log. */
  private readonly loading = new Map<string, Promise<AgentSession>>();

  constructor(
    private readonly log: EventLog,
    /** How histories keep their messages: the LLM client's codec (see LlmMessageCodec). */
    private readonly codec?: LlmMessageCodec,
  ) {}

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

  /** The conversation's session, its history folded in from the log on first use. */
  async get(conversationId: string): Promise<AgentSession> {
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
