import fs from 'node:fs';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { TreeSitterShellParser } from '../../src/adapters/shell-syntax/index.js';
import { PermissionPolicy } from '../../src/core/permissions/permission-policy.js';
import { startAgentHarness, type AgentHarness } from '../support/agent-harness.js';
import { expectError } from '../support/expect-error.js';

let harness: AgentHarness | undefined;
afterEach(async () => {
  await harness?.close();
  harness = undefined;
});

const bash = (command: string) => ({ toolCalls: [{ name: 'bash', arguments: { command } }] });
const edit = (file: string) => ({ toolCalls: [{ name: 'file_editor', arguments: { command: 'create', path: file, file_text: 'x' } }] });
const toolMessages = (harness: AgentHarness | undefined) => ((harness!.llm.requests.at(-1)!.body as any).messages as any[]).filter((message) => message.role === 'tool');

describe('permission rules', () => {
  it('deny beats a hidden compound command, ask waits for approval, the model hears which rule refused', async () => {
    harness = await startAgentHarness([bash('true && rm -rf victim'), bash('git push origin main'), { text: 'done' }, { text: 'after approval' }]);
    const id = await harness.createConversation({
      permissions: { default: 'allow', ask: ['bash(git push*)'], deny: ['bash(rm -rf*)'] },
      initial_message: 'clean up and push',
    });
    const workdir = (await harness.get(`/conversations/${id}`)).body.workdir as string;
    fs.mkdirSync(path.join(workdir, 'victim'));
    fs.writeFileSync(path.join(workdir, 'victim', 'keep.txt'), 'still here');

    const waiting = await harness.waitForStatus(id, ['waiting_for_confirmation', 'idle']);
    expect(waiting.status).toBe('waiting_for_confirmation');
    expect(waiting.pending_actions).toMatchObject([{ tool_name: 'bash', arguments: { command: 'git push origin main' } }]);
    expect(fs.readFileSync(path.join(workdir, 'victim', 'keep.txt'), 'utf8')).toBe('still here');
    const events = await harness.events(id);
    const rejection = events.find((event) => event.kind === 'rejection');
    expect(rejection).toMatchObject({ source: 'system', tool_name: 'bash', rule: 'deny: bash(rm -rf*)' });
    expect(events.some((event) => event.kind === 'observation' && event.tool_name === 'bash')).toBe(false);
    // The LLM was told why, in the tool result of the refused call.
    expect(toolMessages(harness)[0].content).toBe('Denied by the permission rule `deny: bash(rm -rf*)`. It was not executed.');

    expect((await harness.post(`/conversations/${id}/reject`, { reason: 'no pushing today' })).status).toBe(202);
    await harness.waitForStatus(id, ['idle']);
    expect(toolMessages(harness).at(-1).content).toBe('The user rejected this action: no pushing today. It was not executed.');
    expect(harness.llm.violations).toEqual([]);
  });

  it('an approved action is checked again: a deny rule added while it waited still refuses it', async () => {
    harness = await startAgentHarness([bash('echo approved > approved.txt'), { text: 'understood' }]);
    const id = await harness.createConversation({ confirmation_mode: true, initial_message: 'write it' });
    const waiting = await harness.waitForStatus(id, ['waiting_for_confirmation', 'idle']);
    expect(waiting.pending_actions).toMatchObject([{ tool_name: 'bash', arguments: { command: 'echo approved > approved.txt' } }]);
    expect((await harness.put(`/conversations/${id}/config`, { permissions: { deny: ['bash(echo*)'] } })).status).toBe(200);

    expect((await harness.post(`/conversations/${id}/approve`, {})).status).toBe(202);
    await harness.waitForStatus(id, ['idle']);
    const workdir = (await harness.get(`/conversations/${id}`)).body.workdir as string;
    expect(fs.existsSync(path.join(workdir, 'approved.txt'))).toBe(false);
    const events = await harness.events(id);
    expect(events.filter((event) => event.kind === 'rejection')).toMatchObject([{ source: 'system', tool_name: 'bash', rule: 'deny: bash(echo*)' }]);
    expect(events.some((event) => event.kind === 'observation' && event.tool_name === 'bash')).toBe(false);
    expect(toolMessages(harness).at(-1).content).toBe('Denied by the permission rule `deny: bash(echo*)`. It was not executed.');
    expect(harness.llm.violations).toEqual([]);
  });

  it('file tools match the path relative to the workdir; default deny refuses the rest', async () => {
    harness = await startAgentHarness([edit('src/a.txt'), edit('./README.md'), edit('src/../b.txt'), { text: 'done' }]);
    const id = await harness.createConversation({ permissions: { default: 'deny', allow: ['file_editor(src/**)'] }, initial_message: 'edit' });
    await harness.waitForStatus(id, ['idle']);
    const workdir = (await harness.get(`/conversations/${id}`)).body.workdir as string;
    expect(fs.existsSync(path.join(workdir, 'src', 'a.txt'))).toBe(true);
    expect(fs.existsSync(path.join(workdir, 'README.md'))).toBe(false);
    expect(fs.existsSync(path.join(workdir, 'b.txt'))).toBe(false);
    const rejections = (await harness.events(id)).filter((event) => event.kind === 'rejection');
    expect(rejections).toHaveLength(2);
    expect(rejections[0].reason).toBe('Denied: the permission default for this conversation is deny.');
  });

  it('project settings add deny rules but cannot allow what the client asks for', async () => {
    harness = await startAgentHarness([edit('secrets/key.txt'), bash('echo hello'), { text: 'done' }]);
    const id = await harness.createConversation({ permissions: { ask: ['bash(echo*)'] } });
    const workdir = (await harness.get(`/conversations/${id}`)).body.workdir as string;
    fs.mkdirSync(path.join(workdir, '.claude'));
    fs.writeFileSync(path.join(workdir, '.claude', 'settings.json'), JSON.stringify({ permissions: { deny: ['file_editor(secrets/**)'], allow: ['bash(echo*)', 'bash'] } }));
    await harness.post(`/conversations/${id}/messages`, { content: 'go' });
    const waiting = await harness.waitForStatus(id, ['waiting_for_confirmation', 'idle']);
    expect(waiting.status).toBe('waiting_for_confirmation');
    expect(waiting.pending_actions[0].arguments.command).toBe('echo hello');
    const rejection = (await harness.events(id)).find((event) => event.kind === 'rejection');
    expect(rejection.rule).toBe('deny: file_editor(secrets/**)');
    expect(rejection.reason).toContain(".claude/settings.json");
    expect(fs.existsSync(path.join(workdir, 'secrets'))).toBe(false);
  });

  it('setting_sources [] ignores the project file; confirmation_mode asks unless a rule allows', async () => {
    harness = await startAgentHarness([{ toolCalls: [{ name: 'glob', arguments: { pattern: '*' } }] }, edit('a.txt'), { text: 'done' }]);
    const id = await harness.createConversation({ setting_sources: [], confirmation_mode: true, permissions: { allow: ['glob', 'file_editor(a.txt)'] } });
    const workdir = (await harness.get(`/conversations/${id}`)).body.workdir as string;
    fs.mkdirSync(path.join(workdir, '.claude'));
    fs.writeFileSync(path.join(workdir, '.claude', 'settings.json'), JSON.stringify({ permissions: { deny: ['file_editor'] } }));
    await harness.post(`/conversations/${id}/messages`, { content: 'go' });
    await harness.waitForStatus(id, ['idle']);
    expect(fs.readFileSync(path.join(workdir, 'a.txt'), 'utf8')).toBe('x');
    expect((await harness.events(id)).some((event) => event.kind === 'rejection')).toBe(false);
  });

  it('deny and ask win over an unconditional allow: the scripted rm -rf victim is refused, victim/ stays', async () => {
    harness = await startAgentHarness([bash('rm -rf victim'), bash('git push origin main'), { text: 'done' }]);
    const id = await harness.createConversation({ permissions: { allow: ['bash'], ask: ['bash(git push*)'], deny: ['bash(rm -rf*)'] } });
    const workdir = (await harness.get(`/conversations/${id}`)).body.workdir as string;
    fs.mkdirSync(path.join(workdir, 'victim'));
    fs.writeFileSync(path.join(workdir, 'victim', 'keep.txt'), 'still here');
    await harness.post(`/conversations/${id}/messages`, { content: 'clean up and push' });
    const waiting = await harness.waitForStatus(id, ['waiting_for_confirmation', 'idle']);
    expect(waiting.status).toBe('waiting_for_confirmation');
    expect(waiting.pending_actions).toMatchObject([{ tool_name: 'bash', arguments: { command: 'git push origin main' } }]);
    expect(fs.readFileSync(path.join(workdir, 'victim', 'keep.txt'), 'utf8')).toBe('still here');
    expect((await harness.events(id)).filter((event) => event.kind === 'rejection')).toMatchObject([{ source: 'system', tool_name: 'bash', rule: 'deny: bash(rm -rf*)' }]);
  });

  it('bash variants that hide rm -rf are refused by a real bash run; a script piped into a shell is asked', async () => {
    const variants = ['(rm -rf victim)', "bash -c 'rm -rf victim'", '\\rm -fr victim', 'X=1 command rm -r -f victim', "eval 'rm -rf victim'", 'for d in victim; do /bin/rm -rf "$d"; done', 'echo victim | xargs rm --recursive --force'];
    const piped = 'echo cm0gLXJmIHZpY3RpbQ== | base64 -d | bash';
    harness = await startAgentHarness([...variants.map(bash), bash(piped), { text: 'done' }]);
    const id = await harness.createConversation({ permissions: { deny: ['bash(rm -rf*)'] } });
    const workdir = (await harness.get(`/conversations/${id}`)).body.workdir as string;
    fs.mkdirSync(path.join(workdir, 'victim'));
    fs.writeFileSync(path.join(workdir, 'victim', 'keep.txt'), 'still here');
    await harness.post(`/conversations/${id}/messages`, { content: 'clean up' });
    const waiting = await harness.waitForStatus(id, ['waiting_for_confirmation', 'idle']);
    expect(waiting.status).toBe('waiting_for_confirmation');
    expect(waiting.pending_actions).toMatchObject([{ tool_name: 'bash', arguments: { command: piped } }]);
    expect(fs.readFileSync(path.join(workdir, 'victim', 'keep.txt'), 'utf8')).toBe('still here');
    const rejections = (await harness.events(id)).filter((event) => event.kind === 'rejection');
    expect(rejections.map((event) => event.rule)).toEqual(variants.map(() => 'deny: bash(rm -rf*)'));
    expect((await harness.post(`/conversations/${id}/reject`, { reason: 'no' })).status).toBe(202);
    await harness.waitForStatus(id, ['idle']);
    expect(fs.readFileSync(path.join(workdir, 'victim', 'keep.txt'), 'utf8')).toBe('still here');
  });

  it('an allow rule bash(echo *) does not run what ${x@P} hides: the call is asked, nothing is touched', async () => {
    const command = "echo ${x:=$'\\x24(touch pwn)'} ${x@P}";
    harness = await startAgentHarness([bash(command), { text: 'done' }]);
    const id = await harness.createConversation({ permissions: { default: 'ask', allow: ['bash(echo *)'] }, initial_message: 'say it' });
    const waiting = await harness.waitForStatus(id, ['waiting_for_confirmation', 'idle']);
    expect(waiting.status).toBe('waiting_for_confirmation');
    expect(waiting.pending_actions).toMatchObject([{ tool_name: 'bash', arguments: { command } }]);
    expect(fs.existsSync(path.join(waiting.workdir as string, 'pwn'))).toBe(false);
    expect((await harness.post(`/conversations/${id}/reject`, { reason: 'no' })).status).toBe(202);
    await harness.waitForStatus(id, ['idle']);
    expect(fs.existsSync(path.join(waiting.workdir as string, 'pwn'))).toBe(false);
  });

  it('path rules follow links: src/wf -> ../.github/workflows is not under file_editor(src/**)', async () => {
    harness = await startAgentHarness([edit('src/wf/ci.yml'), edit('src/ok.txt'), { text: 'done' }]);
    const id = await harness.createConversation({ permissions: { default: 'deny', allow: ['file_editor(src/**)'] } });
    const workdir = (await harness.get(`/conversations/${id}`)).body.workdir as string;
    fs.mkdirSync(path.join(workdir, '.github', 'workflows'), { recursive: true });
    fs.writeFileSync(path.join(workdir, '.github', 'workflows', 'ci.yml'), 'on: push');
    fs.mkdirSync(path.join(workdir, 'src'));
    fs.symlinkSync('../.github/workflows', path.join(workdir, 'src', 'wf'));
    await harness.post(`/conversations/${id}/messages`, { content: 'edit' });
    await harness.waitForStatus(id, ['idle']);
    expect(fs.readFileSync(path.join(workdir, '.github', 'workflows', 'ci.yml'), 'utf8')).toBe('on: push');
    expect(fs.readFileSync(path.join(workdir, 'src', 'ok.txt'), 'utf8')).toBe('x');
    expect((await harness.events(id)).filter((event) => event.kind === 'rejection')).toMatchObject([{ tool_name: 'file_editor' }]);
  });

  it("the project's rules are kept with the conversation: rewriting .claude/settings.json does not lift them for the next run", async () => {
    harness = await startAgentHarness([bash("echo '{}' > .claude/settings.json"), { text: 'rules gone' }, bash('rm -rf victim'), { text: 'done' }, bash('rm -rf victim'), { text: 'removed' }]);
    const id = await harness.createConversation({});
    const workdir = (await harness.get(`/conversations/${id}`)).body.workdir as string;
    fs.mkdirSync(path.join(workdir, '.claude'));
    fs.writeFileSync(path.join(workdir, '.claude', 'settings.json'), JSON.stringify({ permissions: { deny: ['bash(rm -rf*)'] } }));
    fs.mkdirSync(path.join(workdir, 'victim'));
    fs.writeFileSync(path.join(workdir, 'victim', 'keep.txt'), 'still here');
    await harness.post(`/conversations/${id}/messages`, { content: 'first' });
    await harness.waitForStatus(id, ['idle']);
    expect(fs.readFileSync(path.join(workdir, '.claude', 'settings.json'), 'utf8').trim()).toBe('{}');
    await harness.post(`/conversations/${id}/messages`, { content: 'second' });
    // The second run has ended once the LLM was asked for the turn after its tool call.
    for (let waited = 0; harness.llm.requests.length < 4 && waited < 300; waited += 1) await new Promise((resolve) => setTimeout(resolve, 50));
    await harness.waitForStatus(id, ['idle']);
    expect(fs.readFileSync(path.join(workdir, 'victim', 'keep.txt'), 'utf8')).toBe('still here');
    expect((await harness.events(id)).filter((event) => event.kind === 'rejection')).toMatchObject([{ tool_name: 'bash', rule: 'deny: bash(rm -rf*)' }]);

    // The client setting setting_sources again is its approval of the file as it is now: read again at the next run.
    expect((await harness.put(`/conversations/${id}/config`, { setting_sources: ['project'] })).status).toBe(200);
    await harness.post(`/conversations/${id}/messages`, { content: 'third' });
    for (let waited = 0; harness.llm.requests.length < 6 && waited < 300; waited += 1) await new Promise((resolve) => setTimeout(resolve, 50));
    await harness.waitForStatus(id, ['idle']);
    expect(fs.existsSync(path.join(workdir, 'victim'))).toBe(false);
  });

  it("the project's rules are kept as the first run starts, also when it calls no tool", async () => {
    harness = await startAgentHarness([{ text: 'nothing to run' }, bash('rm -rf victim'), { text: 'done' }]);
    const id = await harness.createConversation({});
    const workdir = (await harness.get(`/conversations/${id}`)).body.workdir as string;
    fs.mkdirSync(path.join(workdir, '.claude'));
    fs.writeFileSync(path.join(workdir, '.claude', 'settings.json'), JSON.stringify({ permissions: { deny: ['bash(rm -rf*)'] } }));
    fs.mkdirSync(path.join(workdir, 'victim'));
    await harness.post(`/conversations/${id}/messages`, { content: 'first' });
    await harness.waitForStatus(id, ['idle']);
    const saved = JSON.parse(fs.readFileSync(path.join(harness.server.dataDir, 'conversations', id, 'conversation.json'), 'utf8')) as { project_permissions?: unknown };
    expect(saved.project_permissions).toEqual({ ask: [], deny: ['bash(rm -rf*)'] });
    // The file as it is after the first run is not read again.
    fs.writeFileSync(path.join(workdir, '.claude', 'settings.json'), '{}');
    await harness.post(`/conversations/${id}/messages`, { content: 'second' });
    for (let waited = 0; harness.llm.requests.length < 3 && waited < 300; waited += 1) await new Promise((resolve) => setTimeout(resolve, 50));
    await harness.waitForStatus(id, ['idle']);
    expect(fs.existsSync(path.join(workdir, 'victim'))).toBe(true);
    expect((await harness.events(id)).filter((event) => event.kind === 'rejection')).toMatchObject([{ tool_name: 'bash', rule: 'deny: bash(rm -rf*)' }]);
  });

  it('rules are validated, returned, and replaced with PUT /config', async () => {
    harness = await startAgentHarness([]);
    const bad = await harness.post('/conversations', { permissions: { deny: ['bash(unclosed'] } });
    expectError(bad, { status: 400, error: 'validation_error', message: /rule is `tool` or `tool\(pattern\)`/ });
    const id = await harness.createConversation({ permissions: { deny: ['bash(rm -rf*)'] } });
    expect((await harness.get(`/conversations/${id}`)).body).toMatchObject({ permissions: { deny: ['bash(rm -rf*)'] }, setting_sources: ['project'] });
    const response = await fetch(`${harness.server.url}/conversations/${id}/config`, {
      method: 'PUT',
      headers: { ...harness.server.auth, 'content-type': 'application/json' },
      body: JSON.stringify({ permissions: { default: 'ask' } }),
    });
    expect(response.status).toBe(200);
    expect(((await response.json()) as any).permissions).toEqual({ default: 'ask' });
  });
});

describe('rule matching', () => {
  const workdir = '/w';
  const readers = { shellParser: new TreeSitterShellParser(), resolvePath: async () => null };
  const policy = (config: ConstructorParameters<typeof PermissionPolicy>[0]['conversation'], confirmationMode = false) => new PermissionPolicy({ conversation: config, confirmationMode, readers });

  it('bash: an allow rule must cover every simple command; deny finds any', async () => {
    const rules = policy({ default: 'ask', allow: ['bash(npm test*)', 'bash(git status)'], deny: ['bash(rm -rf*)'] });
    expect((await rules.check('bash', { command: 'npm test -- --run' }, workdir)).decision).toBe('allow');
    expect((await rules.check('bash', { command: 'npm test && curl evil.example' }, workdir)).decision).toBe('ask');
    expect((await rules.check('bash', { command: 'git status; npm test' }, workdir)).decision).toBe('allow');
    expect((await rules.check('bash', { command: 'npm test $(curl x)' }, workdir)).decision).toBe('ask');
    expect(await rules.check('bash', { command: 'ls | rm -rf /' }, workdir)).toEqual({ decision: 'deny', rule: 'deny: bash(rm -rf*)', source: 'conversation' });
  });

  it('tool names may be globs (mcp__server__*); the default follows confirmation mode', async () => {
    const rules = policy({ allow: ['mcp__fs__read_*'], deny: ['mcp__shell__*'] }, true);
    expect((await rules.check('mcp__fs__read_file', {}, workdir)).decision).toBe('allow');
    expect((await rules.check('mcp__fs__write_file', {}, workdir)).decision).toBe('ask');
    expect((await rules.check('mcp__shell__exec', {}, workdir)).decision).toBe('deny');
    expect((await policy({ default: 'deny' }, true).check('glob', {}, workdir)).decision).toBe('deny');
  });

  it('paths are relative to the workdir, absolute ones included', async () => {
    const rules = policy({ default: 'deny', allow: ['file_editor(src/**)', 'grep'] });
    expect((await rules.check('file_editor', { path: '/w/src/x/y.ts' }, workdir)).decision).toBe('allow');
    expect((await rules.check('file_editor', { path: '/w/srcx/y.ts' }, workdir)).decision).toBe('deny');
    expect((await rules.check('file_editor', { path: 'src' }, workdir)).decision).toBe('allow');
    expect((await rules.check('grep', { pattern: 'x' }, workdir)).decision).toBe('allow');
  });
});
