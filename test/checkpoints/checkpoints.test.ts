import fs from 'node:fs';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { startAgentHarness, type AgentHarness } from '../support/agent-harness.js';
import { expectError } from '../support/expect-error.js';

let harness: AgentHarness;
afterEach(async () => harness?.close());

/** The messages of the LLM request `index`, as role:content lines (tool calls by name). */
function transcript(harness: AgentHarness, index: number): string[] {
  const body = harness.llm.requests[index]!.body as any;
  return body.messages.map((message: any) => `${message.role}:${message.content ?? ''}${message.tool_calls ? `[${message.tool_calls.map((call: any) => call.function.name).join(',')}]` : ''}`);
}

describe('checkpoints, changes and rewind', () => {
  it('records a checkpoint before the run and before each file-changing call; /changes diffs; rewind restores files and history and is undoable', async () => {
    harness = await startAgentHarness([
      { toolCalls: [{ name: 'file_editor', arguments: { command: 'create', path: 'a.txt', file_text: 'alpha\n' } }] },
      { toolCalls: [{ name: 'file_editor', arguments: { command: 'view', path: 'a.txt' } }] },
      { toolCalls: [{ name: 'bash', arguments: { command: 'echo beta > b.txt && rm gone.txt && echo changed > kept.txt' } }] },
      { text: 'first run done' },
      { text: 'second run done' },
    ]);
    const id = await harness.createConversation({ run: false, initial_message: 'make files' });
    const workdir = (await harness.get(`/conversations/${id}`)).body.workdir as string;
    fs.writeFileSync(path.join(workdir, 'gone.txt'), 'to be deleted\n');
    fs.writeFileSync(path.join(workdir, 'kept.txt'), 'original\n');
    expect((await harness.get(`/conversations/${id}/changes`)).body).toEqual({ items: [], next_page_id: null });

    expect((await harness.post(`/conversations/${id}/run`)).status).toBe(202);
    await harness.waitForStatus(id, ['idle']);
    const events = await harness.events(id);
    const checkpoints = (await harness.get(`/conversations/${id}/checkpoints`)).body.items;
    // run start, file_editor create, bash (the view is not a change), run end.
    expect(checkpoints.map((checkpoint: any) => checkpoint.trigger)).toEqual(['run_start', 'tool', 'tool', 'run_end']);
    const [start, beforeCreate, beforeBash, end] = checkpoints;
    const runId = events.find((event: any) => event.kind === 'state_update' && event.status === 'running').run_id;
    for (const checkpoint of checkpoints) expect(checkpoint.run_id).toBe(runId);
    const actionSeqs = events.filter((event: any) => event.kind === 'action' && event.tool_name !== 'file_editor' || (event.kind === 'action' && event.arguments.command === 'create')).map((event: any) => event.seq);
    expect([beforeCreate.seq, beforeBash.seq]).toEqual(actionSeqs);
    expect(beforeCreate.files_changed).toEqual([]);
    expect(beforeBash.files_changed).toEqual(['a.txt']);
    expect([...end.files_changed].sort()).toEqual(['b.txt', 'gone.txt', 'kept.txt']);
    const run = (await harness.get(`/conversations/${id}/runs/${runId}`)).body;
    expect([...run.files_changed].sort()).toEqual(['a.txt', 'b.txt', 'gone.txt', 'kept.txt']);

    const changes = (await harness.get(`/conversations/${id}/changes`)).body;
    expect(changes.items.map((change: any) => [change.path, change.status])).toEqual([
      ['a.txt', 'added'],
      ['b.txt', 'added'],
      ['gone.txt', 'deleted'],
      ['kept.txt', 'modified'],
    ]);
    const kept = changes.items.find((change: any) => change.path === 'kept.txt');
    expect(kept.diff).toContain('--- a/kept.txt');
    expect(kept.diff).toContain('-original');
    expect(kept.diff).toContain('+changed');
    const since = (await harness.get(`/conversations/${id}/changes?since_checkpoint=${beforeBash.id}&limit=2`)).body;
    expect(since.items.map((change: any) => change.path)).toEqual(['b.txt', 'gone.txt']);
    const rest = (await harness.get(`/conversations/${id}/changes?since_checkpoint=${beforeBash.id}&limit=2&page_id=${since.next_page_id}`)).body;
    expect(rest).toMatchObject({ items: [{ path: 'kept.txt', status: 'modified' }], next_page_id: null });

    // Rewind files and history to before the bash call.
    const rewound = await harness.post(`/conversations/${id}/rewind`, { checkpoint_id: beforeBash.id });
    expect(rewound.status).toBe(200);
    expect(rewound.body.event).toMatchObject({ kind: 'rewind', source: 'user', checkpoint_id: beforeBash.id, files: true, conversation: true, to_seq: beforeBash.seq, undo_checkpoint_id: rewound.body.undo_checkpoint.id });
    expect(rewound.body.undo_checkpoint.trigger).toBe('rewind');
    expect(fs.readFileSync(path.join(workdir, 'a.txt'), 'utf8')).toBe('alpha\n');
    expect(fs.existsSync(path.join(workdir, 'b.txt'))).toBe(false);
    expect(fs.readFileSync(path.join(workdir, 'gone.txt'), 'utf8')).toBe('to be deleted\n');
    expect(fs.readFileSync(path.join(workdir, 'kept.txt'), 'utf8')).toBe('original\n');
    // Events stay in the log.
    expect((await harness.events(id)).length).toBe(events.length + 1);

    // The next run's history ends before the bash call.
    expect((await harness.post(`/conversations/${id}/messages`, { content: 'again' })).status).toBeLessThan(300);
    await harness.waitForStatus(id, ['idle']);
    const lines = transcript(harness, harness.llm.requests.length - 1);
    expect(lines.some((line) => line.includes('[bash]'))).toBe(false);
    expect(lines.some((line) => line.includes('first run done'))).toBe(false);
    expect(lines.filter((line) => line.includes('[file_editor]'))).toHaveLength(2);
    expect(lines.at(-1)).toBe('user:again');
    expect(harness.llm.violations).toEqual([]);

    // Undo: back to the state before the rewind, files and history.
    const undone = await harness.post(`/conversations/${id}/rewind`, { checkpoint_id: rewound.body.undo_checkpoint.id });
    expect(undone.status).toBe(200);
    expect(fs.readFileSync(path.join(workdir, 'b.txt'), 'utf8')).toBe('beta\n');
    expect(fs.existsSync(path.join(workdir, 'gone.txt'))).toBe(false);
    harness.llm.push({ text: 'third run done' });
    await harness.post(`/conversations/${id}/messages`, { content: 'after undo' });
    await harness.waitForStatus(id, ['idle']);
    const afterUndo = transcript(harness, harness.llm.requests.length - 1);
    expect(afterUndo.some((line) => line.includes('[bash]'))).toBe(true);
    expect(afterUndo.some((line) => line.includes('first run done'))).toBe(true);
    expect(afterUndo.some((line) => line === 'user:again')).toBe(false);
    expect(harness.llm.violations).toEqual([]);

    // Files only: the history is untouched.
    const filesOnly = await harness.post(`/conversations/${id}/rewind`, { checkpoint_id: start.id, conversation: false });
    expect(filesOnly.body.event).toMatchObject({ files: true, conversation: false });
    expect(fs.existsSync(path.join(workdir, 'a.txt'))).toBe(false);
  });

  it('refuses what it cannot do: unknown checkpoint, nothing to rewind, a run in progress', async () => {
    harness = await startAgentHarness([{ toolCalls: [{ name: 'bash', arguments: { command: 'sleep 30' } }] }]);
    const id = await harness.createConversation({ run: false, initial_message: 'x' });
    const unknown = '00000000-0000-4000-8000-000000000000';
    expectError(await harness.post(`/conversations/${id}/rewind`, { checkpoint_id: unknown }), { status: 404, error: 'checkpoint_not_found', message: /No checkpoint/ });
    expectError(await harness.post(`/conversations/${id}/rewind`, { checkpoint_id: unknown, files: false, conversation: false }), { status: 422, error: 'nothing_to_rewind', message: /files/ });
    expectError(await harness.get(`/conversations/${id}/changes?since_checkpoint=${unknown}`), { status: 404, error: 'checkpoint_not_found', message: /No checkpoint/ });
    await harness.post(`/conversations/${id}/run`);
    const deadline = Date.now() + 15_000;
    let checkpoints: any[] = [];
    while (checkpoints.length < 2 && Date.now() < deadline) {
      checkpoints = (await harness.get(`/conversations/${id}/checkpoints`)).body.items;
      await new Promise((resolve) => setTimeout(resolve, 25));
    }
    expectError(await harness.post(`/conversations/${id}/rewind`, { checkpoint_id: checkpoints[0].id }), { status: 409, error: 'run_in_progress', message: /pause/ });
    await harness.post(`/conversations/${id}/pause`);
    expect((await harness.post(`/conversations/${id}/rewind`, { checkpoint_id: checkpoints[0].id })).status).toBe(200);
  });
});

describe('fork', () => {
  it('copies the events up to at_seq with new ids and the same seqs, then its own fork event; config, not secrets; a workdir copy as of that point', async () => {
    harness = await startAgentHarness([
      { toolCalls: [{ name: 'bash', arguments: { command: 'echo v1 > file.txt' } }] },
      { text: 'wrote v1' },
      { toolCalls: [{ name: 'bash', arguments: { command: 'echo v2 > file.txt' } }] },
      { text: 'wrote v2' },
    ]);
    const id = await harness.createConversation({ initial_message: 'write v1', title: 'parent', secrets: { API_TOKEN: 'tok-0123456789-secret' }, max_iterations_per_run: 7, metadata: { team: 'a' } });
    await harness.waitForStatus(id, ['idle']);
    const firstRunEnd = (await harness.events(id)).length;
    await harness.post(`/conversations/${id}/messages`, { content: 'write v2' });
    await harness.waitForStatus(id, ['idle']);
    const parentEvents = await harness.events(id);
    const parent = (await harness.get(`/conversations/${id}`)).body;

    // A secret the agent wrote to a file is masked in the diffs of /changes.
    fs.writeFileSync(path.join(parent.workdir, 'leak.txt'), 'token=tok-0123456789-secret\n');
    const leak = (await harness.get(`/conversations/${id}/changes`)).body.items.find((change: any) => change.path === 'leak.txt');
    expect(leak.diff).toContain('+token=<secret:API_TOKEN>');
    expect(JSON.stringify(leak)).not.toContain('tok-0123456789-secret');
    fs.rmSync(path.join(parent.workdir, 'leak.txt'));

    const forked = await harness.post(`/conversations/${id}/fork`, { at_seq: firstRunEnd, title: 'fork', copy_workdir: true });
    expect(forked.status).toBe(201);
    const fork = forked.body;
    expect(fork).toMatchObject({ title: 'fork', status: 'idle', max_iterations_per_run: 7, metadata: { team: 'a' }, event_count: firstRunEnd + 1, llm: parent.llm });
    expect(fork.id).not.toBe(id);
    expect(fork.workdir).not.toBe(parent.workdir);
    expect(fs.readFileSync(path.join(fork.workdir, 'file.txt'), 'utf8')).toBe('v1\n');
    expect(fs.readFileSync(path.join(parent.workdir, 'file.txt'), 'utf8')).toBe('v2\n');
    expect((await harness.get(`/conversations/${fork.id}/secrets`)).body.names).toEqual([]);

    const forkEvents = await harness.events(fork.id);
    expect(forkEvents).toHaveLength(firstRunEnd + 1);
    for (let i = 0; i < firstRunEnd; i++) {
      const { id: parentEventId, conversation_id: _c, timestamp: _t, ...rest } = parentEvents[i];
      expect(forkEvents[i]).toMatchObject({ ...rest, conversation_id: fork.id });
      expect(forkEvents[i].id).not.toBe(parentEventId);
    }
    expect(forkEvents.at(-1)).toMatchObject({ kind: 'fork', source: 'system', seq: firstRunEnd + 1, parent_conversation_id: id, at_seq: firstRunEnd, copy_workdir: true });

    // The fork goes on from its own history: the parent's second run is not in it.
    harness.llm.push({ text: 'fork answered' });
    await harness.post(`/conversations/${fork.id}/messages`, { content: 'in the fork' });
    await harness.waitForStatus(fork.id, ['idle']);
    const lines = transcript(harness, harness.llm.requests.length - 1);
    expect(lines.some((line) => line.includes('wrote v1'))).toBe(true);
    expect(lines.some((line) => line.includes('write v2'))).toBe(false);
    expect(lines.at(-1)).toBe('user:in the fork');
    expect(harness.llm.violations).toEqual([]);

    // Secrets only when asked; the whole conversation by default; the same workdir without copy_workdir.
    const withSecrets = (await harness.post(`/conversations/${id}/fork`, { copy_secrets: true })).body;
    expect((await harness.get(`/conversations/${withSecrets.id}/secrets`)).body.names).toEqual(['API_TOKEN']);
    expect(withSecrets.event_count).toBe(parentEvents.length + 1);
    expect(withSecrets.workdir).toBe(parent.workdir);
    expectError(await harness.post(`/conversations/${id}/fork`, { at_seq: 10_000 }), { status: 422, error: 'invalid_at_seq', message: /past the conversation's last event/ });
  });
});

describe('a deleted conversation', () => {
  it('forgets a deleted conversation\'s shadow repository: nothing about it stays in memory', async () => {
    harness = await startAgentHarness([
      { toolCalls: [{ name: 'bash', arguments: { command: 'echo one > one.txt' } }] },
      { text: 'done' },
      { toolCalls: [{ name: 'bash', arguments: { command: 'echo two > two.txt' } }] },
      { text: 'done' },
    ]);
    const shadow = (harness.server.services.checkpoints as unknown as { deps: { shadow: { held: number } } }).deps.shadow;
    const ids: string[] = [];
    for (let i = 0; i < 2; i++) {
      const id = await harness.createConversation({ initial_message: `make file ${i}` });
      await harness.waitForStatus(id, ['idle']);
      ids.push(id);
    }
    expect(shadow.held).toBe(2);
    const response = await fetch(`${harness.server.url}/conversations/${ids[0]}`, { method: 'DELETE', headers: harness.server.auth });
    expect(response.status).toBe(204);
    expect(shadow.held).toBe(1);
  });
});
