import { findInPath } from './sandbox-mounts.js';

/**
 * The network a sandboxed process gets:
 * - `user_mode`: a network namespace of its own whose only way out is a user-mode network stack
 *   (pasta, else slirp4netns) running on the host: the internet yes; the host's loopback (the
 *   server, an LLM proxy, a database on 127.0.0.1) no, and no port is forwarded into it;
 * - `none`: a network namespace with only a loopback interface of its own;
 * - `host`: the host's network namespace, loopback included (only when the operator allows it).
 */
export type SandboxNetwork = 'user_mode' | 'none' | 'host';

/** The user-mode network stack found at start-up. */
export interface NetworkHelper {
  kind: 'pasta' | 'slirp4netns';
  path: string;
}

/** pasta (package passt) first, slirp4netns second; null when neither is installed. */
export function findNetworkHelper(searchPath: string): NetworkHelper | null {
  for (const kind of ['pasta', 'slirp4netns'] as const) {
    const found = findInPath(kind, searchPath);
    if (found !== null) return { kind, path: found };
  }
  return null;
}

/**
 * First line of a script run under `setpriv --pdeathsig KILL` as `bash -c <script> name <parent
 * pid> ...`: with the parent-death signal armed, go on only if the parent is still alive (a
 * parent that died before the signal was armed would never send it).
 */
export const PARENT_GUARD_PREFIX = '[ "$PPID" = "$1" ] || exit 125';

/** The fd bwrap writes its `--info-fd` JSON to (the sandbox's pid on the host) in the wrapper. */
export const BWRAP_INFO_FD = 9;

/** The interface slirp4netns creates; pasta names its own after the host's outbound interface. */
const SLIRP_INTERFACE = 'tap0';

/** How long the sandbox waits for its interface before running the program without network. */
const WAIT_FOR_NETWORK_S = 10;

/**
 * The command line that attaches the helper to the network namespace of host pid `$pid`.
 * pasta: tap interface configured from the host's addresses and routes (--config-net); the
 * gateway address is not mapped to the host (--no-map-gw); no port forwarded either way
 * (`-t/-u/-T/-U none`: pasta's default `auto` would forward the host's bound ports into the
 * namespace's loopback). As root it keeps uid 0 (`--runas 0`; as "nobody" it may not join the
 * namespace) and is handed the namespace as an open fd: it drops capabilities before it opens
 * the namespace, and with fewer capabilities than the sandbox's init it could not open
 * /proc/PID/ns/net itself. slirp4netns: --disable-host-loopback, no
 * port forwarding unless asked through its API socket (none is given).
 */
function helperCommand(helper: NetworkHelper, asRoot: boolean): string {
  const bin = shellQuote(helper.path);
  if (helper.kind === 'pasta') {
    const common = `${bin} --foreground --quiet --config-net --no-map-gw -t none -u none -T none -U none`;
    return asRoot ? `${common} --runas 0 --netns "/proc/self/fd/$ns" --netns-only` : `${common} "$pid"`;
  }
  const userns = asRoot ? '' : ' --userns-path="/proc/$pid/ns/user"';
  return `${bin} --configure --mtu=65520 --disable-host-loopback${userns} "$pid" ${SLIRP_INTERFACE}`;
}

/**
 * The script the server spawns for a `user_mode` sandbox: `bash -c <script> agentd-net bwrap
 * --info-fd 9 <args...>`. It forks the attacher, then execs bwrap in its own place, so bwrap is
 * the server's child and dies with it (--die-with-parent, as in the other modes), taking the
 * sandbox along. The attacher (with a parent-death signal armed, and a guard that its parent is
 * still the one it was forked by) reads the sandbox's pid from bwrap's info fd, attaches the
 * helper to that pid's network namespace and waits; when bwrap ends, the attacher is killed and
 * the helper (whose parent it is, with a parent-death signal of its own) with it. All of them
 * stay in the spawned process group with SIGINT ignored; a SIGKILL to the group ends them all.
 */
export function userModeWrapperScript(options: { helper: NetworkHelper; asRoot: boolean; serverPid: number }): string {
  const fd = BWRAP_INFO_FD;
  const attacher = [
    `exec ${fd}<"$2"`,
    'rm -rf -- "$(dirname -- "$2")"',
    `IFS= read -r -d '}' -t 30 -u ${fd} info`,
    `exec ${fd}<&-`,
    'if [[ $info =~ \\"child-pid\\":\\ *([0-9]+) ]]; then',
    '  pid=${BASH_REMATCH[1]}',
    // bwrap brings the namespace's loopback up itself (RTM_NEWADDR, then link up) and dies if
    // the address already exists: the helper, which brings lo up too, starts once it is done.
    '  for ((i = 0; i < 500; i++)); do grep -qs "127\\.0\\.0\\.1" "/proc/$pid/net/fib_trie" && break; kill -0 "$1" 2>/dev/null || exit 0; sleep 0.01; done',
    '  exec {ns}<"/proc/$pid/ns/net"',
    `  setpriv --pdeathsig KILL -- ${helperCommand(options.helper, options.asRoot)} </dev/null >/dev/null 2>&1 &`,
    '  exec {ns}<&-',
    '  wait',
    'fi',
  ].join('\n');
  return [
    "trap '' INT",
    'd=$(mktemp -d "${TMPDIR:-/tmp}/agentd-net.XXXXXX") && mkfifo -m 600 "$d/info" || exit 125',
    // In a session (and process group) of its own: the chain from bwrap down to the program stays
    // the only one in the spawned group (bash-process.ts follows it); it dies with bwrap anyway.
    `setpriv --pdeathsig KILL -- setsid bash -c ${shellQuote(`${PARENT_GUARD_PREFIX}\n${attacher}`)} agentd-attach "$$" "$d/info" </dev/null >/dev/null 2>&1 &`,
    // Opening the FIFO waits for the attacher; then, as in the launch script, bwrap is started
    // only while the server (this process's parent) is still there.
    `exec ${fd}>"$d/info"`,
    `[ "$PPID" = "${options.serverPid}" ] || exit 125`,
    'exec "$@"',
  ].join('\n');
}

/**
 * Prepended to the entry script inside a `user_mode` sandbox: wait (at most 10 s) until the
 * namespace has an IPv4 default route (pasta and slirp4netns both set one), so the program's first command already has the network.
 */
export function waitForNetworkScript(): string {
  return [
    `for ((agentd_i = 0; agentd_i < ${WAIT_FOR_NETWORK_S * 20}; agentd_i++)); do`,
    '  agentd_route=0; while read -r agentd_if agentd_dest agentd_rest; do [ "$agentd_dest" = 00000000 ] && agentd_route=1; done </proc/net/route',
    '  [ "$agentd_route" = 1 ] && break',
    '  sleep 0.05',
    'done',
    `[ "$agentd_route" = 1 ] || echo '[agentd: the sandbox network did not come up; running without network.]' >&2`,
    'unset agentd_i agentd_route agentd_if agentd_dest agentd_rest',
  ].join('\n');
}

function shellQuote(value: string): string {
  return `'${value.replace(/'/g, `'\\''`)}'`;
}
