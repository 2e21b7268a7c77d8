import type { CommandResult, CommandRunner } from '../../core/commands/command-runner.js';
import { OutputWindow, markedText } from '../shell/output-window.js';
import { buildCleanEnv, type ProcessLauncher } from './process-launcher.js';
import { descendantsByChildren, descendantsOf, listProcesses, signalQuietly } from './process-tree.js';
import { WorkdirGuard } from '../shell/workdir-guard.js';
import { lazyModule } from '../../perf/lazy-module.js';

/** execa (~100 modules) loads at the first command, not at start-up. */
const loadExeca = lazyModule(() => import('execa'));

const KILL_GRACE_MS = 1_000;

/** Closes every descriptor above stderr; a line of its own, so that a syntax error in the command is quoted without it. */
const CLOSE_INHERITED = 'for agentd_fd in /proc/self/fd/*; do agentd_fd=${agentd_fd##*/}; [[ $agentd_fd == [0-9]* && -e /proc/self/fd/$agentd_fd ]] && (( agentd_fd > 2 )) && exec {agentd_fd}>&-; done; unset agentd_fd\n';

/**
 * Runs `bash --norc --noprofile -c <command>` through the ProcessLauncher (so the sandbox
 * applies), in a process group of its own; on timeout the whole tree gets SIGTERM, then SIGKILL
 * after a short grace, so a child that ignores SIGTERM still dies. Output is kept within a
 * bounded window per stream.
 *
 * The command runs as written, whoever wrote the workdir: a `bash -c` whose stdin is a socket
 * (child_process's pipes are socketpairs) takes itself for a remote shell and runs ~/.bashrc,
 * and HOME is the workdir by default, so an agent's `.bashrc` with `exit 0` made a blocking hook
 * (or a client's check over POST /commands) succeed without running. Hence no startup file, no
 * $BASH_ENV or $ENV (read by every non-interactive bash the command starts), and, for hooks, a
 * HOME outside the workdir (`homeDir`). And only stdin, stdout and stderr: the shell closes
 * whatever else it was handed (a sandbox's set-up can leave a pipe open) before the command.
 */
export class ExecaCommandRunner implements CommandRunner {
  constructor(private readonly options: { launcher: ProcessLauncher; maxOutputChars?: number; passEnv?: readonly string[]; hostEnv?: Readonly<Record<string, string | undefined>> }) {}

  async run(options: { command: string; cwd: string; workdir: string; env: Record<string, string>; timeoutMs: number; sandbox?: { network: boolean | 'host' }; stdin?: string; homeDir?: string }): Promise<CommandResult> {
    const { execa } = await loadExeca();
    const limit = this.options.maxOutputChars ?? 100_000;
    const env = buildCleanEnv({ workdir: options.workdir, passEnv: this.options.passEnv ?? [], extra: options.env, ...(this.options.hostEnv ? { hostEnv: this.options.hostEnv } : {}) });
    // Applied after the explicit variables: a secret named HOME does not move it back.
    if (options.homeDir !== undefined) env.HOME = options.homeDir;
    delete env.BASH_ENV;
    delete env.ENV;
    const sandbox = { workdir: options.workdir, network: options.sandbox?.network ?? true };
    const spec = this.options.launcher.prepare({ command: 'bash', args: ['--norc', '--noprofile', '-c', CLOSE_INHERITED + options.command], cwd: options.cwd, env, sandbox });
    const stdout = new OutputWindow(limit);
    const stderr = new OutputWindow(limit);
    const started = performance.now();
    const child = execa(spec.command, spec.args, {
      cwd: spec.cwd,
      env: spec.env,
      extendEnv: false,
      detached: true,
      ...(options.stdin !== undefined ? { input: options.stdin } : { stdin: 'ignore' as const }),
      buffer: false,
      reject: false,
      encoding: 'utf8',
    });
    child.stdout?.setEncoding('utf8').on('data', (chunk: string) => stdout.append(chunk));
    child.stderr?.setEncoding('utf8').on('data', (chunk: string) => stderr.append(chunk));

    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      killTree(child.pid, 'SIGTERM');
      setTimeout(() => killTree(child.pid, 'SIGKILL'), KILL_GRACE_MS).unref();
    }, options.timeoutMs);
    const workdirMb = this.options.launcher.limits.workdirMb;
    let stoppedByGuard = false;
    const stopGuard =
      workdirMb === null
        ? undefined
        : new WorkdirGuard({ workdir: options.workdir, limitMb: workdirMb }).watch(
            (message) => {
              stoppedByGuard = true;
              stderr.append(`\n${message}\n`);
              killTree(child.pid, 'SIGKILL');
            },
            { processes: () => (child.pid === undefined ? [] : [child.pid, ...descendantsByChildren(child.pid)]) },
          );
    const result = await child;
    stopGuard?.();
    clearTimeout(timer);
    // Whatever the command left running in its group does not outlive it.
    killTree(child.pid, 'SIGKILL');
    spec.release?.();
    const out = stdout.take();
    const err = stderr.take();
    return {
      // Stopped by the workdir guard: SIGKILL, as a shell reports it.
      exit_code: timedOut ? null : (result.exitCode ?? (stoppedByGuard ? 137 : null)),
      stdout: markedText(out),
      stderr: markedText(err),
      execution_time_s: Math.round(performance.now() - started) / 1000,
      timed_out: timedOut,
      truncated: out.omitted !== undefined || err.omitted !== undefined,
    };
  }
}

function killTree(pid: number | undefined, signal: NodeJS.Signals): void {
  if (pid === undefined) return;
  for (const descendant of descendantsOf(pid, listProcesses())) signalQuietly(descendant, signal);
  signalQuietly(-pid, signal);
}
