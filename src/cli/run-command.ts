import path from 'node:path';
import readline from 'node:readline/promises';
import pc from 'picocolors';
import { AgentdError, type AgentdClient, type ApprovalDecision, type CreateConversationInput, type PendingAction, type RunResult } from '../client/index.js';
import { connect, noLlmMessage, UsageError, type Connection, type ConnectionFlags } from './connection.js';
import { EXIT, exitCodeOf } from './exit-codes.js';
import { readPrompt } from './read-prompt.js';
import { describePending, progressLine } from './render-events.js';

export interface RunFlags extends ConnectionFlags {
  file?: string;
  continue?: boolean;
  resume?: string;
  yes?: boolean;
  json?: boolean;
  confirm?: boolean;
  model?: string;
  workdir?: string;
  title?: string;
}

/**
 * `agentd run "prompt"`: one run, headless. Progress (tool calls, results, usage) on stderr, the
 * answer on stdout (`--json`: every event as a JSON line on stdout instead). Ctrl-C pauses the
 * run; a second one exits at once.
 */
export async function runCommand(words: string[], flags: RunFlags): Promise<number> {
  if (flags.continue && flags.resume) throw new UsageError('--continue and --resume cannot be used together');
  const prompt = await readPrompt(words, flags.file);
  if (prompt === undefined && !flags.continue && !flags.resume) throw new UsageError('give a prompt: agentd run "what to do" (or -f FILE, or pipe it in)');

  const connection = await connect(flags);
  const pause = new AbortController();
  let interrupts = 0;
  const onSigint = () => {
    interrupts += 1;
    if (interrupts > 1) {
      process.stderr.write('agentd: interrupted again, exiting\n');
      void connection.close().finally(() => process.exit(EXIT.interrupted));
      return;
    }
    process.stderr.write(pc.dim('\nagentd: pausing the run (Ctrl-C again to exit)\n'));
    pause.abort();
  };
  process.on('SIGINT', onSigint);
  try {
    const client = connection.client;
    const conversationId = flags.resume ?? (flags.continue ? await mostRecentConversation(client) : undefined);
    if (!conversationId && connection.embedded && !connection.embedded.hasDefaultLlm) throw new UsageError(noLlmMessage(null));
    let created: string | undefined;
    const create: CreateConversationInput = {
      ...(flags.confirm ? { confirmation_mode: true } : {}),
      ...(flags.title ? { title: flags.title } : {}),
      ...(flags.model ? { llm: { model: flags.model } } : {}),
      // The embedded server works where the user is; a remote one picks its own workdir unless told.
      ...(flags.workdir ? { workdir: path.resolve(flags.workdir) } : connection.embedded ? { workdir: process.cwd() } : {}),
    };
    const result: RunResult = await client
      .run({
      ...create,
      ...(prompt !== undefined ? { prompt } : {}),
      ...(conversationId ? { conversation_id: conversationId } : {}),
      signal: pause.signal,
      onConversation: (conversation) => {
        if (!conversationId) created = conversation.id;
        if (!flags.json) process.stderr.write(pc.dim(`conversation ${conversation.id}\n`));
      },
      onApproval: (pending) => decideApproval(pending, flags),
      // A question needs a person: asked on a terminal; without one the run is left waiting for input.
      ...(process.stdin.isTTY && process.stderr.isTTY ? { onQuestion: askOnTerminal } : {}),
      onEvent: (event) => {
        if (flags.json) return void process.stdout.write(`${JSON.stringify(event)}\n`);
        const line = progressLine(event);
        if (line) process.stderr.write(`${line}\n`);
      },
    })
      .catch((error: unknown) => undoWithoutLlm(error, connection, created));
    if (!flags.json && result.final_text) process.stdout.write(`${result.final_text.replace(/\n*$/, '')}\n`);
    const code = exitCodeOf(result.status, interrupts > 0);
    if (code !== EXIT.ok && !flags.json) process.stderr.write(`agentd: ${outcomeLine(result)}\n`);
    return code;
  } finally {
    process.off('SIGINT', onSigint);
    await connection.close();
  }
}

/** A server without a default LLM refused the run of a conversation this command created: it goes, and the user reads what to set. */
export async function undoWithoutLlm(error: unknown, connection: Connection, created: string | undefined): Promise<never> {
  if (!(error instanceof AgentdError) || error.code !== 'llm_not_configured') throw error;
  if (created) await connection.client.conversations.delete(created).catch(() => undefined);
  throw new UsageError(noLlmMessage(connection.embedded ? null : connection.url));
}

async function mostRecentConversation(client: AgentdClient): Promise<string> {
  const page = await client.conversations.list({ sort: 'updated_at', order: 'desc', limit: 1 });
  const latest = page.items[0];
  if (!latest) throw new UsageError('--continue: there is no conversation yet');
  return latest.id;
}

async function askOnTerminal(): Promise<string> {
  const prompt = readline.createInterface({ input: process.stdin, output: process.stderr });
  try {
    return (await prompt.question('Answer: ')).trim() || '(no answer)';
  } finally {
    prompt.close();
  }
}

/** --yes approves; otherwise a terminal asks; without one, nothing is decided and the run stays waiting. */
async function decideApproval(pending: PendingAction[], flags: RunFlags): Promise<ApprovalDecision | 'leave'> {
  process.stderr.write(`${pending.length} action(s) await approval:\n${describePending(pending)}\n`);
  if (flags.yes) return 'approve';
  if (!process.stdin.isTTY || !process.stderr.isTTY) return 'leave';
  const prompt = readline.createInterface({ input: process.stdin, output: process.stderr });
  try {
    const answer = (await prompt.question('Approve? [y/N] ')).trim().toLowerCase();
    return answer === 'y' || answer === 'yes' ? 'approve' : 'reject';
  } finally {
    prompt.close();
  }
}

function outcomeLine(result: RunResult): string {
  switch (result.status) {
    case 'error':
      return `the run failed: ${result.error ? `${result.error.code}: ${result.error.message}` : 'see the conversation events'} (conversation ${result.conversation_id})`;
    case 'stuck':
      return `the agent got stuck repeating itself (conversation ${result.conversation_id})`;
    case 'paused':
      return `the run is paused; continue with: agentd run --resume ${result.conversation_id}`;
    case 'waiting_for_confirmation':
      return `actions await approval and there is no terminal to ask: rerun with --yes (agentd run --resume ${result.conversation_id} --yes)`;
    case 'waiting_for_input':
      return `the agent asked a question and there is no terminal to ask: answer with agentd run --resume ${result.conversation_id} "your answer"`;
    default:
      return `the run ended with status ${result.status}`;
  }
}
