import type { ConversationRecord } from '../conversations/conversation-record.js';
import type { ConversationStore } from '../conversations/conversation-store.js';
import { ConflictError } from '../errors.js';
import type { UserAnswer, UserQuestion } from '../tools/tool.js';
import type { AgentSession } from './agent-session.js';
import type { AgentSessions } from './agent-sessions.js';
import type { RunJournal } from './run-journal.js';
import { waitForAnswer } from './wait-for-answer.js';

export interface UserQuestionsDeps {
  conversations: ConversationStore;
  sessions: AgentSessions;
  journal: RunJournal;
}

/**
 * `ask_user`: the agent's question to the user and its answer (POST /answer, or the next user
 * message). At most one question is open per conversation; the run waits on a promise, nothing polls.
 */
export class UserQuestions {
  constructor(private readonly deps: UserQuestionsDeps) {}

  /** The question is recorded and the conversation waits for input until it is answered, or the run is paused or canceled. */
  async ask(options: { session: AgentSession; record: ConversationRecord; runId: string; signal: AbortSignal; question: UserQuestion }): Promise<UserAnswer> {
    const { session, record, runId, signal, question } = options;
    const journal = this.deps.journal;
    signal.throwIfAborted();
    if (session.question) throw new Error('Another question is already waiting for its answer: ask one question at a time.');
    const answered = waitForAnswer(signal);
    // Open before the event is out: a webhook receiver may answer as soon as it sees it.
    const open = { toolCallId: question.toolCallId, runId, answer: answered.answer };
    session.question = open;
    try {
      await journal.append(record.id, { kind: 'question', source: 'agent', tool_call_id: question.toolCallId, question: question.question, ...(question.options && { options: question.options }), run_id: runId });
      await journal.setStatus(record, 'waiting_for_input', { runId, reason: 'The agent asked a question: answer with POST /answer or a message.' });
      return await answered.promise;
    } finally {
      if (session.question === open) session.question = null;
      if (!signal.aborted && record.status === 'waiting_for_input') await journal.setStatus(record, 'running', { runId, reason: 'The question was answered.' });
    }
  }

  /**
   * Answers the open question: the answer becomes the call's result and the run goes on. A
   * conflict when no question is open, or `tool_call_id` names another one.
   */
  answer(conversationId: string, body: { tool_call_id?: string | undefined; content: string }, via: UserAnswer['via'] = 'answer'): { tool_call_id: string; run_id: string } {
    this.deps.conversations.record(conversationId);
    const session = this.deps.sessions.peek(conversationId);
    const question = session?.question ?? null;
    if (!session || !question) throw new ConflictError('no_open_question', 'No question is waiting for an answer in this conversation.');
    if (body.tool_call_id !== undefined && body.tool_call_id !== question.toolCallId) {
      throw new ConflictError('question_mismatch', `The open question is tool call ${question.toolCallId}, not ${body.tool_call_id}.`, { tool_call_id: question.toolCallId });
    }
    // Taken at once: a second answer finds no open question.
    session.question = null;
    question.answer({ content: body.content, via });
    return { tool_call_id: question.toolCallId, run_id: question.runId };
  }

  /** A user message while a question is open answers it (the message is recorded as that answer). */
  answerWithMessage(conversationId: string, content: string): { tool_call_id: string; run_id: string } | null {
    if (!this.deps.sessions.peek(conversationId)?.question) return null;
    return this.answer(conversationId, { content }, 'message');
  }
}
