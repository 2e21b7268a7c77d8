import os from 'node:os';
import type { ShellCreateOptions, ShellFactory, ShellSession } from '../../core/tools/shell-session.js';
import { buildCleanEnv, HostProcessLauncher, type ProcessLauncher } from '../process/process-launcher.js';
import { BashShellSession } from './bash-shell-session.js';
import type { SpawnProcess } from '../process/process-spawner.js';
import { WorkdirGuard } from './workdir-guard.js';
import { StartSlots } from './start-slots.js';

export { BashShellSession } from './bash-shell-session.js';

/** Enough to keep whole any output a model would be pointed at, small enough that many shells at once stay cheap. */
export const HELD_OUTPUT_CHARS = 4 * 1024 * 1024;

/** Starts one long-lived bash per conversation (see bash-shell-session.ts), through the launcher (the sandbox). */
export interface BashShellFactoryOptions {
  /** Wraps every spawn (the sandbox hooks in here). Default: HostProcessLauncher. */
  launcher?: ProcessLauncher;
  /** Spawns each bash (the server's ProcessSpawner). Default: the server spawns it itself. */
  spawn?: SpawnProcess;
  /**
   * How much of a command's output a shell holds: its start and end, half each, with what falls
   * between them counted, not kept. The tool executor cuts it for the model and saves it. Default
   * HELD_OUTPUT_CHARS.
   */
  heldOutputChars?: number;
  /** Default `bash` (looked up on the clean PATH). */
  bashPath?: string;
  /** Server variables passed through to the shell (AGENTD_PASS_ENV). */
  passEnv?: readonly string[];
  /** The captured part of the server's environment (PATH, LANG, passEnv values); see buildCleanEnv. */
  hostEnv?: Readonly<Record<string, string | undefined>>;
  /** HOME of the shell; default the workdir. */
  homeDir?: (options: { conversationId: string; workdir: string }) => string;
  /** How long bash may take to answer its first sentinel, once its start has a slot. Default 10 s. */
  startTimeoutMs?: number;
  /** How many shells start at once; the others wait their turn (see StartSlots). Default one per core, at least 2. */
  concurrentStarts?: number;
}

export class BashShellFactory implements ShellFactory {
  /** Every shell started and not yet closed (see killAllForExit). */
  private readonly openShells = new Set<BashShellSession>();
  private readonly startSlots: StartSlots;

  constructor(private readonly options: BashShellFactoryOptions = {}) {
    this.startSlots = new StartSlots(options.concurrentStarts ?? Math.max(2, os.availableParallelism()));
  }

  killAllForExit(): void {
    for (const session of this.openShells) session.killForExit();
    this.openShells.clear();
  }

  async create(options: ShellCreateOptions): Promise<ShellSession> {
    const homeDir = this.options.homeDir?.(options);
    const env = buildCleanEnv({
      workdir: options.workdir,
      ...(homeDir !== undefined && { homeDir }),
      passEnv: this.options.passEnv ?? [],
      ...(this.options.hostEnv !== undefined && { hostEnv: this.options.hostEnv }),
      extra: options.env,
    });
    const launcher = this.options.launcher ?? new HostProcessLauncher();
    const workdirMb = launcher.limits.workdirMb;
    const session = new BashShellSession({
      workdir: options.workdir,
      env,
      launcher,
      ...(this.options.spawn && { spawn: this.options.spawn }),
      ...(workdirMb !== null && { guard: new WorkdirGuard({ workdir: options.workdir, limitMb: workdirMb }) }),
      heldOutputChars: this.options.heldOutputChars ?? HELD_OUTPUT_CHARS,
      bashPath: this.options.bashPath ?? 'bash',
      startTimeoutMs: this.options.startTimeoutMs ?? 10_000,
      ...(options.sandbox !== undefined && { sandbox: options.sandbox }),
      ...(options.onSpawn && { onSpawn: options.onSpawn }),
      ...(options.ahead && { ahead: true }),
      openShells: this.openShells,
      startSlots: this.startSlots,
    });
    await session.start();
    if (options.restore) session.restore(options.restore.state, options.restore.idleSeconds);
    return session;
  }
}

