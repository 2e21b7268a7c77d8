import pc from 'picocolors';
import type { AgentEvent, StreamEvent } from '../client/index.js';
import { connect, type ConnectionFlags } from './connection.js';
import { transcriptLines } from './render-events.js';

export interface ListFlags extends ConnectionFlags {
  json?: boolean;
  limit?: string;
  status?: string;
}

/** `agentd conversations`: the most recently updated first (`--json`: one JSON line each). */
export async function conversationsCommand(flags: ListFlags): Promise<number> {
  const connection = await connect(flags);
  try {
    const limit = flags.limit ? Number(flags.limit) : 20;
    const page = await connection.client.conversations.list({ sort: 'updated_at', order: 'desc', limit, ...(flags.status ? { status: flags.status as never } : {}) });
    for (const conversation of page.items) {
      if (flags.json) process.stdout.write(`${JSON.stringify(conversation)}\n`);
      else process.stdout.write(`${conversation.id}  ${conversation.status.padEnd(24)} ${conversation.updated_at}  ${conversation.title ?? pc.dim('(untitled)')}\n`);
    }
    if (!flags.json && page.items.length === 0) process.stderr.write('no conversations yet\n');
    return 0;
  } finally {
    await connection.close();
  }
}

export interface EventsFlags extends ConnectionFlags {
  json?: boolean;
  follow?: boolean;
  after?: string;
}

/**
 * `agentd events ID`: a conversation's events (`--json`: one JSON line each); `--follow` keeps
 * streaming new ones (resuming by itself after a dropped connection) until Ctrl-C.
 */
export async function eventsCommand(conversationId: string, flags: EventsFlags): Promise<number> {
  const connection = await connect(flags);
  const stop = new AbortController();
  const onSigint = () => stop.abort();
  process.on('SIGINT', onSigint);
  const print = (event: StreamEvent) => {
    if (flags.json) return void process.stdout.write(`${JSON.stringify(event)}\n`);
    if (event.kind === 'message_delta' || event.kind === 'reasoning_delta') return;
    const line = transcriptLines(event as AgentEvent);
    if (line) process.stdout.write(`${pc.dim(`#${(event as AgentEvent).seq}`)} ${line}\n`);
  };
  try {
    const after = flags.after ? Number(flags.after) : 0;
    if (flags.follow) {
      for await (const event of connection.client.events.stream(conversationId, { after, signal: stop.signal })) print(event);
    } else {
      for await (const event of connection.client.events.all(conversationId, { after_seq: after, limit: 1000 })) print(event);
    }
    return 0;
  } finally {
    process.off('SIGINT', onSigint);
    await connection.close();
  }
}
