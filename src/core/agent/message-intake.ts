import { ConflictError } from '../errors.js';
import type { AgentEvent, MultitaskStrategy, NewEvent } from '../schemas/event.js';
import type { AgentSession } from './agent-session.js';

export interface TakeMessageOptions {
  run: boolean;
  strategy: MultitaskStrategy;
  /** The user's message, appended as it is; during a run, marked with the strategy it was taken with. */
  message: Extract<NewEvent, { kind: 'message' }>;
}

/** What taking a message needs of the runtime. */
export interface MessageIntakeDeps {
  session(conversationId: string): Promise<AgentSession>;
  /** Start a run, or feed the running one (the plain path); the run id the message went to. */
  onUserMessage(conversationId: string, options: { run: boolean }): Promise<string | null>;
  cancel(conversationId: string): Promise<void>;
  startRun(conversationId: string): Promise<string>;
  append(conversationId: string, event: NewEvent): Promise<unknown>;
  /**
   * Appends a user's message (refused once the conversation is quarantined): the stored event.
   * `startsRun`: no run is going and the message starts one (what the run keeps with the record may be saved with it).
   */
  appendMessage(conversationId: string, message: Extract<NewEvent, { kind: 'message' }>, options: { startsRun: boolean }): Promise<AgentEvent>;
}

/**
 * Double-texting: what a user message does to the run in progress. No run, or `run: false`: it
 * is appended (and starts a run). During a run its multitask strategy decides: `enqueue` appends
 * it for the run's next turn, `interrupt` also stops the run's current step, `reject` refuses it
 * (409), `rollback` cancels the run, takes its events out of the LLM history with a `rollback`
 * event, and starts a new run with the message. Messages are taken one at a time per conversation.
 */
export class MessageIntake {
  private readonly queues = new Map<string, Promise<unknown>>();

  constructor(private readonly deps: MessageIntakeDeps) {}

  take(conversationId: string, options: TakeMessageOptions): Promise<{ event: AgentEvent; runId: string | null }> {
    const previous = this.queues.get(conversationId) ?? Promise.resolve();
    const taken = previous.catch(() => {}).then(() => this.takeNow(conversationId, options));
    const tail = taken.catch(() => {});
    this.queues.set(conversationId, tail);
    void tail.then(() => {
      if (this.queues.get(conversationId) === tail) this.queues.delete(conversationId);
    });
    return taken;
  }

  private async takeNow(conversationId: string, options: TakeMessageOptions): Promise<{ event: AgentEvent; runId: string | null }> {
    const append = (strategy: MultitaskStrategy | null, startsRun = false) => this.deps.appendMessage(conversationId, { ...options.message, ...(strategy && { multitask_strategy: strategy }) }, { startsRun });
    const session = await this.deps.session(conversationId);
    const active = session.active;
    if (!active || !options.run) {
      const event = await append(null, options.run);
      return { event, runId: await this.deps.onUserMessage(conversationId, { run: options.run }) };
    }
    switch (options.strategy) {
      case 'reject':
        throw new ConflictError('run_in_progress', "A run is in progress and this message's multitask_strategy is `reject`: send it again when the run has ended, or with another strategy.", { run_id: active.run.id });
      case 'enqueue':
        return { event: await append('enqueue'), runId: active.run.id };
      case 'interrupt': {
        const event = await append('interrupt');
        if (session.active === active) active.interrupts.trigger(event.seq);
        return { event, runId: active.run.id };
      }
      case 'rollback': {
        await this.deps.cancel(conversationId);
        // Everything from the run's input to its end (the observations that closed its calls included),
        // read from the session as it is now: once its run ended, its history may have been dropped to
        // stay within budget (see AgentSessions.use), and is folded again here.
        const lastSeq = (await this.deps.session(conversationId)).history.lastSeq;
        await this.deps.append(conversationId, { kind: 'rollback', source: 'user', run_id: active.run.id, forgotten_from_seq: active.inputFromSeq, forgotten_to_seq: lastSeq });
        const event = await append('rollback');
        return { event, runId: await this.deps.startRun(conversationId) };
      }
    }
  }
}
