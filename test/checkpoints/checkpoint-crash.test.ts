import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { tempDir } from '../support/agentd.js';
import { restartableServer } from '../support/restartable-server.js';

/**
 * kill -9 in the middle of a rewind or a fork (the built server, paused at a named crash point
 * by AGENTD_TEST_PAUSE_AT, then killed): after a restart the rewind is complete (rolled forward
 * from its intent) and the fork is absent (no conversation, no events, no workdir).
 */
const agentd = restartableServer();
const { api } = agentd;

async function waitFor<T>(what: string, probe: () => Promise<T | undefined | null | false>, timeoutMs = 30_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

const idle = (id: string) => waitFor(`conversation ${id} idle`, async () => (await api(`/conversations/${id}`)).status === 'idle');

/** A conversation whose first run wrote a.txt, then changed it with bash; returns it with its checkpoints. */
async function conversationWithHistory(dataDir: string, pauseAt: string) {
  const llm = await agentd.fakeLlm([
    { toolCalls: [{ name: 'file_editor', arguments: { command: 'create', path: 'a.txt', file_text: 'first\n' } }] },
    { toolCalls: [{ name: 'bash', arguments: { command: 'echo second > a.txt && echo extra > b.txt' } }] },
    { text: 'done writing' },
  ]);
  await agentd.start({ dataDir, env: { AGENTD_TEST_PAUSE_AT: pauseAt } });
  const created = await api('/conversations', { method: 'POST', body: JSON.stringify({ llm: { model: 'fake', base_url: llm.url, api_key: 'k' }, initial_message: 'write files' }) });
  await idle(created.id);
  const checkpoints = (await api(`/conversations/${created.id}/checkpoints`)).items;
  return { conversation: created, checkpoints, events: (await api(`/conversations/${created.id}/events?limit=1000`)).items };
}

async function killAt(point: string, request: () => Promise<unknown>): Promise<void> {
  const pending = request().catch(() => null);
  await waitFor(`pause point ${point}`, async () => agentd.server.output().includes(`AGENTD_TEST_PAUSED ${point}`));
  await agentd.kill();
  await pending;
}

describe('kill -9 during a rewind', () => {
  for (const point of ['rewind_before_restore', 'rewind_before_event']) {
    it(`at ${point}: after a restart the rewind is complete, once, and the history is the rewound one`, { timeout: 120_000 }, async () => {
      const dataDir = tempDir();
      const { conversation, checkpoints, events } = await conversationWithHistory(dataDir, point);
      const beforeBash = checkpoints.find((checkpoint: any) => checkpoint.trigger === 'tool' && checkpoint.files_changed.includes('a.txt'));
      expect(beforeBash).toBeDefined();
      expect(fs.readFileSync(path.join(conversation.workdir, 'a.txt'), 'utf8')).toBe('second\n');

      await killAt(point, () => api(`/conversations/${conversation.id}/rewind`, { method: 'POST', body: JSON.stringify({ checkpoint_id: beforeBash.id }) }));
      await agentd.start({ dataDir });

      expect(fs.readFileSync(path.join(conversation.workdir, 'a.txt'), 'utf8')).toBe('first\n');
      expect(fs.existsSync(path.join(conversation.workdir, 'b.txt'))).toBe(false);
      const after = (await api(`/conversations/${conversation.id}/events?limit=1000`)).items;
      const rewinds = after.filter((event: any) => event.kind === 'rewind');
      expect(rewinds).toHaveLength(1);
      expect(rewinds[0]).toMatchObject({ checkpoint_id: beforeBash.id, files: true, conversation: true, to_seq: beforeBash.seq });
      for (const [index, event] of events.entries()) expect(after[index]).toEqual(event);
      expect(fs.readdirSync(path.join(dataDir, 'intents'))).toEqual([]);

      // The restarted server's history fold rebuilds the rewound view.
      agentd.llm.push({ text: 'after the crash' });
      await api(`/conversations/${conversation.id}/messages`, { method: 'POST', body: JSON.stringify({ content: 'go on' }) });
      await idle(conversation.id);
      const messages = (agentd.llm.requests.at(-1)!.body as any).messages;
      expect(messages.some((message: any) => message.tool_calls?.some((call: any) => call.function.name === 'bash'))).toBe(false);
      expect(messages.some((message: any) => message.content === 'done writing')).toBe(false);
      expect(messages.at(-1)).toMatchObject({ role: 'user', content: 'go on' });
      expect(agentd.llm.violations).toEqual([]);
    });
  }
});

describe('kill -9 during a fork', () => {
  it('after a restart the half-made fork is absent: no conversation, no events, no workdir', { timeout: 120_000 }, async () => {
    const dataDir = tempDir();
    const { conversation } = await conversationWithHistory(dataDir, 'fork_before_record');
    const workspaces = path.dirname(conversation.workdir);
    const conversationsDir = path.join(dataDir, 'conversations');
    // The workdirs made ahead for the next conversations (AGENTD_WARM_SHELLS) are not conversations': the restart removes them.
    // Each is noted before it is made: the note read after the listing names every one listed.
    const warmNote = path.join(dataDir, 'warm-workdir');
    const conversationWorkdirs = () => {
      const listed = fs.readdirSync(workspaces);
      const warm = new Set(fs.existsSync(warmNote) ? fs.readFileSync(warmNote, 'utf8').split('\n').filter(Boolean).map((line) => path.basename(line)) : []);
      return listed.filter((name) => !warm.has(name));
    };
    const before = { workspaces: conversationWorkdirs(), conversations: fs.readdirSync(conversationsDir) };

    await killAt('fork_before_record', () => api(`/conversations/${conversation.id}/fork`, { method: 'POST', body: JSON.stringify({ copy_workdir: true }) }));
    // The crash point is after the events and the workdir copy: both exist on disk now.
    expect(conversationWorkdirs().length).toBe(before.workspaces.length + 1);
    expect(fs.readdirSync(conversationsDir).length).toBe(before.conversations.length + 1);

    await agentd.start({ dataDir });
    expect((await api('/conversations')).items.map((item: any) => item.id)).toEqual([conversation.id]);
    // (The restarted server may have made warm workdirs of its own since.)
    expect(conversationWorkdirs()).toEqual(before.workspaces);
    expect(fs.readdirSync(conversationsDir)).toEqual(before.conversations);
    expect(fs.readdirSync(path.join(dataDir, 'intents'))).toEqual([]);

    // A fork after the restart works.
    const fork = await api(`/conversations/${conversation.id}/fork`, { method: 'POST', body: JSON.stringify({ copy_workdir: true }) });
    expect(fs.readFileSync(path.join(fork.workdir, 'a.txt'), 'utf8')).toBe('second\n');
  });
});
