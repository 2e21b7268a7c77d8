import { ConflictError } from '../errors.js';
import type { McpRegistry } from '../mcp/mcp-registry.js';
import type { AgentSession } from './agent-session.js';
import type { AgentSessions } from './agent-sessions.js';

export interface SessionLifecycleDeps {
  sessions: AgentSessions;
  mcp?: McpRegistry | undefined;
  /** After this long without a run a conversation's shell, MCP servers and history are released (0 or absent: never). */
  idleTimeoutMs?: number | undefined;
  /** Told when a conversation was released after its idle timeout: caches of it may go too (its run records). */
  onReleased?: ((conversationId: string) => void) | undefined;
  onError?: ((error: unknown, context: Record<string, unknown>) => void) | undefined;
}

/** Shutdown closes this many shells per event-loop turn. */
const SHELLS_CLOSED_PER_TURN = 8;

/**
 * How long a conversation holds its session: handed out (restored after an idle release), given
 * back after the idle timeout (shell, MCP servers, folded history), and closed at a workdir
 * change, a delete or shutdown.
 */
export class SessionLifecycle {
  /** Conversations whose session is released when their timer fires (see releaseIdle). */
  private readonly idleTimers = new Map<string, NodeJS.Timeout>();
  /** Sessions being released: a new one waits for the old shell's state. */
  private readonly releasing = new Map<string, Promise<void>>();
  /** What released sessions left for their successors: the shell's state. */
  private readonly released = new Map<string, AgentSession['restore']>();
  /** Shells of deleted conversations killed and still ending (see close). */
  private readonly ending = new Set<Promise<void>>();

  constructor(private readonly deps: SessionLifecycleDeps) {}

  /** The conversation's session (after an idle release finished); its idle countdown runs from here. */
  async session(conversationId: string): Promise<AgentSession> {
    const releasing = this.releasing.get(conversationId);
    if (releasing) await releasing.catch(() => undefined);
    const session = await this.deps.sessions.get(conversationId);
    const restore = this.released.get(conversationId);
    if (restore) {
      session.restore ??= restore;
      this.released.delete(conversationId);
    }
    if (!this.idleTimers.has(conversationId) && !session.active) this.armIdleTimer(conversationId);
    return session;
  }

  /** (Re)starts the conversation's idle countdown. */
  armIdleTimer(conversationId: string): void {
    const timeoutMs = this.deps.idleTimeoutMs ?? 0;
    if (timeoutMs <= 0) return;
    clearTimeout(this.idleTimers.get(conversationId));
    const timer = setTimeout(() => {
      this.idleTimers.delete(conversationId);
      void this.releaseIdle(conversationId).catch((error: unknown) => this.deps.onError?.(error, { conversation_id: conversationId, stage: 'idle_release' }));
    }, timeoutMs);
    timer.unref();
    this.idleTimers.set(conversationId, timer);
  }

  /** The workdir is about to change: the shell (and what it would restore) and the MCP servers go. A conflict while a run is in progress. */
  async beforeWorkdirChange(conversationId: string): Promise<void> {
    const session = this.deps.sessions.peek(conversationId);
    if (session?.active) throw new ConflictError('run_in_progress', 'The workdir cannot change while a run is in progress; pause it first.', { run_id: session.active.run.id });
    await this.releasing.get(conversationId);
    this.released.delete(conversationId);
    if (session) session.restore = undefined;
    await session?.closeShell();
    await this.deps.mcp?.close(conversationId);
  }

  /** The conversation goes away: its countdown stops and nothing it left is kept (its run is stopped by the caller next). */
  async forgetReleased(conversationId: string): Promise<void> {
    await this.releasing.get(conversationId);
    clearTimeout(this.idleTimers.get(conversationId));
    this.idleTimers.delete(conversationId);
    this.released.delete(conversationId);
  }

  /**
   * After the conversation's run stopped: its session leaves, its shell and MCP servers close.
   * `awaitShellExit: false` (a delete that keeps the workdir): the shell's processes are killed
   * before this returns (a shell still starting, once it has started), and their exits (the kernel
   * tearing the sandbox down, the spawner reporting it: most of a DELETE's time with a thousand
   * shells, P13) are awaited by shutdown, not by the caller.
   */
  async close(conversationId: string, beforeClose: (session: AgentSession) => Promise<void>, options: { awaitShellExit?: boolean } = {}): Promise<void> {
    const session = this.deps.sessions.forget(conversationId);
    if (session) await beforeClose(session);
    const closing = session?.closeShell();
    if (closing && options.awaitShellExit === false) this.endInBackground(closing);
    else await closing;
    await this.deps.mcp?.close(conversationId);
  }

  private endInBackground(closing: Promise<void>): void {
    const ending = closing.catch((error: unknown) => this.deps.onError?.(error, { stage: 'shell_close' }));
    this.ending.add(ending);
    void ending.finally(() => this.ending.delete(ending));
  }

  /** Shutdown, first step: no session is released from now on. */
  stopTimers(): void {
    for (const timer of this.idleTimers.values()) clearTimeout(timer);
    this.idleTimers.clear();
  }

  /**
   * Shutdown, last step: every MCP server closes, and every shell unless `shells` is false (the
   * process exits next and the shell factory kills them all then, see ShellFactory.killAllForExit).
   */
  async closeAll(options: { shells: boolean }): Promise<void> {
    // A few shells per event-loop turn: each kill may hand the CPU to the dying sandbox, and a
    // thousand in one turn would stall the loop (and the force-exit timer) for seconds.
    const closing: Promise<void>[] = [];
    for (const session of options.shells ? this.deps.sessions.all() : []) {
      closing.push(session.closeShell());
      if (closing.length % SHELLS_CLOSED_PER_TURN === 0) await new Promise((resolve) => setImmediate(resolve));
    }
    await Promise.all([...closing, ...this.ending]);
    await this.deps.mcp?.closeAll();
  }

  /**
   * An idle conversation gives back what it holds: its shell (every sandbox process, its state
   * kept for the next one), its MCP servers and its folded history (read again from the log on
   * next use). Not while a run or a shell command is in progress: the countdown starts again.
   */
  private async releaseIdle(conversationId: string): Promise<void> {
    const sessions = this.deps.sessions;
    const session = sessions.peek(conversationId);
    if (!session || session.active || sessions.isLoading(conversationId) || this.releasing.has(conversationId)) return;
    // A condensation under way holds the session; the countdown starts again.
    if (session.condensing || session.condenseRequest) return this.armIdleTimer(conversationId);
    const release = (async () => {
      const { released, restore } = await session.suspendShell(Math.round((this.deps.idleTimeoutMs ?? 0) / 1000));
      if (!released || session.active) return this.armIdleTimer(conversationId);
      await this.deps.mcp?.close(conversationId);
      if (sessions.peek(conversationId) !== session || session.active) return;
      sessions.forget(conversationId);
      if (restore) this.released.set(conversationId, restore);
      this.deps.onReleased?.(conversationId);
    })();
    this.releasing.set(conversationId, release);
    try {
      await release;
    } finally {
      this.releasing.delete(conversationId);
    }
  }
}
