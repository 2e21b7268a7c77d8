import { spawn, type ChildProcess } from 'node:child_process';
import { EventEmitter } from 'node:events';
import net from 'node:net';
import { isSea } from 'node:sea';
import { PassThrough, type Readable, type Writable } from 'node:stream';
import { signalQuietly } from './process-tree.js';
import { runHere, spawnHere, type RunProcess, type RunRequest, type RunResult, type SpawnedProcess, type SpawnProcess, type SpawnRequest } from './spawn-here.js';
import { spawnerMain } from './spawner-main.js';

export type { RunProcess, RunRequest, RunResult, SpawnedProcess, SpawnProcess, SpawnRequest } from './spawn-here.js';

/** The spawner's child, as the server sees it. */
class RemoteProcess extends EventEmitter implements SpawnedProcess {
  pid: number | undefined;
  readonly stdio: Array<net.Socket | PassThrough | null> = [];
  private ended = false;

  constructor(readonly detached: boolean) {
    super();
  }

  /**
   * Its exit, told on a later turn as child_process tells it: the spawner's answer and its exit
   * can come in one read, before whoever awaited the spawn has listened.
   */
  end(code: number | null, signal: NodeJS.Signals | null): void {
    if (this.ended) return;
    this.ended = true;
    // Its stdin goes now, as child_process lets a child's go at its exit: only written to, never
    // read, it sees no end of file, and a shell killed rather than ended (released when idle,
    // deleted) kept its descriptor here for as long as the server ran. The other pipes are read
    // from, and close at their end of file.
    this.stdio[0]?.destroy();
    setImmediate(() => this.emit('exit', code, signal));
  }
}

interface Pending {
  request: SpawnRequest;
  process: RemoteProcess;
  resolve: (spawned: SpawnedProcess) => void;
  reject: (error: unknown) => void;
  /** Sent to the spawner (false: waiting for it to start). */
  sent: boolean;
}

interface PendingRun {
  request: RunRequest;
  resolve: (result: RunResult) => void;
  /** Sent to the spawner (false: waiting for it to start). */
  sent: boolean;
}

/** One run of the spawner, with the spawns it was given and the processes it runs. */
interface Helper {
  child: ChildProcess;
  ready: boolean;
  pending: Map<number, Pending>;
  live: Map<number, RemoteProcess>;
  /** Programs it runs to their end (`run`), until answered. */
  runs: Map<number, PendingRun>;
}

/** A spawn under way, a process running or a program being run. */
function busy(helper: Helper): boolean {
  return helper.pending.size > 0 || helper.live.size > 0 || helper.runs.size > 0;
}

type HelperMessage =
  | { t: 'ready' }
  | { t: 'fd'; id: number; index: number; readable: boolean; writable: boolean }
  | { t: 'spawned'; id: number; pid: number }
  | { t: 'error'; id: number; message: string; code: string | null; thrown: boolean }
  | { t: 'exit'; id: number; code: number | null; signal: NodeJS.Signals | null }
  | ({ t: 'ran'; id: number } & RunResult);

export interface ProcessSpawnerOptions {
  /** How long the spawner stays once nothing it spawned runs. Default 2 s. */
  idleMs?: number;
  /** How long it may take to start; past that, or if it fails to, spawns are done here from then on. Default 10 s. */
  startTimeoutMs?: number;
}

/**
 * Spawns the server's programs (the shells, rg, the checkpoints' git) from a small process of its
 * own instead of from the server. Node spawns by forking the whole calling process, and copying a
 * large process's page tables blocks its event loop for longer the larger the server grows.
 * The spawner (spawner-main.ts) stays small, forks there, and hands each pipe of the new
 * process back over its IPC channel: the server then reads and writes the process's pipes itself
 * and signals it by pid, as if it had spawned it. A short program whose output is all the server
 * wants (the checkpoints' git) is `run` there to its end instead, and answered in one message.
 *
 * The spawner runs while something it spawned runs: it starts with the first spawn (which waits
 * for it, some tens of milliseconds) and goes `idleMs` after the last of its processes exited.
 * It dies with the server (the end of its stdin): it kills what it spawned, by process group (a
 * bwrap killed before it armed --die-with-parent leaves its child behind, in its group), and a
 * sandbox (bwrap --die-with-parent) dies with it; holding pipes of the sandboxes' (SpawnRequest.held), it
 * does so once the server's process is gone. Should the spawner die first, its processes are killed
 * here and reported as killed. If it cannot start, spawns are done here.
 */
export class ProcessSpawner {
  private helper: Helper | undefined;
  private nextId = 1;
  private idleTimer: NodeJS.Timeout | undefined;
  /** Closed, or the spawner failed to start: every spawn is done here. */
  private spawnHere = false;

  constructor(private readonly options: ProcessSpawnerOptions = {}) {}

  /** Whether the spawner runs and has answered. */
  get ready(): boolean {
    return this.helper?.ready ?? false;
  }

  /** The spawner's pid, while it runs. */
  get pid(): number | undefined {
    return this.helper?.child.pid;
  }

  readonly spawn: SpawnProcess = (request) => {
    clearTimeout(this.idleTimer);
    const helper = this.spawnHere ? undefined : (this.helper ?? this.startHelper());
    if (!helper) return spawnHere(request);
    const id = this.nextId++;
    const pending: Pending = { request, process: new RemoteProcess(request.detached), resolve: () => undefined, reject: () => undefined, sent: false };
    const spawned = new Promise<SpawnedProcess>((resolve, reject) => Object.assign(pending, { resolve, reject }));
    helper.pending.set(id, pending);
    this.holdOn(helper);
    if (helper.ready) this.send(helper, id, pending);
    return spawned;
  };

  /**
   * A short program run to its end by the spawner, which collects its output and answers once: no
   * pipe is handed over, so nothing waits for this process's event loop to acknowledge one.
   */
  readonly run: RunProcess = (request) => {
    clearTimeout(this.idleTimer);
    const helper = this.spawnHere ? undefined : (this.helper ?? this.startHelper());
    if (!helper) return runHere(request);
    const id = this.nextId++;
    const pending: PendingRun = { request, resolve: () => undefined, sent: false };
    const ran = new Promise<RunResult>((resolve) => (pending.resolve = resolve));
    helper.runs.set(id, pending);
    this.holdOn(helper);
    if (helper.ready) this.sendRun(helper, id, pending);
    return ran;
  };

  /** Lets the spawner go now (it kills what it still runs); later spawns are done here. */
  close(): void {
    this.spawnHere = true;
    clearTimeout(this.idleTimer);
    this.stopHelper();
  }

  private send(helper: Helper, id: number, pending: Pending): void {
    const { request } = pending;
    pending.sent = true;
    // A channel closed meanwhile: the spawner is going, and its exit hands this spawn back here.
    const spare = request.spare && { spare: request.spare };
    const held = request.held?.length ? { held: request.held } : {};
    helper.child.send({ t: 'spawn', id, command: request.command, args: request.args, cwd: request.cwd, env: request.env, detached: request.detached, stdio: request.stdio, ...spare, ...held }, (error) => error && this.onHelperGone(helper));
  }

  private sendRun(helper: Helper, id: number, pending: PendingRun): void {
    const { request } = pending;
    pending.sent = true;
    const input = request.input === undefined ? {} : { input: request.input };
    helper.child.send({ t: 'run', id, command: request.command, args: request.args, cwd: request.cwd, env: request.env, maxOutputBytes: request.maxOutputBytes, timeoutMs: request.timeoutMs, ...input }, (error) => error && this.onHelperGone(helper));
  }

  private startHelper(): Helper | undefined {
    // Spawned detached: a Ctrl-C at the terminal (SIGINT to the server's process group) is the
    // server's to handle; the spawner goes when the server does.
    const [command, args] = isSea() ? [process.execPath, ['__spawner']] : [process.execPath, ['-e', `(${spawnerMain.toString()})(require)`]];
    let child: ChildProcess;
    try {
      // Its stdin: a pipe nothing is written to, whose end tells it the server is gone.
      child = spawn(command, args, { env: {}, detached: true, stdio: ['pipe', 'ignore', 'ignore', 'ipc'] });
    } catch {
      this.spawnHere = true;
      return undefined;
    }
    const helper: Helper = { child, ready: false, pending: new Map(), live: new Map(), runs: new Map() };
    this.helper = helper;
    // Neither the process, its stdin nor its channel keeps the server running (but see holdOn).
    child.unref();
    (child.stdin as { unref?: () => void } | null)?.unref?.();
    child.channel?.unref();
    const startTimer = setTimeout(() => {
      this.spawnHere = true;
      this.stopHelper();
    }, this.options.startTimeoutMs ?? 10_000);
    startTimer.unref();
    child.on('message', (message: HelperMessage, handle?: unknown) => {
      if (message.t === 'ready') clearTimeout(startTimer);
      this.onMessage(helper, message, handle);
    });
    const gone = (): void => {
      clearTimeout(startTimer);
      // Never answered: it cannot start here.
      if (!helper.ready) this.spawnHere = true;
      this.onHelperGone(helper);
    };
    child.on('error', gone);
    child.once('exit', gone);
    return helper;
  }

  private onMessage(helper: Helper, message: HelperMessage, handle: unknown): void {
    if (message.t === 'ready') {
      helper.ready = true;
      for (const [id, pending] of helper.pending) if (!pending.sent) this.send(helper, id, pending);
      for (const [id, pending] of helper.runs) if (!pending.sent) this.sendRun(helper, id, pending);
      return;
    }
    if (message.t === 'ran') {
      const run = helper.runs.get(message.id);
      if (!run) return;
      helper.runs.delete(message.id);
      run.resolve({ stdout: message.stdout, stderr: message.stderr, exitCode: message.exitCode });
      this.afterExit(helper);
      return;
    }
    const pending = helper.pending.get(message.id);
    switch (message.t) {
      case 'fd':
        if (pending) pending.process.stdio[message.index] = new net.Socket({ handle, readable: message.readable, writable: message.writable } as net.SocketConstructorOpts);
        else (handle as { close?: () => void } | undefined)?.close?.();
        return;
      case 'spawned':
        if (!pending) return;
        this.answered(helper, message.id);
        pending.process.pid = message.pid;
        for (let index = 0; index < pending.request.stdio.length; index += 1) pending.process.stdio[index] ??= null;
        helper.live.set(message.id, pending.process);
        this.holdOn(helper);
        pending.resolve(pending.process);
        return;
      case 'error': {
        if (!pending) return;
        this.answered(helper, message.id);
        const error = Object.assign(new Error(message.message), message.code === null ? {} : { code: message.code });
        // As child_process: spawn() itself throws (a bad argument), or the process reports that it
        // did not start, after whoever awaited the spawn has listened.
        if (message.thrown) pending.reject(error);
        else {
          // As child_process sets up the pipes of a process that did not start: empty, ended.
          pending.request.stdio.forEach((kind, index) => (pending.process.stdio[index] = kind === 'pipe' ? new PassThrough().end() : null));
          pending.resolve(pending.process);
          setImmediate(() => pending.process.emit('error', error));
        }
        this.afterExit(helper);
        return;
      }
      case 'exit':
        helper.live.get(message.id)?.end(message.code, message.signal);
        helper.live.delete(message.id);
        this.afterExit(helper);
        return;
    }
  }

  private answered(helper: Helper, id: number): void {
    helper.pending.delete(id);
    this.holdOn(helper);
  }

  /** Like a ChildProcess, a spawn under way or a process running keeps this process running. */
  private holdOn(helper: Helper): void {
    if (busy(helper)) helper.child.channel?.ref();
    else helper.child.channel?.unref();
  }

  /** The spawner goes `idleMs` after the last of its processes, unless it is given another spawn. */
  private afterExit(helper: Helper): void {
    this.holdOn(helper);
    if (busy(helper)) return;
    clearTimeout(this.idleTimer);
    this.idleTimer = setTimeout(() => {
      if (this.helper === helper && !busy(helper)) this.stopHelper();
    }, this.options.idleMs ?? 2000);
    this.idleTimer.unref();
  }

  private stopHelper(): void {
    const helper = this.helper;
    if (!helper) return;
    this.helper = undefined;
    // Said first: a spawner holding pipes would otherwise wait for this process's exit (spawner-main.ts).
    if (helper.child.connected) helper.child.send({ t: 'close' }, () => undefined);
    helper.child.stdin?.destroy();
    if (helper.child.connected) helper.child.disconnect();
    // Not started yet: it has nothing of ours to take down when it goes.
    if (!helper.ready) helper.child.kill('SIGKILL');
    this.onHelperGone(helper);
  }

  /**
   * The spawner is gone: what it still ran is reported as killed, and killed here unless the
   * spawner was let go (it kills them itself: nothing for this process to wait for); spawns it had
   * not answered are done here.
   */
  private onHelperGone(helper: Helper): void {
    if (this.helper === helper) this.helper = undefined;
    for (const process of helper.live.values()) {
      if (!this.spawnHere && process.pid !== undefined) signalQuietly(process.detached ? -process.pid : process.pid, 'SIGKILL');
      process.end(null, 'SIGKILL');
    }
    helper.live.clear();
    const pending = [...helper.pending.values()];
    helper.pending.clear();
    for (const { request, resolve, reject } of pending) {
      try {
        void spawnHere(request).then(resolve, reject);
      } catch (error) {
        reject(error);
      }
    }
    // A program it was running is reported as killed (it may have done part of its work); one it
    // was not given yet is run here.
    const runs = [...helper.runs.values()];
    helper.runs.clear();
    for (const { request, resolve, sent } of runs) {
      if (sent) resolve({ stdout: '', stderr: `${request.command.split('/').pop()} was killed (the spawner went)`, exitCode: -1 });
      else void runHere(request).then(resolve);
    }
  }
}
