import { existsSync, mkdirSync, mkdtempSync, readFileSync, realpathSync, rmSync } from 'node:fs';
import { execFileSync } from 'node:child_process';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { BashShellFactory } from '../../src/adapters/shell/bash-shell.js';
import { bashTool, createBashTool } from '../../src/core/tools/bash.js';
import { executeTool } from '../../src/core/agent/tool-executor.js';
import type { ShellSession } from '../../src/core/tools/shell-session.js';
import type { ToolContext } from '../../src/core/tools/tool.js';
import { NodeWorkdirFileSystem } from '../../src/adapters/workspace/node-workdir-file-system.js';

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
    workdirFs: new NodeWorkdirFileSystem(),
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
    expect(moved.data).toEqual({ exit_code: 0, cwd: join(workdir, 'src'), timed_out: false, still_running: false });
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
    expect(slow.content).toMatch(/Still running after \d+ s \(no new output for 0\.3 s\)/);
    expect(slow.data).toEqual({ exit_code: null, cwd: workdir, timed_out: true, still_running: true });
    const refused = await tool.execute({ command: 'echo next' }, context);
    expect(refused.isError).toBe(true);
    expect(refused.content).toContain('still running');
    const stopped = await tool.execute({ command: 'C-c', is_input: true }, context);
    expect(stopped.content).toContain('finished (after C-c) with exit code 130');
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
    expect(result.content).toContain(join(workdir, '.agentd', `bg-${pid}.log`));
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

  it('a poll that sees the command end says so, with its exit code and how long it ran', async () => {
    const started = await tool.execute({ command: 'sleep 0.8; echo done; exit 3' }, context);
    expect(started.data).toMatchObject({ still_running: true });
    const polled = await tool.execute({ command: '', is_input: true, timeout_s: 5 }, context);
    expect(polled.content).toContain('done');
    expect(polled.content).toMatch(/\[The command finished with exit code 3 after \d+ s\.\]/);
  });

  it('a foreground command that ignores SIGINT is killed by a second C-c, and the shell takes commands again', async () => {
    const stubborn = await tool.execute({ command: "bash -c 'trap \"\" INT; echo stubborn; sleep 30'" }, context);
    expect(stubborn.content).toContain('stubborn');
    const first = await tool.execute({ command: 'C-c', is_input: true, timeout_s: 1.5 }, context);
    expect(first.content).toContain('Send "C-c" again to kill it');
    const second = await tool.execute({ command: 'C-c', is_input: true, timeout_s: 5 }, context);
    expect(second.content).toMatch(/killed by a repeated C-c|were killed \(SIGKILL\)/);
    const next = await tool.execute({ command: 'echo free-again', timeout_s: 5 }, context);
    expect(next.content).toContain('free-again');
  });

  it('hands the executor its raw output, which keeps the whole of a cut one in .agentd/outputs/ (ignored by git)', async () => {
    execFileSync('git', ['init', '-q'], { cwd: workdir });
    const raw = await tool.execute({ command: 'seq 1 20000; (exit 3)' }, context);
    const whole = Array.from({ length: 20000 }, (_, i) => `${i + 1}\n`).join('');
    expect(raw.output?.text).toBe(whole);
    expect(raw.data?.full_output).toBeUndefined();
    const result = await executeTool({ tools: new Map([['bash', tool]]), name: 'bash', args: { ok: true, value: { command: 'seq 1 20000; (exit 3)' } }, context });
    const file = result.data?.full_output as string;
    expect(file.startsWith(join(workdir, '.agentd', 'outputs', 'bash-'))).toBe(true);
    expect(readFileSync(file, 'utf8')).toBe(whole);
    // The notes after the output are kept whole.
    expect(result.content).toMatch(/\n20000\n\[Exit code 3\]\n\[To read the cut part: /);
    const status = execFileSync('git', ['status', '--porcelain', '--untracked-files=all'], { cwd: workdir, encoding: 'utf8' });
    expect(status).not.toContain('.agentd');
  });

  it('an output past what the shell holds is still cut by line numbers, and its two ends are saved with what fell out', async () => {
    const small = await new BashShellFactory({ heldOutputChars: 2000 }).create({ conversationId: 'c1', workdir, env: { TMPDIR: join(workdir, '.tmp') } });
    try {
      const held = { ...context, shell: async () => small };
      const result = await executeTool({ tools: new Map([['bash', tool]]), name: 'bash', args: { ok: true, value: { command: 'seq 1 20000' } }, context: held });
      const whole = Array.from({ length: 20000 }, (_, i) => `${i + 1}\n`).join('');
      const [head, marker, tail] = result.content.split(/\n(\[lines [^\n]*\])\n/);
      const headLines = head!.split('\n');
      const tailLines = tail!.split('\n').filter((line) => /^\d+$/.test(line));
      expect(headLines).toEqual(Array.from({ length: headLines.length }, (_, i) => String(i + 1)));
      expect(tailLines.at(-1)).toBe('20000');
      expect(tailLines[0]).toBe(String(20000 - tailLines.length + 1));
      const file = result.data?.full_output as string;
      const relative = file.slice(workdir.length + 1);
      expect(marker).toBe(`[lines ${headLines.length + 1}-${(20000 - tailLines.length).toLocaleString('en-US')} of 20,000 cut; its first and last parts are in ${relative} (it was too long to keep whole)]`);
      const saved = readFileSync(file, 'utf8');
      expect(saved.startsWith(whole.slice(0, 1000))).toBe(true);
      expect(saved.endsWith(whole.slice(whole.length - 1000))).toBe(true);
      expect(saved).toContain(`[${(whole.length - 2000).toLocaleString('en-US')} characters (`);
    } finally {
      await small.close();
    }
  });

  it('a background job logs into .agentd/bg-<pid>.log, which git ignores', async () => {
    execFileSync('git', ['init', '-q'], { cwd: workdir });
    const result = await tool.execute({ command: '(echo from-job; sleep 30) &' }, context);
    const pid = result.data?.pid as number;
    const log = join(workdir, '.agentd', `bg-${pid}.log`);
    expect(result.content).toContain(log);
    for (let i = 0; i < 50 && !(existsSync(log) && readFileSync(log, 'utf8').includes('from-job')); i++) await new Promise((resolve) => setTimeout(resolve, 50));
    expect(readFileSync(log, 'utf8')).toContain('from-job');
    const status = execFileSync('git', ['status', '--porcelain', '--untracked-files=all'], { cwd: workdir, encoding: 'utf8' });
    expect(status).not.toContain('.agentd');
  });

  it('a third C-c ends a shell that loops with SIGINT ignored; the next command gets a fresh shell', async () => {
    const looping = await tool.execute({ command: "trap '' INT; while :; do sleep 0.05; done" }, context);
    expect(looping.data).toMatchObject({ still_running: true });
    await tool.execute({ command: 'C-c', is_input: true, timeout_s: 0.5 }, context);
    const second = await tool.execute({ command: 'C-c', is_input: true, timeout_s: 0.5 }, context);
    expect(second.data).toMatchObject({ still_running: true });
    const third = await tool.execute({ command: 'C-c', is_input: true, timeout_s: 5 }, context);
    expect(third.content).toContain('The shell exited');
    const next = await tool.execute({ command: 'echo fresh' }, context);
    expect(next.content).toMatch(/restarted in the workdir[\s\S]*fresh/);
  });
});
