import { ulimitStatements, type ResourceLimits } from './resource-limits.js';

/**
 * The first program inside the bwrap sandbox (`bash -c <script> agentd-sandbox <program...>`),
 * run by the sandbox's init as pid 2. It
 * 1. starts the watchdog: a subshell (SIGINT ignored, like bwrap's monitor) that wakes twice a
 *    second and uses bash builtins only, so it needs no fork. It SIGKILLs every process of the
 *    sandbox when the program is gone (normally bwrap has torn the sandbox down by then; not when
 *    the server died while bwrap was starting, before it could arm --die-with-parent: then the
 *    sandbox's init would wait forever for the agent's leftover background processes), and when
 *    the pid namespace holds the process limit's worth of tasks, after printing a note: the
 *    fork bomb ends with its command. When the server runs as root the watchdog stays root: the
 *    agent can neither signal nor trace it, and root is exempt from the limit it enforces.
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
}

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
  const lines = [
    // The program keeps this shell's pid (exec below): the watchdog knows it as $program.
    'program=$$ w=/tmp/.agentd-watchdog-$$',
    'if ! { mkfifo -m 600 "$w" && exec {tick}<>"$w" && rm -f -- "$w"; }; then echo "agentd sandbox: cannot start its watchdog" >&2; exit 126; fi',
    '( exec 0</dev/null 2>/dev/null 3<&- 4<&- 5<&- 6<&- 7<&- 8<&- 9<&-; shopt -s nullglob',
    '  while kill -0 "$program"; do',
    '    read -t 0.5 -u "$tick"',
    `${atLimit}  done`,
    '  kill -KILL -1 ) &',
    'exec {tick}<&-',
  ];
  const limits = ulimitStatements(options.limits, { addressSpace: options.addressSpace ?? true });
  if (limits !== '') lines.push(limits);
  const runAs = options.runAs
    ? `setpriv --reuid=${options.runAs.uid} --regid=${options.runAs.gid} --clear-groups --inh-caps=${KEPT_CAPABILITIES} --ambient-caps=${KEPT_CAPABILITIES} --bounding-set=${KEPT_CAPABILITIES} --no-new-privs `
    : '';
  lines.push(`exec env --default-signal=INT ${runAs}-- "$@"`);
  return lines.join('\n');
}
