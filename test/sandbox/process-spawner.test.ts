import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import type { Readable, Writable } from 'node:stream';
import { afterEach, describe, expect, it } from 'vitest';
import { ProcessSpawner, type RunRequest, type SpawnedProcess, type SpawnRequest } from '../../src/adapters/process/process-spawner.js';
import { runHere } from '../../src/adapters/process/spawn-here.js';
import { readProcess } from '../../src/adapters/process/process-tree.js';
import { CLI, tempDir } from '../support/agentd.js';
import { openFilesWith } from '../support/open-files.js';
import { liveDescendants } from '../support/processes.js';

const spawners: ProcessSpawner[] = [];
const dirs: string[] = [];
afterEach(() => {
  for (const spawner of spawners.splice(0)) spawner.close();
  for (const dir of dirs.splice(0)) fs.rmSync(dir, { recursive: true, force: true });
});

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

async function until(what: string, check: () => boolean, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(20);
  }
}

/** Running, not a zombie. */
function running(pid: number): boolean {
  const entry = readProcess(pid);
  return entry !== undefined && !entry.zombie;
}

function request(command: string, args: string[], stdio: SpawnRequest['stdio'] = ['pipe', 'pipe', 'pipe'], detached = true): SpawnRequest {
  return { command, args, cwd: process.cwd(), env: { PATH: process.env.PATH ?? '/usr/bin:/bin' }, detached, stdio };
}

function exitOf(child: SpawnedProcess): Promise<{ code: number | null; signal: NodeJS.Signals | null }> {
  return new Promise((resolve) => child.once('exit', (code, signal) => resolve({ code, signal })));
}

/** A spawner that has started its process: the first spawn waits for it. */
async function readySpawner(idleMs?: number): Promise<ProcessSpawner> {
  const spawner = new ProcessSpawner(idleMs === undefined ? {} : { idleMs });
  spawners.push(spawner);
  const first = await spawner.spawn(request('sleep', ['0.1'], ['ignore', 'ignore', 'ignore']));
  expect(spawner.ready).toBe(true);
  expect(readProcess(first.pid!)?.ppid).toBe(spawner.pid);
  await exitOf(first);
  return spawner;
}

describe('ProcessSpawner', () => {
  it('hands every pipe over before reading it: output written at once, stdin and its end of file, a fourth pipe, the exit code', async () => {
    const spawner = await readySpawner();
    const child = await spawner.spawn(request('bash', ['--norc', '-c', 'echo early; echo diag >&2; read line; echo "got $line"; cat <&3; exit 7'], ['pipe', 'pipe', 'pipe', 'pipe']));
    expect(readProcess(child.pid!)?.ppid).toBe(spawner.pid);
    const exited = exitOf(child);
    // Written before anything here reads: it must still be in the pipe, not in the spawner.
    await sleep(300);
    const [stdin, stdout, stderr, fd3] = child.stdio as [Writable, Readable, Readable, Writable];
    let out = '';
    let err = '';
    stdout.setEncoding('utf8').on('data', (text: string) => (out += text));
    stderr.setEncoding('utf8').on('data', (text: string) => (err += text));
    const ended = new Promise((resolve) => stdout.once('end', resolve));
    stdin.end('hello\n');
    fd3.end('through fd 3\n');
    expect(await exited).toEqual({ code: 7, signal: null });
    await ended;
    expect(out).toBe('early\ngot hello\nthrough fd 3\n');
    expect(err).toBe('diag\n');
  });

  it('keeps no descriptor of what it spawned: a pipe the server closes (without a shutdown) is an end of file for the process', async () => {
    const spawner = await readySpawner();
    const descriptors = () => fs.readdirSync(`/proc/${spawner.pid}/fd`).length;
    const before = descriptors();
    const children = await Promise.all([0, 1, 2].map(() => spawner.spawn(request('cat', [], ['pipe', 'pipe', 'pipe', 'pipe', 'pipe']))));
    await until('the spawner to close its copies', () => descriptors() === before);
    // destroy() closes the server's descriptor without a shutdown(): cat sees an end of file only
    // if no other process holds that end (the sandbox watchdog's control pipe relies on this).
    const exits = children.map(exitOf);
    for (const child of children) (child.stdio[0] as Writable).destroy();
    expect(await Promise.all(exits)).toEqual(children.map(() => ({ code: 0, signal: null })));
  });

  it('lets go of the pipes of a process that exited, as child_process does: a shell killed with its stdin open leaves no descriptor here', async () => {
    const spawner = await readySpawner();
    const sockets = () => openFilesWith('socket:').length;
    const before = sockets();
    // As the agent's shells: stdin and a fourth pipe written to, never read; killed, not ended.
    const children = await Promise.all(Array.from({ length: 10 }, () => spawner.spawn(request('sleep', ['30'], ['pipe', 'pipe', 'pipe', 'pipe']))));
    expect(sockets()).toBe(before + 40);
    const exits = children.map(exitOf);
    for (const child of children) process.kill(-child.pid!, 'SIGKILL');
    expect(await Promise.all(exits)).toEqual(children.map(() => ({ code: null, signal: 'SIGKILL' })));
    await until('every pipe of theirs to be closed here', () => sockets() === before);
    for (const child of children) expect(child.stdio.every((stream) => !stream || stream.destroyed)).toBe(true);
  });

  it('keeps its copy of a held pipe until the process exits: the server closing its own is no end of file', async () => {
    const spawner = await readySpawner();
    const descriptors = () => fs.readdirSync(`/proc/${spawner.pid}/fd`).length;
    const before = descriptors();
    const child = await spawner.spawn({ ...request('cat', [], ['pipe', 'pipe', 'pipe', 'pipe']), held: [0] });
    const exited = exitOf(child);
    await until('the spawner to close the copies it does not hold', () => descriptors() === before + 1);
    (child.stdio[0] as Writable).destroy();
    await sleep(300);
    expect(running(child.pid!)).toBe(true);
    process.kill(-child.pid!, 'SIGKILL');
    expect(await exited).toEqual({ code: null, signal: 'SIGKILL' });
    await until('the held copy to be closed at the exit', () => descriptors() === before);
  });

  it('tells the exit of a process that ends at once (its exit can come in the same read as its spawn)', async () => {
    const spawner = await readySpawner();
    for (let round = 0; round < 40; round += 1) {
      const child = await spawner.spawn(request('true', [], ['ignore', 'ignore', 'ignore']));
      const exited = await Promise.race([exitOf(child), sleep(5_000).then(() => 'no exit event')]);
      expect(exited).toEqual({ code: 0, signal: null });
    }
  });

  it('rejects a spawn that child_process would refuse outright (a null byte in an argument)', async () => {
    const spawner = await readySpawner();
    await expect(spawner.spawn(request('echo', ['a\0b']))).rejects.toMatchObject({ code: 'ERR_INVALID_ARG_VALUE' });
    // And it still spawns.
    expect(await exitOf(await spawner.spawn(request('true', [])))).toEqual({ code: 0, signal: null });
  });

  it('reports a program that cannot start as an error, as child_process does', async () => {
    const spawner = await readySpawner();
    const child = await spawner.spawn(request('/nonexistent/agentd-test-program', []));
    const error = await new Promise<Error & { code?: string }>((resolve) => child.once('error', resolve));
    expect(error.code).toBe('ENOENT');
    expect(child.pid).toBeUndefined();
    // Its pipes are there, as child_process sets them up: empty and ended.
    const stdout = child.stdio[1] as Readable;
    let out = '';
    stdout.setEncoding('utf8').on('data', (text: string) => (out += text));
    await new Promise((resolve) => stdout.once('end', resolve));
    expect(out).toBe('');
  });

  it('goes once nothing it spawned has run for its idle time, and starts again for the next spawn', async () => {
    const spawner = await readySpawner(150);
    const first = spawner.pid!;
    const child = await spawner.spawn(request('sleep', ['0.5']));
    await sleep(300);
    // Past its idle time since the first exit, but a process of its still runs.
    expect(running(first)).toBe(true);
    await exitOf(child);
    await until('the idle spawner to go', () => !running(first));
    expect(spawner.ready).toBe(false);
    const next = await spawner.spawn(request('sleep', ['0.2']));
    expect(spawner.pid).not.toBe(first);
    expect(readProcess(next.pid!)?.ppid).toBe(spawner.pid);
    await exitOf(next);
  });

  it('makes a start from a spare started ahead when the request offers one: the spare reads its script, its script pipe is not handed over, and it goes with the spawner', async () => {
    const spawner = await readySpawner();
    const marker = `agentd-spare-${process.pid}-${Date.now()}`;
    // The script's length, a newline, the script (as bwrap-launcher.ts frames it).
    const body = 'exec 5<&-; echo "from the spare: MARK ${MARK-unset}"; [ -e /proc/$$/fd/5 ] && echo "script pipe open" || echo "script pipe closed"; read line; echo "got $line"';
    const spare = { command: 'bash', args: ['--norc', '-c', 'IFS= read -r -u 5 n && IFS= read -r -N "$n" -u 5 s && eval "$s"', marker], scriptFd: 5, script: `${Buffer.byteLength(body)}\n${body}` };
    const offer = (): SpawnRequest => ({ ...request('bash', ['--norc', '-c', 'echo "from the command $MARK"; read line; echo "got $line"']), env: { MARK: 'with its env' }, spare });
    const outputOf = async (child: SpawnedProcess): Promise<string> => {
      let out = '';
      (child.stdio[1] as Readable).setEncoding('utf8').on('data', (text: string) => (out += text));
      const ended = new Promise((resolve) => (child.stdio[1] as Readable).once('end', resolve));
      (child.stdio[0] as Writable).end('hello\n');
      await exitOf(child);
      await ended;
      return out;
    };
    // No spare yet: the request's command. A spare of that kind is started a moment later.
    expect(await outputOf(await spawner.spawn(offer()))).toBe('from the command with its env\ngot hello\n');
    await until('a spare', () => processesMatching(`bash --norc -c IFS= read -r -u 5 n && IFS= read -r -N "$n" -u 5 s && eval "$s" ${marker}`).length === 1);
    const [waiting] = processesMatching(`bash --norc -c IFS= read -r -u 5 n && IFS= read -r -N "$n" -u 5 s && eval "$s" ${marker}`);
    expect(readProcess(waiting!)?.ppid).toBe(spawner.pid);
    const fromSpare = await spawner.spawn(offer());
    expect(fromSpare.pid).toBe(waiting);
    // Its stdio as asked (three pipes, handed over: stdin carried `hello`); the script's pipe was closed by the script.
    expect(fromSpare.stdio.length).toBe(3);
    expect(await outputOf(fromSpare)).toBe('from the spare: MARK unset\nscript pipe closed\ngot hello\n');
    // The one made after the last start goes with the spawner.
    await until('the next spare', () => processesMatching(`bash --norc -c IFS= read -r -u 5 n && IFS= read -r -N "$n" -u 5 s && eval "$s" ${marker}`).length === 1);
    const [next] = processesMatching(`bash --norc -c IFS= read -r -u 5 n && IFS= read -r -N "$n" -u 5 s && eval "$s" ${marker}`);
    spawner.close();
    await until('the spare to go with the spawner', () => !running(next!));
  });

  it('spawns here when its spawner cannot start in time', async () => {
    const spawner = new ProcessSpawner({ startTimeoutMs: 1 });
    spawners.push(spawner);
    for (let round = 0; round < 2; round += 1) {
      const child = await spawner.spawn(request('bash', ['--norc', '-c', 'echo $PPID'], ['ignore', 'pipe', 'ignore']));
      let out = '';
      const stdout = (child.stdio[1] as Readable).setEncoding('utf8').on('data', (text: string) => (out += text));
      const ended = new Promise((resolve) => stdout.once('end', resolve));
      expect(await exitOf(child)).toEqual({ code: 0, signal: null });
      await ended;
      expect(out.trim()).toBe(String(process.pid));
      expect(spawner.ready).toBe(false);
    }
  });

  describe('run: a short program run to its end by the spawner, its output in one answer', () => {
    const runRequest = (script: string, more: Partial<RunRequest> = {}): RunRequest => ({ command: 'bash', args: ['--norc', '-c', script], cwd: process.cwd(), env: { PATH: process.env.PATH ?? '/usr/bin:/bin' }, maxOutputBytes: 1024 * 1024, timeoutMs: 10_000, ...more });

    it('its stdout, stderr and exit code, its input on stdin; run by the spawner, and no pipe of it comes here', async () => {
      const spawner = await readySpawner();
      const descriptors = () => fs.readdirSync('/proc/self/fd').length;
      const before = descriptors();
      const script = 'echo "out:$(cat)"; echo "parent:$PPID"; echo err >&2; exit 3';
      const ran = await spawner.run(runRequest(script, { input: 'the input' }));
      expect(ran).toEqual({ stdout: `out:the input\nparent:${spawner.pid}\n`, stderr: 'err\n', exitCode: 3 });
      // Run here (no spawner), the same answer from this process.
      expect(await runHere(runRequest(script, { input: 'the input' }))).toEqual({ stdout: `out:the input\nparent:${process.pid}\n`, stderr: 'err\n', exitCode: 3 });
      // Without input, stdin is empty: not this process's.
      expect((await spawner.run(runRequest('cat; echo done'))).stdout).toBe('done\n');
      expect(descriptors()).toBe(before);
    });

    it('past its limits it is killed and says so (exit code -1); a program that cannot start is -1 with the reason', async () => {
      const spawner = await readySpawner();
      for (const run of [spawner.run, runHere]) {
        const loud = await run(runRequest('head -c 100000 /dev/zero; sleep 60', { maxOutputBytes: 1000 }));
        expect([loud.exitCode, loud.stderr]).toEqual([-1, 'bash printed more than 1000 bytes']);
        const slow = await run(runRequest('sleep 60', { timeoutMs: 200 }));
        expect([slow.exitCode, slow.stderr]).toEqual([-1, 'bash timed out after 0.2 s']);
        const missing = await run({ ...runRequest(''), command: '/nonexistent/agentd-no-such-program' });
        expect(missing.exitCode).toBe(-1);
        expect(missing.stderr).toContain('ENOENT');
      }
    });

    it('a spawner killed while it runs one: reported killed, and the next one runs in the next spawner', async () => {
      const spawner = await readySpawner();
      const running = spawner.run(runRequest('sleep 60'));
      const first = spawner.pid!;
      await until('the program to run', () => liveDescendants(first).length > 0);
      // The spawner's whole group: it and what it runs (their group is its own).
      process.kill(-first, 'SIGKILL');
      expect(await running).toEqual({ stdout: '', stderr: 'bash was killed (the spawner went)', exitCode: -1 });
      expect(await spawner.run(runRequest('echo $PPID'))).toEqual({ stdout: `${spawner.pid}\n`, stderr: '', exitCode: 0 });
      expect(spawner.pid).not.toBe(first);
    });
  });

  it('a spawner killed with what it spawned still running: they are killed and reported killed', async () => {
    const spawner = await readySpawner();
    const detached = await spawner.spawn(request('sleep', ['60']));
    const attached = await spawner.spawn(request('sleep', ['61'], ['pipe', 'pipe', 'pipe'], false));
    const exits = [exitOf(detached), exitOf(attached)];
    process.kill(spawner.pid!, 'SIGKILL');
    expect(await Promise.all(exits)).toEqual([
      { code: null, signal: 'SIGKILL' },
      { code: null, signal: 'SIGKILL' },
    ]);
    // The detached one's whole group: a background job it started goes too.
    await until('both sleeps to be gone', () => !running(detached.pid!) && !running(attached.pid!));
  });

  it.each([
    ['', false],
    [', even while a pipe it handed over waits for the server to acknowledge it', true],
  ])('a server killed with -9: its spawner kills what it spawned and ran (whole groups, its own too) and exits%s', async (_title, blocked) => {
    const dir = tempDir('agentd-spawner-');
    dirs.push(dir);
    // Unique durations: each sleep is found by its command line.
    const marker = `30${Math.floor(Math.random() * 9)}.${process.pid}${Date.now() % 1000}`;
    // The server's part, from the built server: a spawner, then processes through it. Blocked: the
    // last spawn is asked for and the event loop then spins, so its pipes are never acknowledged.
    const script = path.join(dir, 'server.mjs');
    fs.writeFileSync(
      script,
      `import { ProcessSpawner } from ${JSON.stringify(path.join(path.dirname(CLI), 'adapters', 'process', 'process-spawner.js'))};
const spawner = new ProcessSpawner();
const env = { PATH: process.env.PATH };
const group = await spawner.spawn({ command: 'bash', args: ['--norc', '-c', 'sleep ${marker}1 & sleep ${marker}2; wait'], cwd: '/', env, detached: true, stdio: ['ignore', 'pipe', 'ignore'] });
// A program run to its end, as the checkpoints' git in a sandbox: what it starts is in no group of its own.
void spawner.run({ command: 'bash', args: ['--norc', '-c', 'sleep ${marker}4 & sleep ${marker}5; wait'], cwd: '/', env, maxOutputBytes: 1000, timeoutMs: 60000 });
const single = spawner.spawn({ command: 'sleep', args: ['${marker}3'], cwd: '/', env, detached: false, stdio: ['pipe', 'pipe', 'pipe'] });
process.stdout.write(JSON.stringify({ spawner: spawner.pid, group: group.pid }) + '\\n');
if (${blocked}) for (;;);
await single;
setInterval(() => undefined, 1000);
`,
    );
    const server = spawn(process.execPath, [script], { stdio: ['ignore', 'pipe', 'inherit'] });
    const line = await new Promise<string>((resolve, reject) => {
      let text = '';
      server.stdout.setEncoding('utf8').on('data', (chunk: string) => {
        text += chunk;
        if (text.includes('\n')) resolve(text.split('\n')[0]!);
      });
      server.once('exit', (code) => reject(new Error(`the server script exited (${code})`)));
    });
    const { spawner, group } = JSON.parse(line) as { spawner: number; group: number };
    await until('the processes', () => [1, 2, 3, 4, 5].every((n) => processesMatching(`sleep ${marker}${n}`).length === 1));
    const sleeps = [1, 2, 3, 4, 5].flatMap((n) => processesMatching(`sleep ${marker}${n}`));
    expect(readProcess(group)?.ppid).toBe(spawner);
    expect(readProcess(sleeps[2]!)?.ppid).toBe(spawner);

    server.kill('SIGKILL');
    try {
      await until('the spawner, its processes and the background job to be gone', () => ![spawner, group, ...sleeps].some(running));
    } finally {
      for (const pid of [spawner, group, ...sleeps]) if (running(pid)) process.kill(pid, 'SIGKILL');
    }
  });
});

describe('a server exiting with held pipes', () => {
  it("is no end of file for them while it lives; once it is gone, its spawner ends the process and lets go of them", async () => {
    const dir = tempDir('agentd-spawner-');
    dirs.push(dir);
    const eof = path.join(dir, 'eof');
    const marker = `60${Math.floor(Math.random() * 9)}.${process.pid}${Date.now() % 1000}`;
    // As a sandbox: a process that ends at its script's end of file. Here a reader in a session of
    // its own (out of reach of the spawner's kill) notes when the held pipe (stdin, as fd 3: bash
    // gives a background job /dev/null for its stdin) ends.
    const script = path.join(dir, 'server.mjs');
    fs.writeFileSync(
      script,
      `import fs from 'node:fs';
import { ProcessSpawner } from ${JSON.stringify(path.join(path.dirname(CLI), 'adapters', 'process', 'process-spawner.js'))};
const spawner = new ProcessSpawner();
const env = { PATH: process.env.PATH };
const child = await spawner.spawn({ command: 'bash', args: ['--norc', '-c', 'exec 3<&0; setsid bash --norc -c "cat <&3 > /dev/null; echo ended > ${eof}" & sleep ${marker}'], cwd: '/', env, detached: true, stdio: ['pipe', 'ignore', 'ignore'], held: [0] });
process.stdout.write(JSON.stringify({ spawner: spawner.pid, child: child.pid }) + '\\n');
process.stdin.once('data', () => {
  // The server's own copy goes: as at its exit, but it lives on for a while.
  child.stdio[0].destroy();
  setTimeout(() => {
    process.stdout.write(JSON.stringify({ endedWhileAlive: fs.existsSync(${JSON.stringify(eof)}) }) + '\\n');
    process.exit(0);
  }, 500);
});
`,
    );
    const server = spawn(process.execPath, [script], { stdio: ['pipe', 'pipe', 'inherit'] });
    const lines: string[] = [];
    let text = '';
    server.stdout.setEncoding('utf8').on('data', (chunk: string) => {
      text += chunk;
      while (text.includes('\n')) {
        lines.push(text.slice(0, text.indexOf('\n')));
        text = text.slice(text.indexOf('\n') + 1);
      }
    });
    const serverExit = new Promise((resolve) => server.once('exit', resolve));
    await until('the server script to spawn', () => lines.length === 1);
    const { spawner, child } = JSON.parse(lines[0]!) as { spawner: number; child: number };
    await until('the sleep', () => processesMatching(`sleep ${marker}`).length === 1);
    const [sleeper] = processesMatching(`sleep ${marker}`);
    try {
      server.stdin.write('go\n');
      await serverExit;
      expect(JSON.parse(lines[1]!)).toEqual({ endedWhileAlive: false });
      await until('the end of file, once the server is gone', () => fs.existsSync(eof));
      await until('the spawner and its process to be gone', () => ![spawner, child, sleeper!].some(running));
    } finally {
      for (const pid of [spawner, child, sleeper!]) if (running(pid)) process.kill(pid, 'SIGKILL');
      server.kill('SIGKILL');
    }
  });
});

/** The processes whose whole command line is `commandLine`. */
function processesMatching(commandLine: string): number[] {
  const found: number[] = [];
  for (const name of fs.readdirSync('/proc').filter((entry) => /^\d+$/.test(entry))) {
    try {
      if (fs.readFileSync(`/proc/${name}/cmdline`, 'utf8').replaceAll('\0', ' ').trim() === commandLine) found.push(Number(name));
    } catch {
      // gone meanwhile
    }
  }
  return found;
}
