import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { BwrapProcessLauncher } from './bwrap-launcher.js';
import { HostProcessLauncher, type ProcessLauncher } from '../process/process-launcher.js';
import type { ResourceLimits } from './resource-limits.js';
import { detectSandboxCgroups } from './cgroups.js';
import { findInPath } from './mounts.js';
import { sandboxUid } from './identity.js';
import { findNetworkHelper, networkHelperFailure, noNetworkHelper, type NetworkHelper, type NetworkHelperChoice } from './network.js';

export type RequestedSandbox = 'auto' | 'bwrap' | 'none';

export interface LauncherSelection {
  launcher: ProcessLauncher;
  /** Set when `auto` fell back to no sandbox: why bwrap could not be used. */
  fallbackReason: string | null;
  /** With bwrap: why no cgroup limits the whole sandbox (null when one does, or no limit asks for one). */
  cgroupReason: string | null;
  /** bwrap: the user-mode network stack behind `network: true`; null: none works here. */
  networkHelper: NetworkHelper | null;
  /** bwrap without a working network stack: why (`network: true` then means no network). */
  networkFallbackReason: string | null;
  /** With networkFallbackReason: true when no helper is installed (installing one is the fix), false when one is but cannot attach. */
  networkHelperMissing: boolean;
}

/** What a container needs for bubblewrap to run in it (docs/deploy.md), and the explicit way out. */
export const CONTAINER_SANDBOX_OPTIONS =
  'In a container, give bubblewrap what it needs: podman run --security-opt unmask=/proc/* --device /dev/net/tun; ' +
  'docker run --security-opt seccomp=deploy/seccomp-agentd.json --security-opt systempaths=unconfined --device /dev/net/tun ' +
  '(plus --security-opt apparmor=unconfined on AppArmor hosts); see docs/deploy.md. ' +
  'To run the agent unsandboxed instead, with access to everything the server can read, set AGENTD_SANDBOX=none';

/** AGENTD_SANDBOX=bwrap, but bubblewrap cannot run here: a start-up error, never a silent downgrade. */
export class SandboxUnavailableError extends Error {
  constructor(reason: string) {
    super(`AGENTD_SANDBOX=bwrap, but bubblewrap cannot run here: ${reason}. ${CONTAINER_SANDBOX_OPTIONS}`);
    this.name = 'SandboxUnavailableError';
  }
}

export interface SelectLauncherOptions {
  requested: RequestedSandbox;
  limits: ResourceLimits;
  /** The server's PATH (from config): where bwrap and the agent's tools are looked up. */
  searchPath: string;
  hiddenPaths: readonly string[];
  extraReadOnlyPaths: readonly string[];
  stateDir: string;
  /** Where the workdirs agentd creates lie: only those are given to a uid of their own (BwrapLauncherOptions). */
  createdWorkdirBase?: string;
  /** Whole-sandbox limits with cgroups when the host allows (default true). */
  useCgroups?: boolean;
  /** The user-mode network stack behind `network: true` (AGENTD_SANDBOX_NETWORK_HELPER; default auto: see findNetworkHelper). */
  networkHelper?: NetworkHelperChoice;
  /** A workdir the user brought cannot be id-mapped (BwrapLauncherOptions). */
  onIdmapRefused?: (workdir: string, reason: string) => void;
}

const PROBE_TIMEOUT_MS = 10_000;
/** Tasks a conversation's cgroup allows beyond AGENTD_LIMIT_PROCESSES, for the sandboxes' own plumbing. */
const CGROUP_PIDS_HEADROOM = 16;
const DEFAULT_SEARCH_PATH = '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin';

/**
 * Picks the launcher at start-up. `none`: the host. `bwrap` and `auto`: bubblewrap, after one
 * probe that runs a trivial command through the very launcher the agent will use (mounts, limits,
 * uid switch); when it fails, `bwrap` throws and `auto` falls back to the host with the reason.
 */
export async function selectProcessLauncher(options: SelectLauncherOptions): Promise<LauncherSelection> {
  const host = (fallbackReason: string | null): LauncherSelection => ({ launcher: new HostProcessLauncher({ limits: options.limits }), fallbackReason, cgroupReason: null, networkHelper: null, networkFallbackReason: null, networkHelperMissing: false });
  if (options.requested === 'none') return host(null);
  let reason: string;
  const searchPath = options.searchPath || DEFAULT_SEARCH_PATH;
  const bwrapPath = findInPath('bwrap', searchPath);
  if (bwrapPath === null) {
    reason = 'the bwrap program is not installed (Debian/Ubuntu: apt-get install bubblewrap)';
  } else {
    // The cgroup also counts each sandbox's plumbing outside its pid namespace (bwrap, the network
    // helper and its side), which the in-sandbox watchdog does not see: it gets that headroom, so the
    // watchdog stops a fork bomb with a note first and the cgroup stays the hard backstop.
    const wanted = { memoryBytes: options.limits.memoryMb === null ? null : options.limits.memoryMb * 1024 * 1024, pids: options.limits.processes === null ? null : options.limits.processes + CGROUP_PIDS_HEADROOM };
    const detected = options.useCgroups === false ? { cgroups: null, reason: 'not used' } : detectSandboxCgroups({ limits: wanted });
    const cgroupReason = detected.cgroups || (wanted.memoryBytes === null && wanted.pids === null) ? null : detected.reason;
    const make = (networkHelper: NetworkHelper | null) =>
      new BwrapProcessLauncher({
        bwrapPath,
        cgroups: detected.cgroups,
        limits: options.limits,
        hiddenPaths: options.hiddenPaths,
        extraReadOnlyPaths: options.extraReadOnlyPaths,
        stateDir: options.stateDir,
        ...(options.createdWorkdirBase !== undefined && { createdWorkdirBase: options.createdWorkdirBase }),
        searchPath,
        networkHelper,
        ...(options.onIdmapRefused && { onIdmapRefused: options.onIdmapRefused }),
      });
    const selected = (launcher: ProcessLauncher, networkHelper: NetworkHelper | null, networkFallbackReason: string | null): LauncherSelection => ({ launcher, fallbackReason: null, cgroupReason, networkHelper, networkFallbackReason, networkHelperMissing: networkFallbackReason !== null && helper === null });
    // One sandbox with the network stack attached proves both; only when it fails does a sandbox
    // without one run, to tell a network stack that cannot attach (the sandbox still runs) from a
    // sandbox that cannot. Start-up takes one sandbox's start, and its CPU, not two at once beside
    // the records it loads.
    const choice = options.networkHelper ?? 'auto';
    const helper = findNetworkHelper(searchPath, choice);
    let networkFailure: string | null = null;
    if (helper !== null) {
      const networked = make(helper);
      networkFailure = await probe(networked, { searchPath, network: true });
      if (networkFailure === null) return selected(networked, helper, null);
    }
    const plain = make(null);
    const failure = await probe(plain, { searchPath, network: false });
    if (failure === null) return selected(plain, null, helper === null ? noNetworkHelper(choice) : networkHelperFailure(helper.kind, networkFailure));
    reason = failure;
  }
  if (options.requested === 'bwrap') throw new SandboxUnavailableError(reason);
  return host(reason);
}

/**
 * Runs `bash -c 'echo ok'` in a fresh temp workdir through the launcher (with network: only when
 * the namespace got a default route). Null when it worked, else why not.
 */
async function probe(launcher: ProcessLauncher, options: { searchPath: string; network: boolean | 'host' }): Promise<string | null> {
  const { searchPath } = options;
  const command = options.network ? 'grep -q "^[^ \t]*\t00000000" /proc/net/route && echo ok' : 'echo ok';
  const workdir = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), 'agentd-sandbox-probe-')));
  // As root, given to the uid a sandbox would show it as: the probe switches to that uid, and
  // needs no id-mapped mount (sandbox/workdir-idmap.ts) for a directory it deletes next.
  if (process.geteuid?.() === 0) fs.chownSync(workdir, sandboxUid(workdir), sandboxUid(workdir));
  try {
    const spec = launcher.prepare({ command: 'bash', args: ['-c', command], cwd: workdir, env: { PATH: searchPath, HOME: workdir }, sandbox: { workdir, network: options.network } });
    return await new Promise<string | null>((resolve) => {
      const child = spawn(spec.command, spec.args, { cwd: spec.cwd, env: spec.env, stdio: ['ignore', 'pipe', 'pipe'] });
      child.once('exit', () => spec.release?.());
      let output = '';
      child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
      child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
      const timer = setTimeout(() => child.kill('SIGKILL'), PROBE_TIMEOUT_MS);
      child.once('error', (error) => (clearTimeout(timer), resolve(error.message)));
      child.once('close', (code, signal) => {
        clearTimeout(timer);
        if (code === 0 && output.trim() === 'ok') return resolve(null);
        const detail = output.trim().split('\n').slice(-2).join(' ').slice(0, 300);
        resolve(`the probe ${signal ? `was killed (${signal})` : `exited with ${code}`}${detail ? `: ${detail}` : ''}`);
      });
    });
  } finally {
    fs.rmSync(workdir, { recursive: true, force: true });
  }
}
