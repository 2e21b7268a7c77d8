import { createHmac } from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { startAgentHarness, type AgentHarness } from '../support/agent-harness.js';

let harness: AgentHarness | undefined;
let receiver: http.Server | undefined;
afterEach(async () => {
  await harness?.close();
  harness = undefined;
  if (receiver) await new Promise((resolve) => receiver!.close(resolve));
  receiver = undefined;
});

const bash = (command: string) => ({ toolCalls: [{ name: 'bash', arguments: { command } }] });
const edit = (file: string) => ({ toolCalls: [{ name: 'file_editor', arguments: { command: 'create', path: file, file_text: 'x' } }] });
const lastMessages = () => (harness!.llm.requests.at(-1)!.body as any).messages as any[];

/** Creates a conversation (no run yet), writes hook scripts into its workdir, then sends the message. */
async function start(body: Record<string, unknown>, scripts: Record<string, string>, message = 'go'): Promise<{ id: string; workdir: string }> {
  const id = await harness!.createConversation(body);
  const workdir = (await harness!.get(`/conversations/${id}`)).body.workdir as string;
  fs.mkdirSync(path.join(workdir, '.hooks'));
  for (const [name, text] of Object.entries(scripts)) fs.writeFileSync(path.join(workdir, '.hooks', name), text);
  expect((await harness!.post(`/conversations/${id}/messages`, { content: message })).status).toBe(202);
  return { id, workdir };
}

const hookEvents = async (id: string) => (await harness!.events(id)).filter((event) => event.kind === 'hook');

describe('command hooks (inside the sandbox, event JSON on stdin)', () => {
  it('PreToolUse exit 2 blocks edits outside src/ with stderr as the reason the LLM sees', async () => {
    harness = await startAgentHarness([edit('src/ok.txt'), edit('notes.txt'), { text: 'done' }]);
    const guard = 'input=$(cat)\ncase "$input" in *\'"path":"src/\'*) exit 0 ;; esac\necho "edits outside src/ are not allowed" >&2\nexit 2\n';
    const { id, workdir } = await start({ hooks: { PreToolUse: [{ matcher: 'file_editor', hooks: [{ type: 'command', command: 'bash "$CLAUDE_PROJECT_DIR/.hooks/guard.sh"' }] }] } }, { 'guard.sh': guard });
    await harness.waitForStatus(id, ['idle']);
    expect(fs.existsSync(path.join(workdir, 'src', 'ok.txt'))).toBe(true);
    expect(fs.existsSync(path.join(workdir, 'notes.txt'))).toBe(false);
    const events = await harness.events(id);
    expect(events.find((event) => event.kind === 'rejection')).toMatchObject({ source: 'system', hook_point: 'PreToolUse', tool_name: 'file_editor' });
    const hooks = events.filter((event) => event.kind === 'hook');
    expect(hooks.map((event) => [event.hook_point, event.matcher, event.decision])).toEqual([
      ['PreToolUse', 'file_editor', 'allow'],
      ['PreToolUse', 'file_editor', 'block'],
    ]);
    expect(hooks[1]).toMatchObject({ reason: 'edits outside src/ are not allowed', hook: 'bash "$CLAUDE_PROJECT_DIR/.hooks/guard.sh"' });
    expect(typeof hooks[1].duration_ms).toBe('number');
    const tool = lastMessages().filter((message) => message.role === 'tool');
    expect(tool[1].content).toBe('Blocked by a PreToolUse hook: edits outside src/ are not allowed. It was not executed.');
  });

  it("the README's hook (a one-line grep) blocks edits outside src/", async () => {
    harness = await startAgentHarness([edit('src/ok.txt'), edit('top.txt'), { text: 'done' }]);
    const command = 'grep -q "\\"path\\":\\"src/" || { echo "edit files under src/ only" >&2; exit 2; }';
    const { id, workdir } = await start({ hooks: { PreToolUse: [{ matcher: 'file_editor', hooks: [{ type: 'command', command }] }] } }, {});
    await harness.waitForStatus(id, ['idle']);
    expect(fs.existsSync(path.join(workdir, 'src', 'ok.txt'))).toBe(true);
    expect(fs.existsSync(path.join(workdir, 'top.txt'))).toBe(false);
    expect((await hookEvents(id)).map((event) => [event.decision, event.reason])).toEqual([['allow', null], ['block', 'edit files under src/ only']]);
  });

  it('PreToolUse updatedInput rewrites the call; the action records both argument sets', async () => {
    harness = await startAgentHarness([bash('echo original'), { text: 'done' }]);
    const rewrite = 'cat >/dev/null\necho \'{"hookSpecificOutput":{"hookEventName":"PreToolUse","updatedInput":{"command":"echo rewritten"}}}\'\n';
    const { id } = await start({ hooks: { PreToolUse: [{ matcher: 'bash', hooks: [{ type: 'command', command: 'bash .hooks/rewrite.sh' }] }] } }, { 'rewrite.sh': rewrite });
    await harness.waitForStatus(id, ['idle']);
    const events = await harness.events(id);
    expect(events.find((event) => event.kind === 'action')).toMatchObject({ arguments: { command: 'echo rewritten' }, original_arguments: { command: 'echo original' } });
    expect(events.find((event) => event.kind === 'observation').content).toContain('rewritten');
    expect((await hookEvents(id))[0].decision).toBe('rewrite');
  });

  it('UserPromptSubmit and PostToolUse add context the model sees; other matchers do not run', async () => {
    harness = await startAgentHarness([{ toolCalls: [{ name: 'glob', arguments: { pattern: '*.none' } }] }, { text: 'done' }]);
    const { id } = await start(
      {
        hooks: {
          SessionStart: [{ hooks: [{ type: 'command', command: 'cat >/dev/null; echo "Session notes: use pnpm."' }] }],
          UserPromptSubmit: [{ hooks: [{ type: 'command', command: 'cat >/dev/null; echo "The codename is BLUEBIRD."' }] }],
          PostToolUse: [
            { matcher: 'glob|grep', hooks: [{ type: 'command', command: 'cat >/dev/null; echo \'{"additionalContext":"Remember to check docs/ too."}\'' }] },
            { matcher: 'bash', hooks: [{ type: 'command', command: 'exit 2' }] },
          ],
        },
      },
      {},
    );
    await harness.waitForStatus(id, ['idle']);
    const first = (harness.llm.requests[0]!.body as any).messages as any[];
    expect(first.filter((message) => message.role === 'user').map((message) => message.content)).toEqual(['go', 'Session notes: use pnpm.', 'The codename is BLUEBIRD.']);
    const tool = lastMessages().find((message) => message.role === 'tool');
    expect(tool.content).toContain('Remember to check docs/ too.');
    expect((await hookEvents(id)).map((event) => event.hook_point)).toEqual(['SessionStart', 'UserPromptSubmit', 'PostToolUse']);
  });

  it('a UserPromptSubmit exit 2 blocks the prompt: no LLM call', async () => {
    harness = await startAgentHarness([{ text: 'should not be asked' }]);
    const { id } = await start({ hooks: { UserPromptSubmit: [{ hooks: [{ type: 'command', command: 'grep -q password && { echo "no passwords in prompts" >&2; exit 2; }; exit 0' }] }] } }, {}, 'my password is hunter2');
    await harness.waitForStatus(id, ['idle']);
    expect(harness.llm.requests).toHaveLength(0);
    expect(await hookEvents(id)).toMatchObject([{ hook_point: 'UserPromptSubmit', decision: 'block', reason: 'no passwords in prompts' }]);
  });

  it('a hook that times out or crashes is an error event and the run goes on', async () => {
    harness = await startAgentHarness([bash('echo ran'), { text: 'done' }]);
    const { id } = await start(
      {
        hooks: {
          PreToolUse: [
            { hooks: [{ type: 'command', command: 'sleep 30', timeout_s: 0.5 }] },
            { hooks: [{ type: 'command', command: 'echo "something broke" >&2; exit 1' }] },
          ],
        },
      },
      {},
    );
    await harness.waitForStatus(id, ['idle'], 20_000);
    const hooks = await hookEvents(id);
    expect(hooks.map((event) => event.decision)).toEqual(['error', 'error']);
    expect(hooks.map((event) => event.reason).sort()).toEqual(['the hook exited with code 1: something broke', 'the hook timed out after 0.5 s']);
    expect((await harness.events(id)).find((event) => event.kind === 'observation').content).toContain('ran');
  });

  it('a Stop hook asks for one more turn, then lets the run end', async () => {
    harness = await startAgentHarness([{ text: 'all done' }, { text: 'tests pass now' }]);
    const stop = 'input=$(cat)\ncase "$input" in *\'"stop_hook_active":false\'*) echo \'{"decision":"block","reason":"run the tests first"}\' ;; esac\nexit 0\n';
    const { id } = await start({ hooks: { Stop: [{ hooks: [{ type: 'command', command: 'bash .hooks/stop.sh' }] }] } }, { 'stop.sh': stop });
    await harness.waitForStatus(id, ['idle']);
    expect(harness.llm.requests).toHaveLength(2);
    expect(lastMessages().at(-1)).toEqual({ role: 'user', content: 'A Stop hook asks you to continue: run the tests first' });
    expect((await hookEvents(id)).map((event) => event.decision)).toEqual(['block', 'allow']);
  });

  it('a Stop hook that always blocks cannot loop the run forever', async () => {
    harness = await startAgentHarness(Array.from({ length: 6 }, (_, n) => ({ text: `answer ${n}` })));
    const { id } = await start({ hooks: { Stop: [{ hooks: [{ type: 'command', command: 'cat >/dev/null; echo \'{"decision":"block","reason":"never done"}\'' }] }] } }, {});
    await harness.waitForStatus(id, ['idle']);
    expect(harness.llm.requests).toHaveLength(4);
  });
});

describe('command hooks the agent cannot switch off', () => {
  it("run without the workdir's startup files: an agent's .bashrc, .bash_profile, .profile and BASH_ENV do not turn a block into an allow", async () => {
    // The agent plants every file a bash could read at start, each ending the shell with success, and a
    // .bashrc that points BASH_ENV (and ENV) at one more, read by any bash the hook starts.
    const plant = [
      `printf 'exit 0\\n' > .bash_profile`,
      'cp .bash_profile .profile',
      'cp .bash_profile .bash_env',
      `printf 'export BASH_ENV="$HOME/.bash_env" ENV="$HOME/.bash_env"\\nexit 0\\n' > .bashrc`,
    ].join(' && ');
    harness = await startAgentHarness([bash(plant), bash('echo FORBIDDEN > pwned.txt'), { text: 'done' }]);
    const guard = 'grep -q FORBIDDEN && { echo "that command is not allowed" >&2; exit 2; }; exit 0';
    // A bash started by the hook, as a hook script is: it would read BASH_ENV if the hook's shell had set it.
    const nested = `bash -c 'grep -q FORBIDDEN && { echo "not allowed either" >&2; exit 2; }; exit 0'`;
    // What the hook's shell sees: its HOME and its open descriptors (listed by a child, so that the listing's own is not among them).
    const report = 'cat >/dev/null; echo "$HOME" > "$CLAUDE_PROJECT_DIR/hook-home.txt"; ls /proc/$$/fd > "$CLAUDE_PROJECT_DIR/hook-fds.txt"';
    const { id, workdir } = await start({ hooks: { PreToolUse: [{ matcher: 'bash', hooks: [{ type: 'command', command: guard }, { type: 'command', command: nested }] }], PostToolUse: [{ matcher: 'bash', hooks: [{ type: 'command', command: report }] }] } }, {});
    await harness.waitForStatus(id, ['idle']);

    for (const name of ['.bashrc', '.bash_profile', '.profile', '.bash_env']) expect(fs.existsSync(path.join(workdir, name)), name).toBe(true);
    expect(fs.existsSync(path.join(workdir, 'pwned.txt'))).toBe(false);
    const events = await harness.events(id);
    expect(events.find((event) => event.kind === 'rejection')).toMatchObject({ source: 'system', hook_point: 'PreToolUse', tool_name: 'bash' });
    const pre = events.filter((event) => event.kind === 'hook' && event.hook_point === 'PreToolUse');
    // The hooks of one call run side by side: in either order.
    const decisions = (decision: string) => pre.filter((event) => event.decision === decision).map((event) => event.hook).sort();
    expect(decisions('allow')).toEqual([guard, nested].sort());
    expect(decisions('block')).toEqual([guard, nested].sort());
    expect(pre.find((event) => event.hook === guard && event.decision === 'block')).toMatchObject({ reason: 'that command is not allowed' });
    const tool = lastMessages().filter((message) => message.role === 'tool');
    expect(tool[1].content).toBe('Blocked by a PreToolUse hook: that command is not allowed. It was not executed.');

    // HOME is the server's empty directory for hooks, outside the workdir; only stdin, stdout and stderr are open.
    const home = path.join(harness.server.dataDir, 'hook-home');
    expect(fs.readFileSync(path.join(workdir, 'hook-home.txt'), 'utf8').trim()).toBe(home);
    expect(fs.readdirSync(home)).toEqual([]);
    expect(fs.readFileSync(path.join(workdir, 'hook-fds.txt'), 'utf8').split('\n').filter(Boolean)).toEqual(['0', '1', '2']);
  });
});

describe('http hooks', () => {
  it('POSTs the event signed like webhooks and obeys the decision; a timeout blocks a PreToolUse call', async () => {
    const secret = 'hook-signing-secret';
    const received: { headers: http.IncomingHttpHeaders; body: any; valid: boolean }[] = [];
    receiver = http.createServer((request, response) => {
      let text = '';
      request.on('data', (chunk) => (text += chunk));
      request.on('end', () => {
        const expected = `v1,${createHmac('sha256', secret).update(`${request.headers['webhook-id']}.${request.headers['webhook-timestamp']}.${text}`).digest('base64')}`;
        const body = JSON.parse(text);
        received.push({ headers: request.headers, body, valid: request.headers['webhook-signature'] === expected });
        if (body.tool_input?.command === 'sleep-forever') return; // never answers: the hook times out
        response.setHeader('content-type', 'application/json');
        response.end(JSON.stringify(body.tool_input?.command?.includes('deploy') ? { decision: 'block', reason: 'deploys need a ticket' } : {}));
      });
    });
    await new Promise<void>((resolve) => receiver!.listen(0, '127.0.0.1', resolve));
    const url = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/hook`;
    harness = await startAgentHarness([bash('echo hi'), bash('./deploy.sh'), bash('sleep-forever'), { text: 'done' }], { env: { AGENTD_WEBHOOK_ALLOW_PRIVATE: 'true' } });
    const { id } = await start({ hooks: { PreToolUse: [{ matcher: 'bash', hooks: [{ type: 'http', url, secret, timeout_s: 1 }] }] } }, {});
    await harness.waitForStatus(id, ['idle'], 20_000);
    expect(received).toHaveLength(3);
    expect(received.every((request) => request.valid)).toBe(true);
    expect(received[0]!.body).toMatchObject({ hook_event_name: 'PreToolUse', tool_name: 'bash', tool_input: { command: 'echo hi' }, conversation_id: id, session_id: id });
    const events = await harness.events(id);
    const rejections = events.filter((event) => event.kind === 'rejection');
    expect(rejections.map((event) => event.reason)).toEqual([
      'Blocked by a PreToolUse hook: deploys need a ticket',
      'Blocked by a PreToolUse hook: the hook failed (the hook receiver failed: timed out after 1 s)',
    ]);
    expect(events.filter((event) => event.kind === 'hook').map((event) => event.decision)).toEqual(['allow', 'block', 'block']);
    // The secret is never returned.
    const conversation = (await harness.get(`/conversations/${id}`)).body;
    expect(conversation.hooks.PreToolUse[0].hooks[0].secret).toBe('********');
    expect(JSON.stringify(await harness.events(id))).not.toContain(secret);
  });
});
