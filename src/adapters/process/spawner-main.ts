/**
 * The spawner's program (see process-spawner.ts): a small Node process that spawns what the
 * server asks for and hands each pipe of the new process over to the server at once.
 *
 * It runs as `node -e "(<this function's text>)(require)"`, or as `agentd __spawner` in the single
 * executable (whose main, src/cli/binary-main.ts, then runs nothing else), so it must not use
 * anything from outside its body: `load` is its `require`.
 *
 * Messages in (from the server): `{ t: 'spawn', id, command, args, cwd, env, detached, stdio,
 * spare? }`. With `spare` (process-launcher.ts: SpareStart) the process is made from a spare one
 * started ahead, if there is one: it is given the spare's script and handed over as if just
 * spawned; a new spare is started a moment later, for the next start of the kind.
 * Spares are the only processes the spawner runs that nobody asked for: one per kind, idle (bash
 * blocked reading its script), gone with the spawner.
 * Messages out: `{ t: 'ready' }` once; per spawn either
 * - `{ t: 'error', id, message, code, thrown }` (`thrown`: spawn() threw, as for an argument with
 *   a null byte; else the process did not start), or
 * - one `{ t: 'fd', id, index, readable, writable }` per pipe (with the pipe's handle), then
 *   `{ t: 'spawned', id, pid }`, and later `{ t: 'exit', id, code, signal }`.
 * `{ t: 'run', id, command, args, cwd, env, input?, maxOutputBytes, timeoutMs }`: a short program
 * (the checkpoints' git) run to its end here, `input` written to its stdin, its output collected
 * here and answered in one `{ t: 'ran', id, stdout, stderr, exitCode }` (-1: not started, killed
 * at the limits, or by a signal; stderr then says why when the program said nothing). No pipe is
 * handed over, which spares the server most of its CPU per git run (two pipes made into sockets,
 * four messages, each pipe acknowledged).
 * `held` (SpawnRequest.held): the pipes of the process whose end this spawner keeps a copy of
 * too, closed at the process's exit: the server's exit is then no end of file for them.
 * When the server goes (the end of its stdin, `kill -9` included, or the channel's disconnect),
 * every process still running is killed (its whole group when it was spawned detached), then the
 * spawner's own group (every process it started without a group of its own, and theirs), which
 * ends the spawner too. While it holds pipes, that waits until the server is gone (this process's parent
 * changed; at most SERVER_EXIT_WAIT_MS): the sandboxes those pipes keep would otherwise end as
 * the server's exit closes its descriptors, and their teardown (namespaces, four processes each)
 * would share the machine with that exit. `{ t: 'close' }`: the server lets this process go while
 * it goes on itself: the same at once.
 */
export function spawnerMain(load: NodeJS.Require): void {
  const { spawn } = load('node:child_process') as typeof import('node:child_process');
  interface SpawnMessage {
    t: 'spawn';
    id: number;
    command: string;
    args: string[];
    cwd: string;
    env: Record<string, string>;
    detached: boolean;
    stdio: Array<'pipe' | 'ignore'>;
    spare?: { command: string; args: string[]; scriptFd: number; script: string };
    held?: number[];
  }
  interface RunMessage {
    t: 'run';
    id: number;
    command: string;
    args: string[];
    cwd: string;
    env: Record<string, string>;
    input?: string;
    maxOutputBytes: number;
    timeoutMs: number;
  }
  /** A pipe's stream as child_process makes it: a net.Socket over a libuv pipe handle. */
  interface PipeStream {
    readable: boolean;
    writable: boolean;
    _handle: { readStop?: () => number; close: () => void } | null;
  }
  const live = new Map<number, { pid: number; detached: boolean }>();
  /** A pipe's end kept here too (`held`): closed once both its process exited and Node wrote it (it writes a handle when the server has taken the one before). */
  interface KeptHandle {
    handle: { close: () => void };
    sent: boolean;
    exited: boolean;
  }
  /** By spawn: the ends of its pipes kept here too. */
  const held = new Map<number, KeptHandle[]>();
  /** The server: once this process's parent is another, the server's exit is over. */
  const serverPid = process.ppid;
  const SERVER_EXIT_WAIT_MS = 2000;
  type Child = ReturnType<typeof spawn>;
  /** By kind (command, arguments, descriptors): the spare ready for the next start of that kind. */
  const spares = new Map<string, { child: Child; detached: boolean }>();
  /** How long after a spare was used the next one is started: off the path of the start that used it. */
  const SPARE_DELAY_MS = 100;
  /** A handle sent is closed here once written (Node keeps a raw handle it sent open); a kept one is marked sent. */
  const send = (message: object, handle?: { close: () => void }, kept?: KeptHandle): void => {
    const written = (): void => {
      if (!kept) return handle?.close();
      kept.sent = true;
      if (kept.exited) handle?.close();
    };
    if (!process.connected) return written();
    process.send?.(message, handle as never, handle ? written : undefined);
  };

  /** The spare's pipes: the request's, the script's at its descriptor (those between unused). */
  const spareStdio = (message: SpawnMessage, scriptFd: number): Array<'pipe' | 'ignore'> | null => {
    if (message.stdio.length > scriptFd) return null;
    const stdio = [...message.stdio];
    while (stdio.length < scriptFd) stdio.push('ignore');
    return [...stdio, 'pipe'];
  };
  const spareKind = (message: SpawnMessage): string | null => {
    const { spare } = message;
    return spare ? JSON.stringify([spare.command, spare.args, spare.scriptFd, message.stdio, message.detached]) : null;
  };
  const startSpare = (message: SpawnMessage, kind: string): void => {
    const { spare } = message;
    const stdio = spare && spareStdio(message, spare.scriptFd);
    if (!spare || !stdio || spares.has(kind)) return;
    let child: Child;
    try {
      child = spawn(spare.command, spare.args, { cwd: '/', env: {}, detached: message.detached, stdio });
    } catch {
      return;
    }
    if (child.pid === undefined) return void child.once('error', () => undefined);
    for (const stream of child.stdio) stream?.on('error', () => undefined);
    const spareEntry = { child, detached: message.detached };
    spares.set(kind, spareEntry);
    child.once('exit', () => spares.get(kind) === spareEntry && spares.delete(kind));
  };
  /** The spare of this kind, still running, given its script; undefined when there is none. */
  const takeSpare = (message: SpawnMessage, kind: string | null): Child | undefined => {
    const child = kind === null ? undefined : spares.get(kind)?.child;
    if (!child || !message.spare) return undefined;
    spares.delete(kind as string);
    const script = child.stdio[message.spare.scriptFd] as NodeJS.WritableStream | null;
    if (child.exitCode !== null || child.signalCode !== null || !script) return undefined;
    script.end(message.spare.script);
    return child;
  };

  const start = (message: SpawnMessage): void => {
    const { id } = message;
    const kind = spareKind(message);
    if (kind !== null) setTimeout(() => startSpare(message, kind), SPARE_DELAY_MS);
    let child: Child | undefined = takeSpare(message, kind);
    try {
      child ??= spawn(message.command, message.args, { cwd: message.cwd, env: message.env, detached: message.detached, stdio: message.stdio });
    } catch (error) {
      const { code } = error as { code?: unknown };
      return send({ t: 'error', id, message: (error as Error).message, code: typeof code === 'string' ? code : null, thrown: true });
    }
    const { pid } = child;
    if (pid === undefined) {
      // Not started (ENOENT, EACCES, ...): child_process reports it on the next tick.
      child.once('error', (error: Error & { code?: string }) => send({ t: 'error', id, message: error.message, code: error.code ?? null, thrown: false }));
      for (const stream of child.stdio) stream?.destroy();
      return;
    }
    live.set(id, { pid, detached: message.detached });
    // Each pipe's end goes to the server before this process reads a byte from it: child_process
    // starts reading the output pipes as it makes them, so that is stopped here, in the same tick
    // (what this process read would never reach the server). Once sent, this copy is closed: the
    // server's is then the only one, and its close is an end of file for the process. A held one
    // stays here too, until the process exits.
    const kept: KeptHandle[] = [];
    child.stdio.forEach((stream, index) => {
      const pipe = stream as unknown as PipeStream | null;
      const handle = pipe?._handle;
      // A spare's script pipe (past the request's) stays here, ended.
      if (!pipe || !handle || index >= message.stdio.length) return;
      handle.readStop?.();
      pipe._handle = null;
      const keep = message.held?.includes(index) ? { handle, sent: false, exited: false } : undefined;
      if (keep) kept.push(keep);
      send({ t: 'fd', id, index, readable: pipe.readable, writable: pipe.writable }, handle, keep);
    });
    if (kept.length > 0) held.set(id, kept);
    send({ t: 'spawned', id, pid });
    child.once('exit', (code, signal) => {
      live.delete(id);
      for (const entry of held.get(id) ?? []) {
        entry.exited = true;
        if (entry.sent) entry.handle.close();
      }
      held.delete(id);
      send({ t: 'exit', id, code, signal });
    });
  };

  /** A program run to its end here, killed at the request's limits; its output in the one answer. */
  const run = (message: RunMessage): void => {
    const { id } = message;
    const name = message.command.split('/').pop();
    let answered = false;
    const answer = (stdout: string, stderr: string, exitCode: number): void => {
      if (answered) return;
      answered = true;
      live.delete(id);
      try {
        send({ t: 'ran', id, stdout, stderr, exitCode });
      } catch (error) {
        // An output past what one message can hold (JSON's string limit): said, not lost.
        send({ t: 'ran', id, stdout: '', stderr: `${name}'s output could not be handed over: ${(error as Error).message}`, exitCode: -1 });
      }
    };
    let child: Child;
    try {
      child = spawn(message.command, message.args, { cwd: message.cwd, env: message.env, stdio: [message.input === undefined ? 'ignore' : 'pipe', 'pipe', 'pipe'] });
    } catch (error) {
      return answer('', (error as Error).message, -1);
    }
    if (child.pid !== undefined) live.set(id, { pid: child.pid, detached: false });
    const out: Buffer[] = [];
    const err: Buffer[] = [];
    let outBytes = 0;
    let stopped = '';
    const stop = (reason: string): void => {
      stopped ||= reason;
      child.kill('SIGKILL');
    };
    const timer = setTimeout(() => stop(`${name} timed out after ${message.timeoutMs / 1000} s`), message.timeoutMs);
    child.once('error', (error) => {
      clearTimeout(timer);
      answer('', error.message, -1);
    });
    child.stdout?.on('data', (chunk: Buffer) => {
      outBytes += chunk.length;
      if (outBytes > message.maxOutputBytes) stop(`${name} printed more than ${message.maxOutputBytes} bytes`);
      else out.push(chunk);
    });
    child.stderr?.on('data', (chunk: Buffer) => err.push(chunk));
    child.once('close', (code, signal) => {
      clearTimeout(timer);
      const text = Buffer.concat(err).toString('utf8');
      const failed = stopped || (code === null ? `${name} was killed (${signal ?? 'signal'})` : '');
      answer(Buffer.concat(out).toString('utf8'), text || failed, failed ? -1 : (code ?? -1));
    });
    if (child.stdin) {
      // It may exit before it read everything (a bad argument): its stdin is then closed.
      child.stdin.on('error', () => undefined);
      child.stdin.end(message.input);
    }
  };

  const killAll = (): void => {
    // A spare also ends by itself: its script's pipe closes with this process (end of file: nothing to run).
    for (const { pid, detached } of [...live.values(), ...[...spares.values()].map((spare) => ({ pid: spare.child.pid as number, detached: spare.detached }))]) {
      try {
        process.kill(detached ? -pid : pid, 'SIGKILL');
      } catch {
        // gone already
      }
    }
    // Then this process's own group (the server spawns it detached, so it leads one): what it
    // started without a group of its own (a `run`, rg) and all they started. A bwrap killed
    // between its clone and its word to its child (its --die-with-parent not armed yet) leaves
    // that child waiting for the word forever, outside any sandbox's watchdog: it is in the
    // group too. This process goes with it.
    try {
      process.kill(-process.pid, 'SIGKILL');
    } catch {
      // not a group's leader: no such group
    }
    process.exit(0);
  };
  let going = false;
  const serverGone = (): void => {
    if (going) return;
    going = true;
    if (held.size === 0) return killAll();
    const deadline = Date.now() + SERVER_EXIT_WAIT_MS;
    const wait = (): void => {
      if (process.ppid !== serverPid || held.size === 0 || Date.now() > deadline) killAll();
      else setTimeout(wait, 5);
    };
    wait();
  };
  process.on('message', (message: { t?: unknown }) => {
    if (message?.t === 'spawn') start(message as SpawnMessage);
    else if (message?.t === 'run') run(message as RunMessage);
    else if (message?.t === 'close') killAll();
  });
  process.once('disconnect', serverGone);
  // The server holds the other end of stdin: its end of file is the server's exit. The channel's
  // own 'disconnect' does not come while a pipe handed over waits for the server's acknowledgement
  // (Node puts the disconnect off until then), and a server killed then never acknowledges it.
  process.stdin.once('end', serverGone).once('error', serverGone).resume();
  send({ t: 'ready' });
}
