import { mkdirSync, mkdtempSync, realpathSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { BashShellFactory } from '../src/adapters/bash-shell.js';
import { bashTool, createBashTool } from '../src/core/tools/bash.js';
import type { ShellSession } from '../src/core/tools/shell-session.js';
import type { ToolContext } from '../src/core/tools/tool.js';

let workdir: string;
let session: ShellSession | undefined;
let controller: AbortController;
let context: ToolContext;
const tool = createBashTool({ defaultTimeoutMs: 3000, idleTimeoutMs: 300 });

beforeEach(() => {
  workdir = realpathSync(mkdtempSync(join(tmpdir(), 'agentd-bash-tool-')));
  mkdirSync(join(workdir, '.tmp'));
  controller = new AbortController();
  context = {
    conversationId: 'c1',
    workdir,
    signal: controller.signal,
    state: new Map(),
    shell: async () => {
      session ??= await new BashShellFactory().create({ conversationId: 'c1', workdir, env: { TMPDIR: join(workdir, '.tmp') } });
      return session;
    },
  };
});

afterEach(async () => {
  await session?.close();
  session = undefined;
  rmSync(workdir, { recursive: true, force: true });
});

describe('bash tool', () => {
  it('exposes exactly command, timeout_s and is_input, described, with the description from bash.md', () => {
    const schema = z.toJSONSchema(bashTool.parameters) as { properties: Record<string, { description?: string }>; required: string[] };
    expect(Object.keys(schema.properties).sort()).toEqual(['command', 'is_input', 'timeout_s']);
    expect(schema.required).toEqual(['command']);
    for (const property of Object.values(schema.properties)) expect(property.description).toBeTruthy();
    expect(bashTool.name).toBe('bash');
    expect(bashTool.description).toContain('persistent bash shell');
    expect(bashTool.parameters.safeParse({ command: 'ls', timeout_s: 601 }).success).toBe(false);
  });

  it('runs commands in a persistent shell and reports exit code and cwd', async () => {
    mkdirSync(join(workdir, 'src'));
    const moved = await tool.execute({ command: 'cd src && export NAME=agentd' }, context);
    expect(moved.isError).toBe(false);
    expect(moved.data).toEqual({ exit_code: 0, cwd: join(workdir, 'src'), timed_out: false });
    const echoed = await tool.execute({ command: 'echo "$NAME in $(basename $PWD)"' }, context);
    expect(echoed.content).toBe('agentd in src');
    const failed = await tool.execute({ command: 'ls missing-file' }, context);
    expect(failed.content).toMatch(/No such file[\s\S]*\[Exit code 2\]/);
    expect(failed.data).toMatchObject({ exit_code: 2 });
    expect((await tool.execute({ command: 'true' }, context)).content).toBe('(no output)');
  });

  it('tells the model when a command keeps running, then polls and interrupts it with C-c', async () => {
    const slow = await tool.execute({ command: 'echo begin; sleep 5' }, context);
    expect(slow.content).toContain('begin');
    expect(slow.content).toContain('Still running (no new output for 0.3 s)');
    expect(slow.data).toEqual({ exit_code: null, cwd: workdir, timed_out: true });
    const refused = await tool.execute({ command: 'echo next' }, context);
    expect(refused.isError).toBe(true);
    expect(refused.content).toContain('still running');
    const stopped = await tool.execute({ command: 'C-c', is_input: true }, context);
    expect(stopped.content).toContain('[Exit code 130]');
    expect(stopped.data).toMatchObject({ exit_code: 130, timed_out: false });
  });

  it('with timeout_s waits through silence up to that limit', async () => {
    const result = await tool.execute({ command: 'sleep 0.6; echo finished', timeout_s: 3 }, context);
    expect(result.content).toBe('finished');
    const limited = await tool.execute({ command: 'sleep 3', timeout_s: 0.4 }, context);
    expect(limited.content).toContain('time limit of 0.4 s reached');
    await tool.execute({ command: 'C-c', is_input: true }, context);
  });

  it('returns a background job at once with its pid and log file', async () => {
    const started = Date.now();
    const result = await tool.execute({ command: 'sleep 30 &' }, context);
    expect(Date.now() - started).toBeLessThan(1000);
    const pid = result.data?.pid as number;
    expect(pid).toBeGreaterThan(0);
    expect(() => process.kill(pid, 0)).not.toThrow();
    expect(result.content).toContain(`pid ${pid}`);
    expect(result.content).toContain(join(workdir, '.tmp', `agentd-bg-${pid}.log`));
  });

  it('tells the model when the shell exited and was restarted', async () => {
    const exited = await tool.execute({ command: 'exit 4' }, context);
    expect(exited.content).toContain('[Exit code 4]');
    expect(exited.content).toContain('The shell exited');
    const next = await tool.execute({ command: 'echo again' }, context);
    expect(next.content).toMatch(/restarted in the workdir[\s\S]*again/);
  });

  it('honours the abort signal of the run', async () => {
    // The shell is up first, so the abort lands on the running command, not on the shell's start.
    await tool.execute({ command: 'true' }, context);
    setTimeout(() => controller.abort(), 200);
    const started = Date.now();
    const result = await tool.execute({ command: 'sleep 60' }, context);
    expect(Date.now() - started).toBeLessThan(2500);
    expect(result.content).toContain('Interrupted');
    const after = await tool.execute({ command: 'echo never' }, context);
    expect(after.isError).toBe(true);
  });

  it('refuses an empty command that is not input', async () => {
    const result = await tool.execute({ command: '  ' }, context);
    expect(result.isError).toBe(true);
    expect(session).toBeUndefined();
  });
});
