import path from 'node:path';
import readline from 'node:readline/promises';
import pc from 'picocolors';
import type { AgentdClient, ApprovalDecision, PendingAction, StreamEvent } from '../client/index.js';
import { connect, noLlmMessage, UsageError, type ConnectionFlags } from './connection.js';
import { undoWithoutLlm } from './run-command.js';
import { describePending, progressLine, transcriptLines } from './render-events.js';

export interface ChatFlags extends ConnectionFlags {
  continue?: boolean;
  resume?: string;
  confirm?: boolean;
  model?: string;
  workdir?: string;
}

const DOUBLE_PRESS_MS = 2000;
const HELP = 'Type a message. /new starts a new conversation, /exit (or Ctrl-D) leaves; Ctrl-C pauses a run, twice exits.';

/**
 * `agentd chat`: an interactive conversation. The answer streams as it is generated, tool calls
 * and their output show in one line each, approvals are asked inline, Ctrl-C pauses the run
 * (twice exits), the arrow keys recall earlier prompts. `--continue`/`--resume` replay the
 * conversation from its event log first.
 */
export async function chatCommand(flags: ChatFlags): Promise<number> {
  if (flags.continue && flags.resume) throw new UsageError('--continue and --resume cannot be used together');
  const connection = await connect(flags);
  if (!flags.resume && !flags.continue && connection.embedded && !connection.embedded.hasDefaultLlm) {
    await connection.close();
    throw new UsageError(noLlmMessage(null));
  }
  const client = connection.client;
  const out = process.stdout;
  const rl = readline.createInterface({ input: process.stdin, output: out, terminal: Boolean(process.stdin.isTTY), historySize: 1000 });
  let conversationId: string | undefined;
  let running: AbortController | null = null;
  let lastInterrupt = 0;
  let exiting = false;
  let isClosed = false;
  const closed = new Promise<void>((resolve) =>
    rl.once('close', () => {
      isClosed = true;
      resolve();
    }),
  );

  rl.on('SIGINT', () => {
    const now = Date.now();
    if (now - lastInterrupt < DOUBLE_PRESS_MS) {
      exiting = true;
      out.write('\n');
      rl.close();
      return;
    }
    lastInterrupt = now;
    if (running) {
      out.write(pc.dim('\n(pausing the run; Ctrl-C again to exit)\n'));
      running.abort();
    } else {
      out.write(pc.dim('\n(Ctrl-C again to exit, or /exit)\n'));
      rl.write(null, { ctrl: true, name: 'u' });
    }
  });

  try {
    if (flags.resume || flags.continue) {
      conversationId = flags.resume ?? (await mostRecent(client));
      await replay(client, conversationId, rl);
    }
    out.write(pc.dim(`${HELP}\n`));
    while (!exiting) {
      // Ctrl-D closes the interface, which rejects the question ("Aborted with Ctrl+D"): a way out, as the banner says.
      const line = await Promise.race([rl.question(pc.bold('> ')).catch(() => null), closed.then(() => null)]);
      if (line === null || exiting) break;
      const text = line.trim();
      if (!text) continue;
      if (text === '/exit' || text === '/quit') break;
      if (text === '/new') {
        conversationId = undefined;
        out.write(pc.dim('(a new conversation starts with your next message)\n'));
        continue;
      }
      if (text === '/help') {
        out.write(pc.dim(`${HELP}\n`));
        continue;
      }
      running = new AbortController();
      let created: string | undefined;
      try {
        conversationId = await converse(client, { prompt: text, conversationId, flags, signal: running.signal, rl, embedded: connection.embedded !== null, onCreated: (id) => (created = id) }).catch((error: unknown) =>
          undoWithoutLlm(error, connection, created),
        );
      } catch (error) {
        if (isClosed) break;
        if (error instanceof UsageError) {
          out.write(`${pc.red('error')} ${error.message}\n`);
          return 2;
        }
        out.write(`${pc.red('error')} ${(error as Error).message}\n`);
      } finally {
        running = null;
      }
    }
    return 0;
  } finally {
    rl.close();
    await connection.close();
  }
}

async function converse(
  client: AgentdClient,
  options: { prompt: string; conversationId: string | undefined; flags: ChatFlags; signal: AbortSignal; rl: readline.Interface; embedded: boolean; onCreated: (id: string) => void },
): Promise<string | undefined> {
  const { flags, rl } = options;
  const out = process.stdout;
  let id = options.conversationId;
  // A line of streamed text is open; the agent's next message was streamed (so is not printed again).
  let lineOpen = false;
  let streamed = false;
  // The model's reasoning is streaming (shown dimmed, apart from its answer); it was streamed (so is not printed again).
  let reasoningOpen = false;
  let reasoningStreamed = false;
  const endLine = () => {
    if (lineOpen) out.write('\n');
    lineOpen = false;
    reasoningOpen = false;
  };
  const show = (event: StreamEvent) => {
    // A subagent's steps are shown as indented progress lines under its task call, never as the agent's text.
    if (event.parent_tool_call_id) {
      if (event.kind === 'message_delta' || event.kind === 'reasoning_delta' || event.kind === 'reasoning' || event.kind === 'message' || event.kind === 'system_prompt') return;
      const line = progressLine(event);
      if (line) {
        endLine();
        out.write(`  ${pc.dim(`[${event.agent ?? 'subagent'}]`)} ${line}\n`);
      }
      return;
    }
    if (event.kind === 'reasoning_delta') {
      if (!reasoningOpen) endLine();
      lineOpen = reasoningOpen = reasoningStreamed = true;
      out.write(pc.dim(event.content_delta));
      return;
    }
    if (event.kind === 'reasoning') {
      if (!reasoningStreamed && event.content) out.write(`${pc.dim(event.content)}\n`);
      endLine();
      reasoningStreamed = false;
      return;
    }
    if (event.kind === 'message_delta') {
      if (reasoningOpen) endLine();
      lineOpen = streamed = true;
      out.write(event.content_delta);
      return;
    }
    if (event.kind === 'message' && event.source === 'agent') {
      if (!streamed) out.write(`${event.content}\n`);
      endLine();
      streamed = false;
      return;
    }
    if (event.kind === 'message' || event.kind === 'system_prompt') return;
    if (event.kind === 'action') streamed = false;
    const line = progressLine(event);
    if (line) {
      endLine();
      out.write(`${line}\n`);
    }
  };
  const approve = async (pending: PendingAction[]): Promise<ApprovalDecision> => {
    endLine();
    out.write(`${describePending(pending)}\n`);
    const reply = await rl.question(`${pc.yellow('Approve?')} [y/N] `);
    // An answer is not a prompt: keep it out of the history the arrow keys recall.
    const history = historyOf(rl);
    if (history[0] === reply) history.shift();
    const answer = reply.trim().toLowerCase();
    return answer === 'y' || answer === 'yes' ? 'approve' : 'reject';
  };
  const answerQuestion = async (): Promise<string> => {
    endLine();
    const reply = await rl.question(`${pc.yellow('Answer:')} `);
    const history = historyOf(rl);
    if (history[0] === reply) history.shift();
    return reply.trim() || '(no answer)';
  };
  for await (const event of client.query({
    prompt: options.prompt,
    ...(id ? { conversation_id: id } : {}),
    ...(flags.confirm ? { confirmation_mode: true } : {}),
    ...(flags.model ? { llm: { model: flags.model } } : {}),
    ...(flags.workdir ? { workdir: path.resolve(flags.workdir) } : options.embedded ? { workdir: process.cwd() } : {}),
    signal: options.signal,
    onApproval: approve,
    onQuestion: answerQuestion,
    onConversation: (conversation) => {
      if (!id) {
        out.write(pc.dim(`(conversation ${conversation.id})\n`));
        options.onCreated(conversation.id);
      }
      id = conversation.id;
    },
  })) {
    show(event);
  }
  endLine();
  return id;
}

async function mostRecent(client: AgentdClient): Promise<string> {
  const latest = (await client.conversations.list({ sort: 'updated_at', order: 'desc', limit: 1 })).items[0];
  if (!latest) throw new UsageError('--continue: there is no conversation yet');
  return latest.id;
}

/** The conversation so far, from its event log; its user messages become the prompt history. */
async function replay(client: AgentdClient, id: string, rl: readline.Interface): Promise<void> {
  const conversation = await client.conversations.get(id);
  process.stdout.write(pc.dim(`(resuming conversation ${id}${conversation.title ? `: ${conversation.title}` : ''})\n`));
  const prompts: string[] = [];
  for await (const event of client.events.all(id, { limit: 500 })) {
    if (event.kind === 'message' && event.source === 'user') prompts.unshift(event.content.split('\n')[0]!);
    const line = event.kind === 'usage' ? null : transcriptLines(event);
    if (line) process.stdout.write(`${line}\n`);
  }
  historyOf(rl).unshift(...prompts);
  if (conversation.pending_actions.length > 0) process.stdout.write(`${describePending(conversation.pending_actions)}\n${pc.dim('(these actions await approval: send a message to continue)')}\n`);
}

/** readline's history (newest first): public on the interface since Node 15, missing from its types. */
function historyOf(rl: readline.Interface): string[] {
  const history = (rl as unknown as { history?: string[] }).history;
  return Array.isArray(history) ? history : [];
}
