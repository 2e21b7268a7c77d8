import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { spawn, type ChildProcess } from 'node:child_process';
import { Readable, Writable } from 'node:stream';
import * as acp from '@agentclientprotocol/sdk';
import { expect } from 'vitest';
import { CLI } from '../support/cli.js';

/** What the editor saw, in order: the agent's updates, its permission requests (with the answer given) and the answers to the editor's requests. */
export type TranscriptEntry =
  | { update: acp.SessionUpdate }
  | { permission: acp.RequestPermissionRequest['toolCall']; options: string[]; answered: string }
  | { elicitation: string; answered: string }
  | { response: string; result: unknown };

export interface EditorOptions {
  /** `agentd acp` flags. */
  args?: string[];
  env?: Record<string, string>;
  cwd?: string;
  /** The option chosen for each permission request, in order (default `allow_once`); `cancel` answers cancelled. */
  permissions?: string[];
  /** Answers to elicitation forms; without, the editor does not offer elicitation. */
  elicitation?: string[];
}

/**
 * An editor as the official ACP library's client side, driving `node dist/cli.js acp` as a child
 * process over its stdio, recording everything it sees. `stderr()` is the bridge's log.
 */
export class AcpEditor {
  readonly transcript: TranscriptEntry[] = [];
  readonly child: ChildProcess;
  readonly connection: acp.ClientConnection;
  private stderrText = '';
  private stdoutText = '';
  private readonly permissionAnswers: string[];
  private readonly elicitationAnswers: string[];
  private waiters: { check: () => boolean; resolve: () => void }[] = [];
  readonly exited: Promise<number | null>;

  constructor(options: EditorOptions = {}) {
    this.permissionAnswers = [...(options.permissions ?? [])];
    this.elicitationAnswers = [...(options.elicitation ?? [])];
    this.child = spawn(process.execPath, [CLI, 'acp', ...(options.args ?? [])], {
      cwd: options.cwd ?? os.tmpdir(),
      env: { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: os.tmpdir(), NO_COLOR: '1', ...options.env },
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    this.child.stderr!.on('data', (chunk) => (this.stderrText += chunk));
    this.child.stdout!.on('data', (chunk) => (this.stdoutText += chunk));
    this.exited = new Promise((resolve) => this.child.on('exit', (code) => resolve(code)));
    const app = acp
      .client({ name: 'test-editor' })
      .onNotification('session/update', ({ params }) => this.record({ update: params.update }))
      .onRequest('session/request_permission', ({ params }) => {
        const answer = this.permissionAnswers.shift() ?? 'allow_once';
        this.record({ permission: params.toolCall, options: params.options.map((option) => option.kind), answered: answer });
        return { outcome: answer === 'cancel' ? { outcome: 'cancelled' } : { outcome: 'selected', optionId: answer } };
      })
      .onRequest('elicitation/create', ({ params }) => {
        const answer = this.elicitationAnswers.shift() ?? '';
        this.record({ elicitation: params.message, answered: answer });
        return answer ? { action: 'accept', content: { answer } } : { action: 'decline' };
      });
    const stream = acp.ndJsonStream(Writable.toWeb(this.child.stdin!) as WritableStream<Uint8Array>, Readable.toWeb(this.child.stdout!) as ReadableStream<Uint8Array>);
    this.connection = app.connect(stream);
    this.connection.closed.catch(() => {});
  }

  /** Lines on stdout that are not JSON-RPC messages (stdout is the protocol's alone). */
  foreignStdoutLines(): string[] {
    return this.stdoutText.split('\n').filter((line) => {
      if (!line) return false;
      try {
        return (JSON.parse(line) as { jsonrpc?: unknown }).jsonrpc !== '2.0';
      } catch {
        return true;
      }
    });
  }

  stderr(): string {
    return this.stderrText;
  }

  get agent(): acp.ClientContext {
    return this.connection.agent;
  }

  async initialize(options: { elicitation?: boolean } = {}): Promise<acp.InitializeResponse> {
    return this.agent.request('initialize', {
      protocolVersion: acp.PROTOCOL_VERSION,
      clientCapabilities: { fs: { readTextFile: false, writeTextFile: false }, terminal: false, ...(options.elicitation ? { elicitation: { form: {} } } : {}) },
      clientInfo: { name: 'test-editor', version: '1.0.0' },
    });
  }

  /** Sends a request and records its answer. */
  async call<M extends acp.AgentRequestMethod>(method: M, params: acp.AgentRequestParamsByMethod[M]): Promise<acp.AgentRequestResponsesByMethod[M]> {
    const result = await this.agent.request(method, params);
    this.record({ response: method, result });
    return result;
  }

  /** session/new, and the commands the agent announces after it (so that they come at one place in the transcript). */
  async newSession(cwd: string): Promise<acp.NewSessionResponse> {
    const session = await this.call('session/new', { cwd, mcpServers: [] });
    await this.until((entry) => 'update' in entry && entry.update.sessionUpdate === 'available_commands_update');
    return session;
  }

  /** Resolves once the agent's text (its chunks joined) contains `text`. */
  untilText(text: string): Promise<void> {
    return this.untilTranscript(() => agentText(this.transcript).includes(text));
  }

  private untilTranscript(check: () => boolean): Promise<void> {
    if (check()) return Promise.resolve();
    return new Promise((resolve) => this.waiters.push({ check, resolve }));
  }

  /** Resolves once the transcript has an entry that `predicate` accepts. */
  until(predicate: (entry: TranscriptEntry) => boolean): Promise<void> {
    return this.untilTranscript(() => this.transcript.some(predicate));
  }

  private record(entry: TranscriptEntry): void {
    this.transcript.push(entry);
    this.waiters = this.waiters.filter((waiter) => (waiter.check() ? (waiter.resolve(), false) : true));
  }

  async close(): Promise<void> {
    this.child.stdin!.end();
    const timer = setTimeout(() => this.child.kill('SIGKILL'), 10_000);
    await this.exited;
    clearTimeout(timer);
  }
}

/** The agent's message text, its chunks joined. */
export function agentText(transcript: readonly TranscriptEntry[]): string {
  return updates(transcript)
    .map((update) => (update.sessionUpdate === 'agent_message_chunk' && update.content.type === 'text' ? update.content.text : ''))
    .join('');
}

/** The updates of a transcript alone. */
export function updates(transcript: readonly TranscriptEntry[]): acp.SessionUpdate[] {
  return transcript.flatMap((entry) => ('update' in entry ? [entry.update] : []));
}

/**
 * A transcript as it is compared with its golden file: ids and times replaced by stable names,
 * temp paths by `<workdir>`, and neighbouring text chunks of one kind joined (how the text was
 * split into deltas depends on timing; the text does not).
 */
export function normalise(transcript: readonly TranscriptEntry[], replacements: Record<string, string>): unknown[] {
  const joined: TranscriptEntry[] = [];
  for (const entry of transcript) {
    const last = joined.at(-1);
    if ('update' in entry && last && 'update' in last && isText(entry.update) && isText(last.update) && entry.update.sessionUpdate === last.update.sessionUpdate) {
      joined[joined.length - 1] = { update: { ...last.update, content: { type: 'text', text: textOf(last.update) + textOf(entry.update) } } as acp.SessionUpdate };
    } else joined.push(entry);
  }
  let text = JSON.stringify(joined);
  for (const [from, to] of Object.entries(replacements)) text = text.split(from).join(to);
  const ids = new Map<string, string>();
  text = text.replace(/[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}/g, (id) => {
    if (!ids.has(id)) ids.set(id, `<id-${ids.size + 1}>`);
    return ids.get(id)!;
  });
  text = text.replace(/\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z/g, '<time>');
  return JSON.parse(text) as unknown[];
}

function isText(update: acp.SessionUpdate): update is acp.SessionUpdate & { content: { type: 'text'; text: string } } {
  return (update.sessionUpdate === 'agent_message_chunk' || update.sessionUpdate === 'agent_thought_chunk' || update.sessionUpdate === 'user_message_chunk') && update.content.type === 'text';
}

function textOf(update: acp.SessionUpdate): string {
  return isText(update) ? update.content.text : '';
}

const GOLDEN = path.join(import.meta.dirname, 'golden');

/** Compares with test/acp/golden/<name>.json; `UPDATE_GOLDEN=1` writes the file instead. */
export function expectGolden(name: string, actual: unknown): void {
  const file = path.join(GOLDEN, `${name}.json`);
  if (process.env.UPDATE_GOLDEN === '1') {
    fs.mkdirSync(GOLDEN, { recursive: true });
    fs.writeFileSync(file, `${JSON.stringify(actual, null, 2)}\n`);
    return;
  }
  if (!fs.existsSync(file)) throw new Error(`no golden transcript ${file}: run with UPDATE_GOLDEN=1 once and review it`);
  expect(actual).toEqual(JSON.parse(fs.readFileSync(file, 'utf8')));
}
