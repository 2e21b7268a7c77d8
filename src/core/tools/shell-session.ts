import type { OmittedStretch } from './tool-output.js';

/**
 * The conversation's long-lived shell, as core sees it. The implementation (a real bash process,
 * possibly inside a sandbox) lives in adapters/ and is created through a ProcessLauncher.
 */
export interface ShellRunOptions {
  /** Hard limit: after it, return what was printed so far and leave the command running. */
  timeoutMs: number;
  /** Soft limit: no new output for this long returns what was printed so far (command keeps running). */
  idleTimeoutMs: number;
  signal?: AbortSignal;
}

export interface ShellRunResult {
  /** What the command printed (all of it, unless `omitted`): the tool executor caps it for the model. */
  output: string;
  /** null while the command is still running (timed out, or backgrounded). */
  exitCode: number | null;
  cwd: string;
  timedOut: boolean;
  /** True when the command is still running after we returned (hard or soft timeout). */
  stillRunning: boolean;
  /** Set for a command ending in `&`: the pid of the background job. */
  pid?: number;
  /** True when the shell had died and was restarted before this command ran. */
  restarted?: boolean;
  /** For a background command: the file its output goes to. */
  logFile?: string;
  /** True when nothing was run because a previous command is still running (output says what to do). */
  busy?: boolean;
  /** How long the command (still running, or just finished) has been running, from its start. */
  elapsedMs?: number;
  /** Set when the output was too long for the shell to hold whole: the stretch that fell out of the middle of `output`. */
  omitted?: OmittedStretch;
  /** What a `C-c` did: `interrupt` (SIGINT sent), `killed` (a second C-c: SIGKILL to the foreground processes). */
  interrupted?: 'interrupt' | 'killed';
  /** The first result of a shell started in place of one stopped while idle (see ShellSession.suspend). */
  resumed?: { cwd: string; idleSeconds: number };
}

/** What an idle shell leaves behind to be restored: its directory and the exported variables it changed. */
export interface ShellState {
  cwd: string;
  /** Exported variables added or changed in the shell (server-set values that are unchanged are not kept). */
  env: Record<string, string>;
  /** Server-set variables the shell unset. */
  unset: string[];
}

export interface ShellSession {
  /** Run a command line (or, with `isInput`, send text / keys such as `C-c` to the running command). */
  run(command: string, options: ShellRunOptions & { isInput?: boolean }): Promise<ShellRunResult>;
  /** Set or replace environment variables for following commands (secrets added mid-conversation). */
  setEnv(vars: Record<string, string>, unset?: string[]): Promise<void>;
  /** Interrupt whatever runs now (SIGINT to the foreground process group). */
  interrupt(): Promise<void>;
  /**
   * Kill the shell and its whole process tree: the kill is sent before this returns, the promise
   * settles once the processes have exited (a caller that need not wait for that may go on). Idempotent.
   */
  close(): Promise<void>;
  /**
   * Record the shell's state and close it (an idle conversation frees its processes). null, with
   * nothing closed, while a command runs.
   */
  suspend?(): Promise<ShellState | null>;
  readonly pid: number | undefined;
  readonly alive: boolean;
}

export interface ShellCreateOptions {
  conversationId: string;
  /** Tells apart several shells of one conversation (a subagent's); default: the conversation id. */
  shellId?: string;
  workdir: string;
  env: Record<string, string>;
  /** The conversation's sandbox settings; absent: network on. */
  sandbox?: { network: boolean | 'host' };
  /**
   * Called with the host pid of each process the shell spawns (at creation and at every restart),
   * as soon as it exists: before the shell answers, so a server killed during a slow start still
   * knows what to reap.
   */
  onSpawn?: (pid: number) => void;
  /** The state of the shell this one replaces (it was stopped while idle): restored before the first command, which is told. */
  restore?: { state: ShellState; idleSeconds: number };
  /**
   * Started ahead of the conversation's first run (at its creation): the sandbox's set-up that
   * must see the workdir as the first command finds it (its files given to the agent's uid, when
   * the server is root) waits for the first command. Default false: done before the shell starts.
   */
  ahead?: boolean;
}

export interface ShellFactory {
  create(options: ShellCreateOptions): Promise<ShellSession>;
  /**
   * The server process exits next: every shell this factory started that is still open (those
   * still starting included) is made to end with it, synchronously, with nothing waited for (a
   * SIGKILL, or for a sandbox that dies with its parent, nothing at all). The exits are left to
   * the kernel (the dying processes go to init once the server is gone): a server that waited for
   * a thousand sandboxes to exit would reap them all on its event loop.
   */
  killAllForExit?(): void;
}
