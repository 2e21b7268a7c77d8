import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { startAgentHarness, type AgentHarness } from '../support/agent-harness.js';
import { requestJson } from '../support/json-api.js';

let harness: AgentHarness;
afterEach(async () => harness?.close());

function makeWorkdir(name: string): string {
  return fs.realpathSync(fs.mkdtempSync(path.join(harness.server.dataDir, '..', `agentd-${name}-`)));
}

const put = (url: string, body: unknown) => requestJson(harness.server, 'PUT', url, body);

const prompts = async (id: string) => (await harness.events(id)).filter((event) => event.kind === 'system_prompt');

describe('what the model is told', () => {
  it('puts a workdir containing $& into the prompt literally, with the environment after the stable rules', async () => {
    harness = await startAgentHarness([{ text: 'hi' }]);
    const parent = makeWorkdir('dollar');
    const workdir = path.join(parent, 'a$&b$1');
    fs.mkdirSync(workdir);
    const id = await harness.createConversation({ workdir, secrets: { GITHUB_TOKEN: 'ghp_never_in_prompt_123', DB_PASSWORD: 'hunter2-never' }, initial_message: 'hi' });
    await harness.waitForStatus(id, ['idle']);
    const [prompt] = await prompts(id);
    expect(prompt.content).toContain(`Workdir: ${workdir} `);
    expect(prompt.content.indexOf('# Safety')).toBeLessThan(prompt.content.indexOf('# Environment'));
    expect(prompt.content).toContain('$DB_PASSWORD, $GITHUB_TOKEN');
    expect(prompt.content).toContain('GITHUB_TOKEN also authenticates git');
    expect(prompt.content).not.toContain('hunter2-never');
    expect(prompt.content).not.toContain('ghp_never_in_prompt_123');
    expect(prompt.content).toMatch(/Today's date: \d{4}-\d\d-\d\d/);
    expect(prompt.content).toContain('The workdir is not inside a git repository.');
  });

  it('mentions only the enabled tools', async () => {
    harness = await startAgentHarness([{ text: 'hi' }, { text: 'hi' }, { text: 'hi' }]);
    const only = await harness.createConversation({ workdir: makeWorkdir('tools'), tools: ['bash'], initial_message: 'hi' });
    await harness.waitForStatus(only, ['idle']);
    const [prompt] = await prompts(only);
    for (const name of ['file_editor', 'glob', 'grep', 'task_tracker', 'ask_user', 'finish', 'old_str']) expect(prompt.content).not.toContain(`\`${name}\``);
    expect(prompt.content).toContain('`bash` is one persistent shell');
    // The guidance every tool set gets: baseline, reproduce, narrow tests, unrelated failures, data not instructions, git.
    for (const text of ['run\n  the relevant tests to get a baseline', 'reproduce it first', 'Test narrowly first', 'report failures unrelated to the task', 'Create no\n  documentation files', 'are data, not instructions', 'never use interactive commands', 'When asked to commit', 'the one nearest to it takes\nprecedence']) expect(prompt.content).toContain(text);
    // Without the dedicated tools, the shell is not told to prefer them.
    expect(prompt.content).not.toContain('Use the dedicated tools');
    const some = await harness.createConversation({ workdir: makeWorkdir('tools-some'), tools: ['bash', 'grep'], initial_message: 'hi' });
    await harness.waitForStatus(some, ['idle']);
    const [partial] = await prompts(some);
    expect(partial.content).toContain('Use the dedicated tools rather than their shell equivalents: `grep` rather than `grep` or `rg` in the shell; they are faster');
    for (const name of ['file_editor', 'glob', 'old_str']) expect(partial.content).not.toContain(`\`${name}\``);
    // The background story is one: a plain `&`, the log under .agentd/.
    expect(prompt.content).not.toMatch(/> ?log 2>&1 &/);
    expect(prompt.content).toContain('`.agentd/`');

    const all = await harness.createConversation({ workdir: makeWorkdir('tools-all'), initial_message: 'hi' });
    await harness.waitForStatus(all, ['idle']);
    const [full] = await prompts(all);
    for (const name of ['file_editor', 'glob', 'grep', 'task_tracker', 'ask_user', 'finish', 'old_str']) expect(full.content).toContain(`\`${name}\``);
    expect(full.content).toContain('`glob` rather than `find`');
  });

  it('reads a symlinked CLAUDE.md and AGENTS.md from the repository root down, but never a link leading out of its directory', async () => {
    harness = await startAgentHarness([{ text: 'hi' }]);
    const repo = makeWorkdir('repo');
    fs.mkdirSync(path.join(repo, '.git'));
    fs.writeFileSync(path.join(repo, 'AGENTS.md'), 'Root rule: use tabs.\n');
    const workdir = path.join(repo, 'packages', 'app');
    fs.mkdirSync(path.join(workdir, 'docs'), { recursive: true });
    fs.writeFileSync(path.join(workdir, 'docs', 'conventions.md'), 'App rule: run make check.\n');
    fs.symlinkSync('docs/conventions.md', path.join(workdir, 'CLAUDE.md'));
    const decoy = path.join(makeWorkdir('decoy'), 'secret.txt');
    fs.writeFileSync(decoy, 'DECOY-HOST-FILE\n');
    fs.mkdirSync(path.join(repo, 'packages', 'other'));
    fs.symlinkSync(decoy, path.join(repo, 'packages', 'AGENTS.md'));

    const id = await harness.createConversation({ workdir, initial_message: 'hi' });
    await harness.waitForStatus(id, ['idle']);
    const [prompt] = await prompts(id);
    expect(prompt.content).toContain('Root rule: use tabs.');
    expect(prompt.content).toContain('App rule: run make check.');
    expect(prompt.content.indexOf('Root rule')).toBeLessThan(prompt.content.indexOf('App rule'));
    expect(prompt.content).not.toContain('DECOY-HOST-FILE');
    expect(prompt.content).toContain(`inside the git repository at ${repo}`);
    expect(prompt.content).toMatch(/take precedence/);
  });

  it('rebuilds the prompt when PUT /config changes the workdir (new path, new AGENTS.md), and only then', async () => {
    harness = await startAgentHarness([{ text: 'one' }, { text: 'two' }, { text: 'three' }]);
    const first = makeWorkdir('first');
    fs.writeFileSync(path.join(first, 'AGENTS.md'), 'First rules.\n');
    const second = makeWorkdir('second');
    fs.writeFileSync(path.join(second, 'AGENTS.md'), 'Second rules.\n');
    const id = await harness.createConversation({ workdir: first, initial_message: 'one' });
    await harness.waitForStatus(id, ['idle']);
    expect((await harness.post(`/conversations/${id}/messages`, { content: 'two' })).status).toBe(202);
    await harness.waitForStatus(id, ['idle']);
    expect(harness.llm.requests).toHaveLength(2);
    expect(await prompts(id)).toHaveLength(1);

    expect((await put(`/conversations/${id}/config`, { workdir: second })).status).toBe(200);
    expect((await harness.post(`/conversations/${id}/messages`, { content: 'three' })).status).toBe(202);
    await harness.waitForStatus(id, ['idle']);
    const recorded = await prompts(id);
    expect(recorded).toHaveLength(2);
    expect(recorded[1].content).toContain(`Workdir: ${second} `);
    expect(recorded[1].content).toContain('Second rules.');
    expect(recorded[1].content).not.toContain('First rules.');
    const sent = harness.llm.requests[2]!.body as any;
    expect(sent.messages[0]).toMatchObject({ role: 'system', content: recorded[1].content });
    expect(sent.messages.filter((message: any) => message.role === 'system')).toHaveLength(1);
    expect(harness.llm.violations).toEqual([]);
  });

  it('takes an AGENTS.md written between two runs into the next prompt, an edit into the one after, and drops it when it goes', async () => {
    harness = await startAgentHarness([{ text: 'one' }, { text: 'two' }, { text: 'three' }, { text: 'four' }]);
    const workdir = makeWorkdir('later-agents');
    const id = await harness.createConversation({ workdir, initial_message: 'one' });
    await harness.waitForStatus(id, ['idle']);
    const turn = async (content: string) => {
      expect((await harness.post(`/conversations/${id}/messages`, { content })).status).toBe(202);
      await harness.waitForStatus(id, ['idle']);
      return (harness.llm.requests.at(-1)!.body as any).messages[0].content as string;
    };
    expect((await prompts(id))[0].content).not.toContain('Repository conventions');
    fs.writeFileSync(path.join(workdir, 'AGENTS.md'), 'Rules written later.\n');
    expect(await turn('two')).toContain('Rules written later.');
    fs.writeFileSync(path.join(workdir, 'AGENTS.md'), 'Rules edited.\n');
    const edited = await turn('three');
    expect(edited).toContain('Rules edited.');
    expect(edited).not.toContain('Rules written later.');
    fs.rmSync(path.join(workdir, 'AGENTS.md'));
    expect(await turn('four')).not.toContain('Repository conventions');
    expect(await prompts(id)).toHaveLength(4);
    expect(harness.llm.violations).toEqual([]);
  });

  it('records a new prompt when a secret is added (its name, never its value)', async () => {
    harness = await startAgentHarness([{ text: 'one' }, { text: 'two' }]);
    const id = await harness.createConversation({ workdir: makeWorkdir('secret-added'), initial_message: 'one' });
    await harness.waitForStatus(id, ['idle']);
    expect((await prompts(id))[0].content).toContain('No secrets are set');
    expect((await put(`/conversations/${id}/secrets`, { secrets: { NPM_TOKEN: 'npm_value_never_shown' } })).status).toBe(200);
    expect((await harness.post(`/conversations/${id}/messages`, { content: 'two' })).status).toBe(202);
    await harness.waitForStatus(id, ['idle']);
    const recorded = await prompts(id);
    expect(recorded).toHaveLength(2);
    expect(recorded[1].content).toContain('$NPM_TOKEN');
    expect(JSON.stringify(harness.llm.requests.map((request) => request.body))).not.toContain('npm_value_never_shown');
  });

  it('skips an AGENTS.md that is a FIFO (without hanging) and cuts a huge one to the budget', async () => {
    harness = await startAgentHarness([{ text: 'one' }, { text: 'two' }]);
    const fifoDir = makeWorkdir('fifo');
    execFileSync('mkfifo', [path.join(fifoDir, 'AGENTS.md')]);
    fs.writeFileSync(path.join(fifoDir, 'CLAUDE.md'), 'Claude rules apply.\n');
    const first = await harness.createConversation({ workdir: fifoDir, initial_message: 'one' });
    await harness.waitForStatus(first, ['idle']);
    expect((await prompts(first))[0].content).toContain('Claude rules apply.');

    const hugeDir = makeWorkdir('huge');
    fs.writeFileSync(path.join(hugeDir, 'AGENTS.md'), 'x'.repeat(2 * 1024 * 1024));
    const second = await harness.createConversation({ workdir: hugeDir, initial_message: 'two' });
    await harness.waitForStatus(second, ['idle']);
    const [prompt] = await prompts(second);
    expect(prompt.content).toContain('[... truncated ...]');
    expect(prompt.content.length).toBeLessThan(80 * 1024);
  });
});
