import fs from 'node:fs';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { startAgentHarness, type AgentHarness } from '../support/agent-harness.js';
import { tempDir } from '../support/agentd.js';

let harness: AgentHarness | undefined;
afterEach(async () => {
  await harness?.close();
  harness = undefined;
});

function write(root: string, files: Record<string, string>): void {
  for (const [name, text] of Object.entries(files)) {
    fs.mkdirSync(path.dirname(path.join(root, name)), { recursive: true });
    fs.writeFileSync(path.join(root, name), text);
  }
}

/** Creates a conversation (no run yet) and writes the project files into its workdir. */
async function project(files: Record<string, string>, body: Record<string, unknown> = {}): Promise<{ id: string; workdir: string }> {
  const id = await harness!.createConversation(body);
  const workdir = (await harness!.get(`/conversations/${id}`)).body.workdir as string;
  write(workdir, files);
  return { id, workdir };
}

const PDF_SKILL = '---\nname: pdf-forms\ndescription: Fill in PDF forms with the bundled script.\n---\n# Filling PDF forms\nRun `python fill.py FORM VALUES` (the script is beside this file). SKILL-BODY-MARKER\n';
const messagesOf = (index: number) => (harness!.llm.requests[index]!.body as any).messages as any[];

describe('skills: listed by name and description, loaded on demand', () => {
  it('the system prompt lists the skills; `skill` returns the full text and names the directory of the files beside it', async () => {
    const serverSkills = tempDir('agentd-skills-');
    fs.chmodSync(serverSkills, 0o755); // as an operator's skills directory is: the sandboxed agent runs as another user
    write(serverSkills, { 'changelog/SKILL.md': '---\nname: changelog\ndescription: Write a changelog entry the house way.\n---\nSERVER-SKILL-BODY\n', 'changelog/template.txt': 'TEMPLATE-BESIDE-THE-SKILL\n' });
    harness = await startAgentHarness(
      [
        { toolCalls: [{ name: 'skill', arguments: { name: 'pdf-forms' } }] },
        { toolCalls: [{ name: 'skill', arguments: { name: 'changelog' } }] },
        { toolCalls: [{ name: 'bash', arguments: { command: `cat ${serverSkills}/changelog/template.txt` } }] },
        { text: 'filled' },
      ],
      { env: { AGENTD_SKILLS_DIR: serverSkills } },
    );
    const { id, workdir } = await project({ '.claude/skills/pdf/SKILL.md': PDF_SKILL, '.claude/skills/pdf/fill.py': 'print(1)\n', '.agents/skills/lint/SKILL.md': '---\nname: lint\ndescription: How this repo lints.\n---\nLINT-BODY\n', '.claude/CLAUDE.md': 'DOTCLAUDE-MEMORY\n' });
    expect((await harness.post(`/conversations/${id}/messages`, { content: 'fill the form' })).status).toBe(202);
    await harness.waitForStatus(id, ['idle']);

    const first = messagesOf(0);
    expect(first[0].role).toBe('system');
    expect(first[0].content).toContain('- pdf-forms: Fill in PDF forms with the bundled script.');
    expect(first[0].content).toContain('- lint: How this repo lints.');
    expect(first[0].content).toContain('- changelog: Write a changelog entry the house way.');
    expect(first[0].content).toContain('DOTCLAUDE-MEMORY'); // memory files keep working, .claude/CLAUDE.md included
    // Progressive disclosure: no skill body is in the prompt until the agent asks for it.
    expect(JSON.stringify(first)).not.toContain('SKILL-BODY-MARKER');
    expect(JSON.stringify(first)).not.toContain('SERVER-SKILL-BODY');
    const toolNames = ((harness.llm.requests[0]!.body as any).tools as any[]).map((tool) => tool.function.name);
    expect(toolNames).toContain('skill');
    expect(toolNames).not.toContain('slash_command'); // no commands in this project

    const [observation, serverSkill, cat] = (await harness.events(id)).filter((event) => event.kind === 'observation');
    expect(observation).toMatchObject({ tool_name: 'skill', is_error: false, data: { skill: 'pdf-forms', source: 'path', path: '.claude/skills/pdf/SKILL.md' } });
    expect(observation.content).toContain('SKILL-BODY-MARKER');
    expect(observation.content).toContain(`${fs.realpathSync(workdir)}/.claude/skills/pdf`);
    const second = messagesOf(1);
    expect(second.find((message) => message.role === 'tool').content).toContain('SKILL-BODY-MARKER');
    // A server skill: its directory is named, and the files beside it are readable from the agent's shell.
    expect(serverSkill).toMatchObject({ is_error: false, data: { skill: 'changelog', source: 'server', path: 'changelog/SKILL.md' } });
    expect(serverSkill.content).toContain(`${serverSkills}/changelog`);
    expect(cat.content).toContain('TEMPLATE-BESIDE-THE-SKILL');
    expect(harness.llm.violations).toEqual([]);
  });

  it('a workdir that had no .claude at the first run offers the skill written into it before the next run, and stops when it goes', async () => {
    harness = await startAgentHarness([{ text: 'one' }, { text: 'two' }, { text: 'three' }]);
    const { id, workdir } = await project({});
    expect((await harness.post(`/conversations/${id}/messages`, { content: 'one' })).status).toBe(202);
    await harness.waitForStatus(id, ['idle']);
    const toolsOf = (index: number) => ((harness!.llm.requests[index]!.body as any).tools as any[]).map((tool) => tool.function.name);
    expect(toolsOf(0)).not.toContain('skill');

    write(workdir, { '.claude/skills/pdf/SKILL.md': PDF_SKILL });
    expect((await harness.post(`/conversations/${id}/messages`, { content: 'two' })).status).toBe(202);
    await harness.waitForStatus(id, ['idle']);
    expect(toolsOf(1)).toContain('skill');
    expect(messagesOf(1)[0].content).toContain('- pdf-forms: Fill in PDF forms with the bundled script.');
    expect((await harness.get(`/conversations/${id}/skills`)).body.skills.map((skill: any) => skill.name)).toEqual(['pdf-forms']);

    fs.rmSync(path.join(workdir, '.claude'), { recursive: true });
    expect((await harness.post(`/conversations/${id}/messages`, { content: 'three' })).status).toBe(202);
    await harness.waitForStatus(id, ['idle']);
    expect(toolsOf(2)).not.toContain('skill');
    expect(messagesOf(2)[0].content).not.toContain('pdf-forms');
  });

  it('an unknown skill is an error the model can act on, naming the skills there are', async () => {
    harness = await startAgentHarness([{ toolCalls: [{ name: 'skill', arguments: { name: 'nope' } }] }, { text: 'ok' }]);
    const { id } = await project({ '.claude/skills/pdf/SKILL.md': PDF_SKILL });
    await harness.post(`/conversations/${id}/messages`, { content: 'go' });
    await harness.waitForStatus(id, ['idle']);
    const observation = (await harness.events(id)).find((event) => event.kind === 'observation');
    expect(observation).toMatchObject({ is_error: true, content: 'There is no skill named "nope". Skills: pdf-forms.' });
  });
});

describe('slash commands', () => {
  it('`slash_command` returns the template with $ARGUMENTS, $1 and $2 filled', async () => {
    harness = await startAgentHarness([{ toolCalls: [{ name: 'slash_command', arguments: { name: 'review', arguments: 'src/app.ts "be strict"' } }] }, { text: 'reviewed' }]);
    const command = '---\ndescription: Review a file\nargument-hint: FILE [TONE]\n---\nReview $1 in a tone that is: $2.\nAll arguments: $ARGUMENTS\n';
    const { id } = await project({ '.claude/commands/review.md': command });
    await harness.post(`/conversations/${id}/messages`, { content: '/review src/app.ts "be strict"' });
    await harness.waitForStatus(id, ['idle']);
    expect(messagesOf(0)[0].content).toContain('- /review FILE [TONE]: Review a file');
    const observation = (await harness.events(id)).find((event) => event.kind === 'observation');
    expect(observation).toMatchObject({ tool_name: 'slash_command', is_error: false, data: { command: 'review', path: '.claude/commands/review.md' } });
    expect(observation.content).toBe('Review src/app.ts in a tone that is: be strict.\nAll arguments: src/app.ts "be strict"');
  });
});

describe('GET /conversations/{id}/skills', () => {
  it('lists skills, commands and agents with their source; malformed files are errors, never a failed run', async () => {
    harness = await startAgentHarness([{ text: 'still runs' }]);
    const { id } = await project(
      {
        '.claude/skills/pdf/SKILL.md': PDF_SKILL,
        '.claude/skills/broken-yaml/SKILL.md': '---\nname: [unclosed\ndescription: x\n---\nbody\n',
        '.claude/skills/no-description/SKILL.md': '---\nname: quiet\n---\nbody\n',
        '.claude/skills/unclosed/SKILL.md': '---\nname: unclosed\ndescription: never closed\n',
        '.claude/commands/deploy.md': '---\ndescription: Deploy it\nargument-hint: ENV\n---\nDeploy to $1.\n',
        '.claude/commands/plain.md': 'Say hello to $ARGUMENTS\n',
        '.claude/commands/bad.md': '---\ndescription: "unterminated\n---\nx\n',
        '.claude/agents/reviewer.md': '---\nname: reviewer\ndescription: Reviews diffs\ntools: Read, Grep, bash\nmodel: inherit\n---\nYou review diffs carefully.\n',
        '.claude/agents/empty.md': '---\nname: empty\ndescription: has no prompt\n---\n',
      },
      { agents: { researcher: { description: 'Finds things out', prompt: 'You research.', tools: ['glob', 'grep'] } } },
    );
    const { status, body } = await harness.get(`/conversations/${id}/skills`);
    expect(status).toBe(200);
    expect(body.skills).toEqual([{ name: 'pdf-forms', description: 'Fill in PDF forms with the bundled script.', source: 'path', path: '.claude/skills/pdf/SKILL.md', directory: expect.stringMatching(/\/\.claude\/skills\/pdf$/) }]);
    expect(body.commands).toEqual([
      { name: 'deploy', description: 'Deploy it', source: 'path', path: '.claude/commands/deploy.md', argument_hint: 'ENV' },
      { name: 'plain', description: 'Say hello to $ARGUMENTS', source: 'path', path: '.claude/commands/plain.md', argument_hint: null },
    ]);
    expect(body.agents).toEqual([
      { name: 'researcher', description: 'Finds things out', source: 'config', path: null, tools: ['glob', 'grep'], model: null },
      { name: 'reviewer', description: 'Reviews diffs', source: 'path', path: '.claude/agents/reviewer.md', tools: ['Read', 'Grep', 'bash'], model: 'inherit' },
      expect.objectContaining({ name: 'general-purpose', source: 'builtin', path: null, tools: null }),
    ]);
    const errors = Object.fromEntries(body.errors.map((error: any) => [error.path, error]));
    expect(Object.keys(errors).sort()).toEqual(['.claude/agents/empty.md', '.claude/commands/bad.md', '.claude/skills/broken-yaml/SKILL.md', '.claude/skills/no-description/SKILL.md', '.claude/skills/unclosed/SKILL.md']);
    expect(errors['.claude/skills/broken-yaml/SKILL.md']).toMatchObject({ type: 'skill', source: 'path', error: expect.stringContaining('invalid YAML frontmatter') });
    expect(errors['.claude/skills/no-description/SKILL.md'].error).toContain('no `description`');
    expect(errors['.claude/skills/unclosed/SKILL.md'].error).toContain('never closed');
    expect(errors['.claude/agents/empty.md']).toMatchObject({ type: 'agent', error: expect.stringContaining('no body') });

    // The malformed files do not stop a run.
    await harness.post(`/conversations/${id}/messages`, { content: 'hello' });
    await harness.waitForStatus(id, ['idle']);
    expect((await harness.events(id)).at(-2)).toMatchObject({ kind: 'message', source: 'agent', content: 'still runs' });
  });

  it('never reads a file through a symlink out of the workdir (a decoy outside holds a marker)', async () => {
    harness = await startAgentHarness([{ text: 'ok' }]);
    const decoy = tempDir('agentd-decoy-');
    write(decoy, {
      'SKILL.md': '---\nname: stolen\ndescription: DECOY-DESCRIPTION\n---\nDECOY-BODY\n',
      'skilldir/SKILL.md': '---\nname: stolen-dir\ndescription: DECOY-DIR\n---\nDECOY-DIR-BODY\n',
      'commands/evil.md': '---\ndescription: DECOY-COMMAND\n---\nDECOY\n',
      'CLAUDE.md': 'DECOY-MEMORY\n',
    });
    const { id, workdir } = await project({});
    fs.mkdirSync(path.join(workdir, '.claude/skills/link-file'), { recursive: true });
    fs.symlinkSync(path.join(decoy, 'SKILL.md'), path.join(workdir, '.claude/skills/link-file/SKILL.md'));
    fs.symlinkSync(path.join(decoy, 'skilldir'), path.join(workdir, '.claude/skills/link-dir'));
    fs.symlinkSync(path.join(decoy, 'commands'), path.join(workdir, '.claude/commands'));
    fs.symlinkSync(path.join(decoy, 'CLAUDE.md'), path.join(workdir, '.claude/CLAUDE.md'));
    const { body } = await harness.get(`/conversations/${id}/skills`);
    expect(body.skills).toEqual([]);
    expect(body.commands).toEqual([]);
    expect(body.errors.map((error: any) => [error.path, error.error.split(':')[0]]).sort()).toEqual([
      ['.claude/commands', 'unreadable (path_outside_workdir)'],
      ['.claude/skills/link-dir/SKILL.md', 'unreadable (path_outside_workdir)'],
      ['.claude/skills/link-file/SKILL.md', 'unreadable (path_outside_workdir)'],
    ]);
    expect(JSON.stringify(body)).not.toContain('DECOY');
    await harness.post(`/conversations/${id}/messages`, { content: 'hello' });
    await harness.waitForStatus(id, ['idle']);
    expect(JSON.stringify(harness.llm.requests.map((request) => request.body))).not.toContain('DECOY');
  });

  it('setting_sources [] reads nothing from the workdir: no skills, commands, agent files or memory', async () => {
    harness = await startAgentHarness([{ text: 'ok' }]);
    const { id } = await project({ '.claude/skills/pdf/SKILL.md': PDF_SKILL, '.claude/commands/deploy.md': 'Deploy\n', '.claude/agents/reviewer.md': '---\ndescription: r\n---\nYou review.\n', 'AGENTS.md': 'MEMORY-MARKER\n' }, { setting_sources: [] });
    const { body } = await harness.get(`/conversations/${id}/skills`);
    expect(body).toEqual({ skills: [], commands: [], agents: [expect.objectContaining({ name: 'general-purpose' })], errors: [] });
    await harness.post(`/conversations/${id}/messages`, { content: 'hello' });
    await harness.waitForStatus(id, ['idle']);
    expect(messagesOf(0)[0].content).not.toContain('MEMORY-MARKER');
    expect(messagesOf(0)[0].content).not.toContain('pdf-forms');
  });

  it('answers 404 for an unknown conversation', async () => {
    harness = await startAgentHarness([]);
    const { status, body } = await harness.get('/conversations/00000000-0000-4000-8000-000000000000/skills');
    expect(status).toBe(404);
    expect(body.error).toBe('conversation_not_found');
  });
});

describe('the `agents` field', () => {
  it('is validated on create (a clear 400), replaced by PUT /config and shown by GET /skills', async () => {
    harness = await startAgentHarness([]);
    const llm = { model: 'fake-model', base_url: harness.llm.url, api_key: 'k' };
    const badName = await harness.post('/conversations', { llm, agents: { 'bad name!': { description: 'x', prompt: 'y' } } });
    expect(badName.status).toBe(400);
    expect(badName.body.error).toBe('validation_error');
    expect(badName.body.message).toContain('agents.bad name!');
    const noPrompt = await harness.post('/conversations', { llm, agents: { reviewer: { description: 'x' } } });
    expect(noPrompt.status).toBe(400);
    const tooBig = await harness.post('/conversations', { llm, agents: Object.fromEntries(Array.from({ length: 4 }, (_, i) => [`a${i}`, { description: 'x', prompt: 'p'.repeat(90_000) }])) });
    expect(tooBig.status).toBe(400);
    expect(JSON.stringify(tooBig.body)).toContain('at most 256 KiB');

    const id = await harness.createConversation({ agents: { first: { description: 'First', prompt: 'One.' } } });
    expect((await harness.get(`/conversations/${id}`)).body.agents).toEqual({ first: { description: 'First', prompt: 'One.' } });
    const put: any = await (await fetch(`${harness.server.url}/conversations/${id}/config`, { method: 'PUT', headers: { ...harness.server.auth, 'content-type': 'application/json' }, body: JSON.stringify({ agents: { second: { description: 'Second', prompt: 'Two.', model: 'm2' } } }) })).json();
    expect(put.agents).toEqual({ second: { description: 'Second', prompt: 'Two.', model: 'm2' } });
    const { body } = await harness.get(`/conversations/${id}/skills`);
    expect(body.agents.map((agent: any) => [agent.name, agent.source, agent.model])).toEqual([['second', 'config', 'm2'], ['general-purpose', 'builtin', null]]);
  });
});
