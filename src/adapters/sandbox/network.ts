import fs from 'node:fs';
import path from 'node:path';
import { CONTROL_FD, tickPipe, tickWait } from './entry-script.js';
import { findInPath, shellWord } from './mounts.js';

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

/** Which helper the server uses (AGENTD_SANDBOX_NETWORK_HELPER): `auto` takes slirp4netns, else pasta. */
export type NetworkHelperChoice = 'auto' | NetworkHelper['kind'];

/**
 * The helper to use: `auto`, slirp4netns first and pasta second; a named one only. Null when none
 * of those is installed.
 *
 * Why slirp4netns first: both give the same network (the internet, no host loopback, no port
 * forwarded), but pasta (Debian 12's passt 2023-03) writes large tables as it starts, where
 * slirp4netns touches little: every networked sandbox pays that in page faults at its start and in
 * memory and descriptors while it lives (figures in bench/RESULTS.md's history). pasta has IPv6 and more
 * throughput; an operator who needs those names it.
 */
export function findNetworkHelper(searchPath: string, choice: NetworkHelperChoice = 'auto', cpuHasAvx2: boolean = hostCpuHasAvx2()): NetworkHelper | null {
  for (const kind of choice === 'auto' ? (['slirp4netns', 'pasta'] as const) : [choice]) {
    const found = findInPath(kind, searchPath);
    if (found !== null) return { kind, path: kind === 'pasta' && cpuHasAvx2 ? (avx2Build(found) ?? found) : found };
  }
  return null;
}

/** The device both helpers open to give a sandbox its network interface. */
export const TUN_DEVICE = '/dev/net/tun';

/**
 * Why an installed helper could not attach to a sandbox: a missing tun device first (a container
 * started without `--device /dev/net/tun`), since then no package would help; else what the probe saw.
 */
export function networkHelperFailure(kind: NetworkHelper['kind'], probeFailure: string | null, tunDevice: string = TUN_DEVICE): string {
  if (!fs.existsSync(tunDevice)) return `${kind} needs ${tunDevice}, which is missing here (in a container, run it with --device ${TUN_DEVICE})`;
  return `${kind} cannot attach to a sandbox here: ${probeFailure}`;
}

/** Why findNetworkHelper found none: no helper the choice allows is installed. */
export function noNetworkHelper(choice: NetworkHelperChoice): string {
  if (choice === 'auto') return 'neither slirp4netns nor pasta (package passt) is installed';
  return `AGENTD_SANDBOX_NETWORK_HELPER=${choice}, but ${choice === 'pasta' ? 'pasta (package passt)' : 'slirp4netns'} is not installed`;
}

/**
 * passt's AVX2 build beside `pasta` (Debian ships `pasta.avx2`), or null. Started as `pasta`
 * on a CPU with AVX2, passt execs that build first thing: one exec more in every sandbox's start,
 * in CPU and in the time before the network comes up (`perf stat` of `pasta --version` against
 * `pasta.avx2 --version` shows it). Named `pasta…`, it still runs as pasta.
 */
function avx2Build(pasta: string): string | null {
  return findInPath(`${path.basename(pasta)}.avx2`, path.dirname(pasta));
}

/** Whether the kernel reports AVX2 (it leaves the flag out when it cannot save the registers' state): passt's own test before it execs its AVX2 build. */
function hostCpuHasAvx2(): boolean {
  try {
    return /^flags\s*:.*\bavx2\b/m.test(fs.readFileSync('/proc/cpuinfo', 'utf8'));
  } catch {
    return false;
  }
}

/** The fd bwrap writes its `--info-fd` JSON to (the sandbox's pid on the host) in the launch. */
export const BWRAP_INFO_FD = 9;

/**
 * The fd bwrap keeps open in the sandbox's init for as long as the sandbox lives (`--sync-fd`): a
 * pipe's writing end, whose reading end the helper's side holds (userModeLaunchScript). End of file
 * there is the sandbox's end, however it ended, whenever the helper started.
 */
export const BWRAP_SYNC_FD = 6;

/**
 * The fd bwrap waits on (`--userns-block-fd`) right after it made the sandbox's user namespace,
 * when the server is not root (see userModeLaunchScript).
 */
export const BWRAP_USERNS_BLOCK_FD = 8;

/** The interface slirp4netns creates; pasta names its own after the host's outbound interface. */
const SLIRP_INTERFACE = 'tap0';

/** slirp4netns's `--ready-fd`: a writing end of the sandbox's wait (NETWORK_WAIT_FD), write-only. */
const SLIRP_READY_FD = 3;

/** How long the sandbox waits for its interface before running the program without network. */
const WAIT_FOR_NETWORK_S = 10;

/**
 * The fd on which the sandbox waits for its network (waitForNetworkScript): a pipe written by
 * slirp4netns once it has set the route; for pasta, closed by the helper's side once it sees the
 * route or the helper gone (userModeLaunchScript).
 */
export const NETWORK_WAIT_FD = 7;

/**
 * The command line that attaches the helper to the network namespace of host pid `$pid`
 * (slirp4netns: and says when it is configured on fd SLIRP_READY_FD).
 * pasta: tap interface configured from the host's addresses and routes (--config-net); the
 * gateway address is not mapped to the host (--no-map-gw); no port forwarded either way
 * (`-t/-u/-T/-U none`: pasta's default `auto` would forward the host's bound ports into the
 * namespace's loopback). As root it keeps uid 0 (`--runas 0`; as "nobody" it may not join the
 * namespace) and is handed the namespace as an open fd: it drops capabilities before it opens
 * the namespace, and with fewer capabilities than the sandbox's init it could not open
 * /proc/PID/ns/net itself. slirp4netns: --disable-host-loopback, no
 * port forwarding unless asked through its API socket (none is given); it parses what the agent
 * sends, so it confines itself once attached as pasta does (`--enable-sandbox`: a mount namespace
 * with only /etc and /run, every capability but binding low ports dropped; `--enable-seccomp`: a
 * syscall filter).
 */
function helperCommand(helper: NetworkHelper, asRoot: boolean): string {
  const bin = shellWord(helper.path);
  if (helper.kind === 'pasta') {
    const common = `${bin} --foreground --quiet --config-net --no-map-gw -t none -u none -T none -U none`;
    return asRoot ? `${common} --runas 0 --netns "/proc/self/fd/$ns" --netns-only` : `${common} --userns "/proc/self/fd/$uns" --netns "/proc/self/fd/$ns"`;
  }
  // --ready-fd: it writes `1` there once the interface, its address and the default route are set:
  // on the sandbox's wait (NETWORK_WAIT_FD), whose reader then goes on (userModeLaunchScript).
  // --exit-fd: it quits at end of file there, the sandbox's end (BWRAP_SYNC_FD).
  const common = `${bin} --configure --mtu=65520 --disable-host-loopback --enable-seccomp --ready-fd=${SLIRP_READY_FD} --exit-fd="$sync"`;
  // --enable-sandbox switches to uid 0 in the sandbox's user namespace, where only the server's own uid is mapped when it is not root.
  return asRoot ? `${common} --enable-sandbox "$pid" ${SLIRP_INTERFACE}` : `${common} --userns-path="/proc/self/fd/$uns" --netns-type=path "/proc/self/fd/$ns" ${SLIRP_INTERFACE}`;
}

/**
 * The end of the launch script of a `user_mode` sandbox (bwrap-launcher.ts), run as `bash -c
 * <launch> agentd-net bwrap --info-fd 9 <args...>`. It forks the helper's side, then execs bwrap:
 * the spawned process is bwrap's monitor, as in the other modes, and its exit is the program's.
 * The helper's side (a subshell, the monitor's child, which bwrap reaps and otherwise ignores)
 * reads the sandbox's pid from bwrap's info fd, waits for the namespace's loopback and becomes
 * slirp4netns attached to that pid's network namespace, which quits at the sandbox's end: end of
 * file on the pipe whose other end only the sandbox's init holds (bwrap's --sync-fd), even when
 * the sandbox ended before the helper started. No bash stays beside such a sandbox (the launch
 * used to wait for bwrap as the helper's parent, to kill it after). pasta has no such option and
 * says nothing when the network is up: its side starts it, watches for the route, then waits for
 * that end of file and kills it. Every helper also has a parent-death signal, and all of them
 * stay in the spawned process group with SIGINT ignored, like bwrap in the other modes; a SIGKILL
 * to the group ends them all.
 *
 * Not root, bwrap gives the sandbox a user namespace of its own,
 * and left to itself it maps uid 0 there (to mount `--dev`'s devpts) and then makes a second one
 * inside it that maps the server's uid back for the program. The network namespace belongs to the
 * first, and from the sandbox's pid only the second is reachable: a helper that joined it could not
 * join the network namespace (setns: EPERM), and such sandboxes had no network. So bwrap waits
 * (`--userns-block-fd`) right after it made the first, with its uid and gid maps left to the
 * helper's side: it writes them as the one mapping the program gets (the server's ids to themselves;
 * bwrap then needs no second namespace, and devpts mounts all the same), opens the sandbox's user
 * and network namespaces, lets bwrap go on, and hands the helper both as descriptors.
 */
export function userModeLaunchScript(options: { helper: NetworkHelper; asRoot: boolean; forBwrap?: readonly number[]; programs: { setpriv: string; sleep: string } }): string {
  const { setpriv, sleep } = options.programs;
  const fd = BWRAP_INFO_FD;
  // Descriptors the launch opened for bwrap alone (the copied /etc files, the seccomp program):
  // bwrap's, never the helper's.
  const forBwrapOnly = (options.forBwrap ?? []).map((n) => ` ${n}<&-`).join('');
  const ids = options.asRoot ? null : { uid: process.geteuid?.() ?? 0, gid: process.getegid?.() ?? 0 };
  const slirp = options.helper.kind === 'slirp4netns';
  const helper = `${shellWord(setpriv)} --pdeathsig KILL -- ${helperCommand(options.helper, options.asRoot)}`;
  // The monitor is this shell's pid ($$, in the subshell too) once the exec below has run.
  const monitorGone = 'kill -0 "$$" 2>/dev/null || exit 0';
  return [
    "trap '' INT",
    // bwrap writes on a pipe (tickPipe's, read-write); the helper's side reads it through a
    // read-only end of its own once bwrap has the other: a bwrap that ends before it writes gives end of file.
    `${tickPipe('p')} || exit 125`,
    // The sandbox's wait for its network (NETWORK_WAIT_FD, read-only in bwrap): the helper's side
    // holds the only writing end. Nobody writes to it until the wait is over, so it is also that
    // side's millisecond tick between two looks.
    `${tickPipe('nw')} || exit 125`,
    // Not root: bwrap waits for a byte on another pipe, through a read-only end of its own (were the helper's side gone first, end of file lets it go on).
    ...(ids ? [`${tickPipe('b')} || exit 125`] : []),
    // The sandbox's end (BWRAP_SYNC_FD): the init holds the only writing end; the helper's side a reading one.
    `${tickPipe('s')} || exit 125`,
    // The helper's side holds none of the sandbox's descriptors (the shell's channels, the
    // watchdog's control channel), and its output goes nowhere: the stderr is the program's.
    `( exec </dev/null >/dev/null 2>&1 3<&- ${CONTROL_FD}<&-${forBwrapOnly}`,
    `  exec ${fd}</proc/self/fd/"$p" {p}>&- {sync}</proc/self/fd/"$s" {s}>&-`,
    `  IFS= read -r -d '}' -t 30 -u ${fd} info`,
    `  exec ${fd}<&-`,
    '  pid=',
    '  [[ $info =~ \\"child-pid\\":\\ *([0-9]+) ]] && pid=${BASH_REMATCH[1]}',
    ...(ids
      ? [
          // The server's ids mapped to themselves, then bwrap goes on whatever that gave (without its maps it stops: no sandbox starts).
          '  uns= ns=',
          `  [ -n "$pid" ] && { echo '${ids.uid} ${ids.uid} 1' >"/proc/$pid/uid_map" && echo deny >"/proc/$pid/setgroups" && echo '${ids.gid} ${ids.gid} 1' >"/proc/$pid/gid_map" && exec {uns}<"/proc/$pid/ns/user" {ns}<"/proc/$pid/ns/net"; }`,
          '  { printf x >&"$b"; exec {b}>&-; }',
        ]
      : []),
    // No pid (bwrap failed): this side ends, and with it the sandbox's wait.
    `  [ -n "$pid" ]${ids ? ' && [ -n "$ns" ]' : ''} || exit 0`,
    // bwrap brings the namespace's loopback up itself (RTM_NEWADDR, then link up) and dies if
    // the address already exists: the helper, which brings lo up too, starts once it is done.
    // Read by bash itself (a grep per look took as long as the rest of the look), every
    // millisecond (a `sleep 0.01` between looks overslept, and was a process each).
    '  lo_up() { lo=; while read -r line; do [[ $line == *127.0.0.1* ]] && lo=1; done <"/proc/$pid/net/fib_trie"; [[ -n $lo ]]; }',
    `  lo_up || for ((i = 0; i < 5000; i++)); do ${tickWait('nw', sleep)}; lo_up && break; ${monitorGone}; done`,
    ...(ids ? [] : ['  exec {ns}<"/proc/$pid/ns/net"']),
    ...(slirp
      ? [
          // slirp4netns gets a write-only end of the sandbox's wait, where it writes `1` once it has
          // set the namespace's route (--ready-fd): the sandbox goes on at once; and once it is
          // gone, the wait ends (end of file) too.
          `  exec ${helper} ${SLIRP_READY_FD}>/proc/self/fd/"$nw" {nw}>&-`,
        ]
      : [
          `  ${helper} {nw}>&- {sync}<&- &`,
          '  helper=$!',
          // The sandbox waits until its default route is there (read by bash itself, as lo above)
          // or the helper is gone: a helper that cannot attach ends the wait at once, where the
          // sandbox waited out its 10 s and start-up's probe with it.
          '  route_up() { up=; while read -r _ dest _; do [[ $dest == 00000000 ]] && up=1; done <"/proc/$pid/net/route"; [[ -n $up ]]; }',
          `  for ((i = 0; i < ${WAIT_FOR_NETWORK_S * 1000}; i++)); do route_up && break; kill -0 "$helper" || break; ${monitorGone}; ${tickWait('nw', sleep)}; done`,
          `  exec {nw}>&- {ns}<&-${ids ? ' {uns}<&-' : ''}`,
          // Until the sandbox's end; then pasta goes, which does not quit by itself.
          '  read -r -u "$sync"',
          '  kill -KILL "$helper"',
        ]),
    ') &',
    ids
      ? `exec "$@" ${fd}>&"$p" ${BWRAP_SYNC_FD}>&"$s" ${BWRAP_USERNS_BLOCK_FD}</proc/self/fd/"$b" ${NETWORK_WAIT_FD}</proc/self/fd/"$nw" {p}>&- {s}>&- {b}>&- {nw}>&-`
      : `exec "$@" ${fd}>&"$p" ${BWRAP_SYNC_FD}>&"$s" ${NETWORK_WAIT_FD}</proc/self/fd/"$nw" {p}>&- {s}>&- {nw}>&-`,
  ].join('\n');
}

/**
 * Inside a `user_mode` sandbox, before the program's first command: wait (at most 10 s) until the
 * namespace has an IPv4 default route (pasta and slirp4netns both set one), so that command
 * already has the network. Prepended to the entry script for a one-off program; the shell's
 * first lines instead (bwrap-launcher.ts), run by the agent's bash, which starts meanwhile. The
 * wait is one blocking read on NETWORK_WAIT_FD: slirp4netns writes `1` there once it has set the
 * route; for pasta the helper's side outside closes it once it sees the route or the helper gone
 * (userModeLaunchScript); the fd is closed after.
 */
export function waitForNetworkScript(): string {
  const fd = NETWORK_WAIT_FD;
  return [
    'agentd_route() { agentd_up=; while read -r agentd_if agentd_dest agentd_rest; do [ "$agentd_dest" = 00000000 ] && agentd_up=1; done </proc/net/route; [ -n "$agentd_up" ]; }',
    'if ! agentd_route; then',
    // A byte or end of file (no writer left) without the route: the helper, or the side watching it, ended first; past the time: neither.
    `  read -r -N 1 -t ${WAIT_FOR_NETWORK_S} -u ${fd} 2>/dev/null; agentd_s=$?`,
    `  if agentd_route; then :; elif [ "$agentd_s" -le 128 ]; then echo '[agentd: the sandbox network helper ended before the network came up; running without network.]' >&2`,
    `  else echo '[agentd: the sandbox network did not come up; running without network.]' >&2; fi`,
    'fi',
    `{ exec ${fd}<&-; } 2>/dev/null`,
    'unset -f agentd_route; unset agentd_up agentd_if agentd_dest agentd_rest agentd_s REPLY',
  ].join('\n');
}
