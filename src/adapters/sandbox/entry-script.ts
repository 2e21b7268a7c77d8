import { ulimitStatements, type ResourceLimits } from './resource-limits.js';
import { shellWord } from './mounts.js';

/**
 * The first program inside the bwrap sandbox (`bash -c <script> agentd-sandbox <program...>`),
 * run by the sandbox's init as pid 2. It
 * 0. closes every descriptor it did not expect (keepFds): whatever the server itself inherited
 *    without close-on-exec (a test runner's or a supervisor's pipe, seen as fd 251) passed on
 *    through the spawner, bwrap and the init to the agent's every process, and to the watchdog;
 * 1. starts the watchdog: a subshell (SIGINT ignored, like bwrap's monitor) that uses bash
 *    builtins only, so it needs no fork. It SIGKILLs every process of the sandbox when the
 *    program is gone (normally bwrap has torn the sandbox down by then; not when the server died
 *    while bwrap was starting, before it could arm --die-with-parent: then the sandbox's init
 *    would wait forever for the agent's leftover background processes), and when the pid
 *    namespace holds the process limit's worth of tasks, after printing a note: the fork bomb
 *    ends with its command. When the server runs as root the watchdog stays root: the agent can
 *    neither signal nor trace it, and root is exempt from the limit it enforces.
 *    With a control channel (`control`: the server's pipe on fd 4, the conversation's shell) the
 *    watchdog sleeps in a blocking read on it: the server writes `r` when a command starts and
 *    `i` when it ends, and only in between does the watchdog count tasks, twice a second. An
 *    idle shell costs no wakeup at all (its background jobs stay under the kernel's limits, the
 *    cgroup's pids.max or RLIMIT_NPROC, without the note). End of file on the channel (the
 *    server closed it when the program ended, or the server is gone) stops the sandbox.
 *    Without one (a one-off command) it wakes twice a second while the command lives.
 * 2. sets the rlimits (soft = hard, the agent cannot raise them);
 * 3. resets SIGINT (ignored by bwrap's monitor, see bwrap-launcher.ts) and execs the program, as
 *    an unprivileged uid when the server is root (setpriv), keeping its pid: the program is the
 *    init's only child. The program holds no capability at all: setpriv empties the inheritable,
 *    ambient and bounding sets, the uid switch clears the permitted and effective ones, and
 *    no_new_privs keeps any set-id or file-capability program from giving one back.
 */
export interface SandboxEntryOptions {
  limits: ResourceLimits;
  /** false when a cgroup limits the sandbox's memory: no per-process RLIMIT_AS then. Default true. */
  addressSpace?: boolean;
  /** The uid/gid the program runs as (server is root); null: the server's own user. */
  runAs: { uid: number; gid: number } | null;
  /** The watchdog reads the server's control channel on CONTROL_FD (see above). Default false. */
  control?: boolean;
  /** env and setpriv, by absolute path (sandbox/mounts.ts: sandboxPrograms). */
  programs: { env: string; setpriv: string };
  /**
   * The descriptors the sandbox keeps (step 0 above); every other one is closed. Default 0-2, and
   * with `control` also 3 (the shell's command channel, shell/bash-protocol.ts) and CONTROL_FD.
   */
  keepFds?: readonly number[];
}

/** The descriptor of the control channel (a pipe from the server), inside the launch and the sandbox. */
export const CONTROL_FD = 4;

/** What the program keeps of root's powers when it runs as its own uid: nothing. */
const KEPT_CAPABILITIES = '-all';

/** The watchdog stops the sandbox this many tasks before the limit (its own and the init count). */
const WATCHDOG_MARGIN = 2;

export function sandboxEntryScript(options: SandboxEntryOptions): string {
  const processes = options.limits.processes;
  const atLimit =
    processes === null
      ? ''
      : `    t=(/proc/[0-9]*/task/[0-9]*)\n    if (( \${#t[@]} >= ${Math.max(1, processes - WATCHDOG_MARGIN)} )); then printf '\\n%s\\n' '[agentd: the sandbox reached its limit of ${processes} processes (AGENTD_LIMIT_PROCESSES); every process in it was stopped.]'; break; fi\n`;
  const keep = options.keepFds ?? [0, 1, 2, ...(options.control ? [3, CONTROL_FD] : [])];
  const lines = [closeOtherFds(keep), ...(options.control ? controlledWatchdog(atLimit) : pollingWatchdog(atLimit))];
  const limits = ulimitStatements(options.limits, { addressSpace: options.addressSpace ?? true });
  if (limits !== '') lines.push(limits);
  const runAs = options.runAs
    ? `${shellWord(options.programs.setpriv)} --reuid=${options.runAs.uid} --regid=${options.runAs.gid} --clear-groups --inh-caps=${KEPT_CAPABILITIES} --ambient-caps=${KEPT_CAPABILITIES} --bounding-set=${KEPT_CAPABILITIES} --no-new-privs `
    : '';
  lines.push(`exec ${shellWord(options.programs.env)} --default-signal=INT ${runAs}-- "$@"`);
  return lines.join('\n');
}

/**
 * A bash statement that closes every descriptor of the shell but `keep`. The list is read from
 * /proc/self/fd (the sandbox's own /proc) before the first close; the directory's own descriptor
 * is in it and already closed by then, hence the silenced error of each close.
 */
export function closeOtherFds(keep: readonly number[]): string {
  const kept = keep.map((fd) => `${fd}`).join('|');
  return `for agentd_fd in /proc/self/fd/*; do agentd_fd=\${agentd_fd##*/}; case $agentd_fd in ${kept}) ;; *) { exec {agentd_fd}<&-; } 2>/dev/null ;; esac; done; unset agentd_fd`;
}

/**
 * A bash statement that opens `{name}` read-write on a pipe nobody writes to: `read -t T -u
 * "$name"` on it waits T seconds without starting a process (`sleep` is one; a FIFO made with
 * `mkfifo` and removed with `rm` were two more in every sandbox's start). Opened again
 * read-write through /dev/fd (a real open on Linux, not a dup), it never reaches end of file.
 *
 * The pipe is a here-string's: bash 5.1 and later hand a short one over as a pipe of its own,
 * the text already in it and its writing end closed, with no process. Its newline
 * is read, and that first descriptor closed. An older bash gives a temporary file instead (not a
 * pipe: `-p` says so), and then the pipe is a process substitution's, as it always was before: a
 * fork (a launch made two or three of them, the one-off's watchdog one), its process,
 * bash running `:`, ending at once and reaped as any child. No `wait "$!"` for that process: `$!`
 * is not always set by a process substitution, and in the wrapper it then named bwrap, which the
 * wait waited for (a hang seen once in 800 starts).
 */
export function tickPipe(name: string): string {
  const text = 'agentd_text';
  const fromText = `exec {${text}}<<<'' && [[ -p /dev/fd/$${text} ]] && exec {${name}}<>/dev/fd/$${text} && read -r -u "$${name}" && exec {${text}}<&-`;
  const fromProcess = `{ [[ -z $${text} ]] || exec {${text}}<&-; exec {${name}}<> <(:); }`;
  return `{ { ${fromText}; } || ${fromProcess}; unset ${text}; [[ -n $${name} ]]; } 2>/dev/null`;
}

/**
 * A bash statement that waits a millisecond on tickPipe `name`; if that pipe could not be made
 * (the read fails at once rather than timing out) it runs `sleep` (its absolute path) instead.
 */
export function tickWait(name: string, sleep: string): string {
  return `read -t 0.001 -u "$${name}"; (( $? > 128 )) || ${shellWord(sleep)} 0.01`;
}

/** One-off commands: the watchdog wakes twice a second while the program lives. */
function pollingWatchdog(atLimit: string): string[] {
  return [
    // The program keeps this shell's pid (exec below): the watchdog knows it as $program.
    'program=$$',
    `if ! ${tickPipe('tick')}; then echo "agentd sandbox: cannot start its watchdog" >&2; exit 126; fi`,
    '( exec 0</dev/null 2>/dev/null 3<&- 4<&- 5<&- 6<&- 7<&- 8<&- 9<&-; shopt -s nullglob',
    '  while kill -0 "$program"; do',
    '    read -t 0.5 -u "$tick"',
    `${atLimit}  done`,
    '  kill -KILL -1 ) &',
    'exec {tick}<&-',
  ];
}

/**
 * The shell: the watchdog blocks on the control channel; `r` (a command runs) makes it count
 * tasks twice a second until `i` (idle); end of file (or an error) ends the sandbox.
 */
function controlledWatchdog(atLimit: string): string[] {
  const fd = CONTROL_FD;
  return [
    'program=$$',
    `if ! { true <&${fd}; } 2>/dev/null; then echo "agentd sandbox: no control channel for its watchdog" >&2; exit 126; fi`,
    `( exec 0</dev/null 2>/dev/null 3<&- 5<&- 6<&- 7<&- 8<&- 9<&-; shopt -s nullglob; busy=`,
    '  while :; do',
    `    if [[ -n $busy ]]; then read -r -n 1 -t 0.5 -u ${fd} c; else read -r -n 1 -u ${fd} c; fi`,
    '    s=$?',
    '    if (( s == 0 )); then [[ $c == r ]] && busy=1; [[ $c == i ]] && busy=; elif (( s <= 128 )); then break; fi',
    '    kill -0 "$program" || break',
    `${atLimit}  done`,
    '  kill -KILL -1 ) &',
    // The program and everything it starts never see the channel.
    `exec ${fd}<&-`,
  ];
}
