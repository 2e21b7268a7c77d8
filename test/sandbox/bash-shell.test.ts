import { existsSync, mkdirSync, mkdtempSync, readFileSync, realpathSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { BashShellFactory } from '../../src/adapters/shell/bash-shell.js';
import { buildCleanEnv, HostProcessLauncher, type ProcessLauncher } from '../../src/adapters/process/process-launcher.js';
import { NO_LIMITS } from '../../src/adapters/sandbox/resource-limits.js';
import { descendantsOf, listProcesses, signalQuietly } from '../../src/adapters/process/process-tree.js';
import type { ShellSession } from '../../src/core/tools/shell-session.js';
import { hostPidOf, sandboxed, testLauncher } from '../support/test-launcher.js';

const quick = { timeoutMs: 5000, idleTimeoutMs: 3000 };
let workdir: string;
let shell: ShellSession;

async function openShell(options: { heldOutputChars?: number; env?: Record<string, string> } = {}): Promise<ShellSession> {
  const launcher = testLauncher();
  const factory = new BashShellFactory({ ...(options.heldOutputChars ? { heldOutputChars: options.heldOutputChars } : {}), ...(launcher ? { launcher } : {}) });
  // TMPDIR inside the workdir: background logs go away with it.
  return factory.create({ conversationId: 'c1', workdir, env: { TMPDIR: join(workdir, '.tmp'), ...options.env } });
}

/** Alive and not a zombie waiting to be reaped. */
function isRunning(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2)[0] !== 'Z';
  } catch {
    return false;
  }
}

async function waitUntil(check: () => boolean, ms = 2000): Promise<boolean> {
  const deadline = Date.now() + ms;
  while (Date.now() < deadline) {
    if (check()) return true;
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
  return check();
}

beforeEach(async () => {
  workdir = realpathSync(mkdtempSync(join(tmpdir(), 'agentd-bash-')));
  mkdirSync(join(workdir, '.tmp'));
  shell = await openShell();
});

afterEach(async () => {
  await shell.close();
  rmSync(workdir, { recursive: true, force: true });
});

describe('BashShellSession', () => {
  it('close() leaves no timer behind once the shell exited (a timer left there kept a finished process alive for 2 s)', async () => {
    await shell.run('true', quick);
    const timers = () => process.getActiveResourcesInfo().filter((name) => name === 'Timeout').length;
    const before = timers();
    await shell.close();
    expect(timers()).toBeLessThanOrEqual(before);
  });

  it('keeps cwd, variables, functions and aliases across commands', async () => {
    mkdirSync(join(workdir, 'sub'));
    const first = await shell.run("cd sub && export FOO=bar && greet() { echo \"hi $1\"; }\nalias say='echo said'", quick);
    expect(first).toMatchObject({ exitCode: 0, cwd: join(workdir, 'sub'), timedOut: false, stillRunning: false });
    const second = await shell.run('pwd; echo $FOO; greet you; say it', quick);
    expect(second.output).toBe(`${join(workdir, 'sub')}\nbar\nhi you\nsaid it\n`);
    expect(second.cwd).toBe(join(workdir, 'sub'));
  });

  it('reports exit codes, merges stderr and keeps output without a trailing newline', async () => {
    expect((await shell.run('false', quick)).exitCode).toBe(1);
    expect((await shell.run('(exit 42)', quick)).exitCode).toBe(42);
    expect((await shell.run('echo out; echo err >&2; printf tail', quick)).output).toBe('out\nerr\ntail');
    expect((await shell.run('no-such-command-xyz', quick)).exitCode).toBe(127);
    expect((await shell.run('echo "unclosed', quick)).exitCode).not.toBe(0);
    expect((await shell.run('echo still fine', quick)).output).toBe('still fine\n');
  });

  it('runs multi-line commands, heredocs and quotes literally', async () => {
    const script = [
      "cat <<'EOF' > note.txt",
      'line with $HOME and `backticks`',
      "it's \"quoted\" \\ backslash",
      'EOF',
      'cat note.txt',
      "echo 'single \"double\"' \"it's\" $'tab\\tx' \"hello!\"",
    ].join('\n');
    const result = await shell.run(script, quick);
    expect(result.output).toBe('line with $HOME and `backticks`\nit\'s "quoted" \\ backslash\nsingle "double" it\'s tab\tx hello!\n');
    expect(result.exitCode).toBe(0);
  });

  it('returns at the hard timeout, then polling collects the rest and the exit code', async () => {
    const first = await shell.run('echo start; sleep 0.8; echo end; (exit 7)', { timeoutMs: 300, idleTimeoutMs: 2000 });
    expect(first).toMatchObject({ output: 'start\n', exitCode: null, timedOut: true, stillRunning: true });
    const busy = await shell.run('echo other', quick);
    expect(busy.busy).toBe(true);
    expect(busy.output).toContain('still running');
    const rest = await shell.run('', { ...quick, isInput: true });
    expect(rest).toMatchObject({ output: 'end\n', exitCode: 7, timedOut: false, stillRunning: false });
  });

  it('returns on the soft timeout, C-c interrupts the whole command line and the shell stays usable', async () => {
    const started = Date.now();
    const first = await shell.run('for i in 1 2 3; do sleep 5; done; echo after-loop', { timeoutMs: 5000, idleTimeoutMs: 300 });
    expect(first).toMatchObject({ exitCode: null, timedOut: true, stillRunning: true });
    expect(Date.now() - started).toBeLessThan(1500);
    const stopped = await shell.run('^C', { ...quick, isInput: true });
    expect(stopped).toMatchObject({ exitCode: 130, stillRunning: false });
    expect(stopped.output).not.toContain('after-loop');
    expect((await shell.run('echo ok', quick)).output).toBe('ok\n');
  });

  it('sends input to a command reading stdin; C-c recovers from cat; C-d ends it', async () => {
    const cat = await shell.run('cat', { timeoutMs: 5000, idleTimeoutMs: 200 });
    expect(cat.stillRunning).toBe(true);
    const echoed = await shell.run('hello', { timeoutMs: 5000, idleTimeoutMs: 300, isInput: true });
    expect(echoed).toMatchObject({ output: 'hello\n', stillRunning: true });
    expect((await shell.run('C-c', { ...quick, isInput: true })).exitCode).toBe(130);
    expect((await shell.run('echo next', quick)).output).toBe('next\n');

    await shell.run('read -r name; echo "got $name"', { timeoutMs: 5000, idleTimeoutMs: 200 });
    expect((await shell.run('Ada', { ...quick, isInput: true })).output).toBe('got Ada\n');

    await shell.run('wc -l', { timeoutMs: 5000, idleTimeoutMs: 200 });
    await shell.run('a\nb', { timeoutMs: 5000, idleTimeoutMs: 200, isInput: true });
    const ended = await shell.run('C-d', { ...quick, isInput: true });
    expect(ended).toMatchObject({ output: '2\n', exitCode: 0 });
    expect((await shell.run('echo after-eof', quick)).output).toBe('after-eof\n');
  });

  it('drops input that the command never read instead of running it', async () => {
    await shell.run('sleep 0.4', { timeoutMs: 5000, idleTimeoutMs: 100 });
    await shell.run('touch should-not-exist', { ...quick, isInput: true });
    const next = await shell.run('read -t 0.2 line; echo "read=$?"; ls', quick);
    expect(next.output).toContain('read=1');
    expect(existsSync(join(workdir, 'should-not-exist'))).toBe(false);
  });

  it('starts a background job at once with a live pid, keeps later results clean, close() kills it', async () => {
    const started = Date.now();
    const background = await shell.run('sleep 30 &', quick);
    expect(Date.now() - started).toBeLessThan(1000);
    expect(background).toMatchObject({ exitCode: 0, stillRunning: false });
    expect(background.pid).toBeGreaterThan(0);
    expect(background.logFile).toBe(join(workdir, '.agentd', `bg-${background.pid}.log`));
    const pid = hostPidOf(shell.pid as number, background.pid as number);
    expect(isRunning(pid)).toBe(true);

    const chatty = await shell.run('(sleep 0.2; echo late-output) &', quick);
    expect((await shell.run('echo after', quick)).output).toBe('after\n');
    expect((await shell.run('sleep 0.4; echo done', quick)).output).toBe('done\n');
    expect(readFileSync(chatty.logFile as string, 'utf8')).toContain('late-output');

    await shell.run('sleep 5', { timeoutMs: 5000, idleTimeoutMs: 200 });
    await shell.run('C-c', { ...quick, isInput: true });
    expect(isRunning(pid)).toBe(true);

    await shell.close();
    expect(await waitUntil(() => !isRunning(pid))).toBe(true);
  });

  it('holds only the start and end of a long output, counting what fell out between them', async () => {
    await shell.close();
    shell = await openShell({ heldOutputChars: 1000 });
    const whole = Array.from({ length: 20_000 }, (_, i) => `${i + 1}\n`).join('');
    const result = await shell.run('seq 1 20000', quick);
    expect(result.output).toBe(whole.slice(0, 500) + whole.slice(whole.length - 500));
    const dropped = whole.slice(500, whole.length - 500);
    expect(result.omitted).toEqual({ at: 500, chars: dropped.length, newlines: dropped.split('\n').length - 1, column: whole.length - 500 - (whole.lastIndexOf('\n', whole.length - 501) + 1) });
    expect((await shell.run('echo next', quick)).omitted).toBeUndefined();
  });

  it('restarts a shell that exited or was killed, in the workdir, with restarted set', async () => {
    await shell.run('mkdir deep && cd deep', quick);
    const exited = await shell.run('echo bye; exit 3', quick);
    expect(exited.exitCode).toBe(3);
    expect(exited.output).toContain('bye');
    expect(shell.alive).toBe(false);
    const again = await shell.run('pwd', quick);
    expect(again).toMatchObject({ output: `${workdir}\n`, restarted: true, exitCode: 0 });

    // Killed from outside: in a sandbox all of it (its monitor alone takes the rest along a few ms later).
    for (const pid of [...(sandboxed() ? descendantsOf(shell.pid as number, listProcesses()) : []), shell.pid as number]) signalQuietly(pid, 'SIGKILL');
    expect(await waitUntil(() => !shell.alive)).toBe(true);
    const revived = await shell.run('echo revived', quick);
    expect(revived).toMatchObject({ output: 'revived\n', restarted: true });
    expect((await shell.run('echo steady', quick)).restarted).toBeUndefined();
  });

  it('an abort signal interrupts promptly and leaves no process behind, even one ignoring SIGINT', async () => {
    for (const command of ["sh -c 'echo $$; exec sleep 60'", "bash -c 'trap \"\" INT; echo $$; exec sleep 60'"]) {
      const controller = new AbortController();
      setTimeout(() => controller.abort(), 300);
      const started = Date.now();
      const result = await shell.run(command, { timeoutMs: 10_000, idleTimeoutMs: 10_000, signal: controller.signal });
      expect(Date.now() - started).toBeLessThan(2500);
      const pid = Number(result.output.trim().split('\n')[0]);
      expect(pid).toBeGreaterThan(0);
      // In a sandbox the pid is one of its pid namespace: ask the shell.
      if (sandboxed()) expect((await shell.run(`kill -0 ${pid} 2>/dev/null && echo alive || echo gone`, quick)).output).toBe('gone\n');
      else expect(await waitUntil(() => !isRunning(pid), 1000)).toBe(true);
      expect((await shell.run('echo usable', quick)).output).toBe('usable\n');
    }
  });

  it('setEnv exports (safely quoted) and unsets variables for following commands', async () => {
    const tricky = `it's "quoted" $HOME \`x\` \\ new\nline`;
    await shell.setEnv({ SECRET_TOKEN: tricky, OTHER: 'x' });
    expect((await shell.run('printf %s "$SECRET_TOKEN"', quick)).output).toBe(tricky);
    await shell.setEnv({}, ['SECRET_TOKEN']);
    expect((await shell.run('echo "[${SECRET_TOKEN-unset}] $OTHER"', quick)).output).toBe('[unset] x\n');
    await expect(shell.setEnv({ 'BAD NAME': 'x' })).rejects.toThrow(/invalid/);
  });

  it('starts from a clean environment that leaks no server variables', async () => {
    process.env.AGENTD_TEST_LEAK = 'leak';
    process.env.OPENAI_API_KEY = 'sk-should-not-leak';
    try {
      await shell.close();
      shell = await openShell({ env: { CONVERSATION_SECRET: 's3' } });
      const env = (await shell.run('env', quick)).output;
      expect(env).not.toContain('AGENTD_TEST_LEAK');
      expect(env).not.toContain('OPENAI_API_KEY');
      expect(env).not.toContain('sk-should-not-leak');
      expect(env).toContain(`HOME=${workdir}`);
      expect(env).toContain('TERM=dumb');
      expect(env).toContain('CONVERSATION_SECRET=s3');
      const passed = buildCleanEnv({ workdir, passEnv: ['AGENTD_TEST_LEAK'], hostEnv: process.env });
      expect(passed.AGENTD_TEST_LEAK).toBe('leak');
      expect(passed.OPENAI_API_KEY).toBeUndefined();
    } finally {
      delete process.env.AGENTD_TEST_LEAK;
      delete process.env.OPENAI_API_KEY;
    }
  });

  it('close() leaves no process of the shell alive', async () => {
    await shell.run('sleep 30 &', quick);
    await shell.run("bash -c 'sleep 30 & sleep 30'", { timeoutMs: 5000, idleTimeoutMs: 200 });
    const bashPid = shell.pid as number;
    const tree = descendantsOf(bashPid, listProcesses());
    expect(tree.length).toBeGreaterThanOrEqual(4);
    await shell.close();
    expect(shell.alive).toBe(false);
    expect(await waitUntil(() => [bashPid, ...tree].every((pid) => !isRunning(pid)))).toBe(true);
    expect(listProcesses().filter((entry) => entry.pgid === bashPid && isRunning(entry.pid))).toEqual([]);
  });

  it('close() still kills a background job after the shell that started it died', async () => {
    const job = await shell.run('sleep 30 &', quick);
    const pid = hostPidOf(shell.pid as number, job.pid as number);
    await shell.run('exit', quick);
    expect(shell.alive).toBe(false);
    // In a sandbox the job dies with the shell (its pid namespace goes); on the host it survives until close().
    if (sandboxed()) expect(await waitUntil(() => !isRunning(pid))).toBe(true);
    else expect(isRunning(pid)).toBe(true);
    await shell.close();
    expect(await waitUntil(() => !isRunning(pid))).toBe(true);
  });

  it('killAllForExit() kills every open host shell of the factory (one restarted after a close too), running commands and background jobs included; answered sandboxes are left to die with the server', async () => {
    const launcher = testLauncher();
    const factory = new BashShellFactory(launcher ? { launcher } : {});
    const open = (id: string) => factory.create({ conversationId: id, workdir, env: { TMPDIR: join(workdir, '.tmp') } });
    const [idle, busy, closed] = await Promise.all([open('idle'), open('busy'), open('closed')]);
    const job = await idle.run('sleep 30 &', quick);
    const jobPid = hostPidOf(idle.pid as number, job.pid as number);
    expect((await busy.run('sleep 30', { timeoutMs: 5000, idleTimeoutMs: 200 })).stillRunning).toBe(true);
    const processes = [idle.pid as number, busy.pid as number, jobPid, ...descendantsOf(busy.pid as number, listProcesses())];
    await closed.close();
    // The same shell objects run again after a close (a shell restarts on its next command): the factory counts it open again.
    const reopened = await factory.create({ conversationId: 'reopened', workdir, env: {} });
    await reopened.close();
    await reopened.run('true', quick);
    processes.push(reopened.pid as number);
    expect(processes.every(isRunning)).toBe(true);
    factory.killAllForExit();
    if (sandboxed()) {
      // Sandboxes whose shell answered are left to die with the server's process (bwrap's
      // --die-with-parent; test/shutdown-shells checks that nothing is left): not signalled here.
      expect(processes.every(isRunning)).toBe(true);
      for (const session of [idle, busy, reopened]) await session.close();
      return;
    }
    expect(await waitUntil(() => processes.every((pid) => !isRunning(pid)))).toBe(true);
    await waitUntil(() => !idle.alive && !busy.alive && !reopened.alive);
    expect([idle.alive, busy.alive, reopened.alive]).toEqual([false, false, false]);
  });

  it("has the launcher's beforeStart done before each spawn (a restart's too), ahead of the first command or not", async () => {
    const events: string[] = [];
    const host = new HostProcessLauncher({ limits: NO_LIMITS });
    const launcher: ProcessLauncher = {
      mode: 'none',
      limits: host.limits,
      enforcement: host.enforcement,
      beforeStart: async (sandbox) => {
        events.push(`beforeStart ${sandbox.workdir === workdir}`);
        await new Promise((resolve) => setTimeout(resolve, 50));
        events.push('beforeStart done');
      },
      prepare: (spec) => (events.push('prepare'), host.prepare(spec)),
    };
    for (const ahead of [false, true]) {
      events.length = 0;
      const shell = await new BashShellFactory({ launcher }).create({ conversationId: 'c1', workdir, env: {}, ahead });
      try {
        await shell.run('exit 3', quick);
        expect((await shell.run('echo again', quick)).output).toBe('again\n');
        expect(events).toEqual(['beforeStart true', 'beforeStart done', 'prepare', 'beforeStart true', 'beforeStart done', 'prepare']);
      } finally {
        await shell.close();
      }
    }
  });

  it("tells the sandbox's watchdog of a command only once it has run 20 ms: a short one never wakes it", async () => {
    // A launcher that asks for the control channel and logs what the server writes on it.
    const log = join(workdir, '.tmp', 'control.log');
    writeFileSync(log, '');
    const host = new HostProcessLauncher({ limits: NO_LIMITS });
    const launcher: ProcessLauncher = {
      mode: 'none',
      limits: host.limits,
      enforcement: host.enforcement,
      prepare: (spec) => {
        const prepared = host.prepare(spec);
        return { ...prepared, command: 'bash', args: ['-c', 'cat <&4 >>"$0" & exec 4<&- "$@"', log, prepared.command, ...prepared.args], controlFd: 4 };
      },
    };
    const watched = await new BashShellFactory({ launcher }).create({ conversationId: 'c1', workdir, env: {} });
    try {
      const written = () => readFileSync(log, 'utf8');
      // The start's init script may have run longer than 20 ms on a loaded machine: what it wrote
      // (copied to the log by cat, a moment later) is not counted.
      await new Promise((resolve) => setTimeout(resolve, 300));
      const before = written();
      // A `true` takes well under a millisecond; one that took 20 ms (a loaded machine) may have been told.
      let slow = 0;
      for (let i = 0; i < 10; i++) {
        const started = performance.now();
        await watched.run('true', quick);
        if (performance.now() - started >= 20) slow += 1;
      }
      await new Promise((resolve) => setTimeout(resolve, 100));
      const after = written();
      const told = [...after.slice(before.length)].filter((c) => c === 'r').length;
      expect(told).toBeLessThanOrEqual(slow);
      // (A slow `true` wrote its `ri` before this mark.)
      await watched.run('sleep 0.3', quick);
      expect(await waitUntil(() => written() === `${after}ri`)).toBe(true);
    } finally {
      await watched.close();
    }
  });
});
