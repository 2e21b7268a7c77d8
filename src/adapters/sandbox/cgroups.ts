import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { shellWord } from './mounts.js';

/**
 * Whole-sandbox memory and process limits with cgroups, where the host lets the server create
 * them: cgroup v2 when the server's own cgroup offers the memory and pids controllers and lets it
 * enable them for a child (a delegated subtree), else cgroup v1 when the `memory` and `pids`
 * hierarchies are mounted writable. Each conversation (key: its sandbox uid) gets a child cgroup
 * `<server's cgroup>/agentd/<key>` per controller; every process of its sandboxes joins it before
 * bwrap starts (the launch script below, run by the spawned process itself, so nothing runs
 * outside it), which counts all of them together: processes, threads, their memory and their
 * tmpfs pages. Empty cgroups are removed when a sandbox ends, at shutdown (every one this server
 * made, once its processes are gone) and at start-up (leftovers of a killed server); a cgroup
 * still in use refuses removal (EBUSY), so removal is always safe.
 */
const RELEASE_RETRIES = 20;
const RELEASE_RETRY_MS = 100;
/** Leftover cgroups removed at once by the start-up sweep (libuv's pool has four threads). */
const SWEEP_BATCH = 8;
/** How long a shutdown waits for the sandboxes' last processes to leave their cgroups. */
const SHUTDOWN_REMOVAL_S = 5;

export interface CgroupLimits {
  memoryBytes: number | null;
  pids: number | null;
}

interface ControllerDir {
  /** The `agentd` directory under the server's own cgroup in this hierarchy. */
  base: string;
  /** Files written in each child, in order: name and value. */
  files: Array<[string, string]>;
  /** Files written when present, errors ignored (swap limits). */
  optional: Array<[string, string]>;
  /** The file the launch script writes, and what, to move itself into the child (see JOIN_V1). */
  join: readonly [string, string];
}

/**
 * How the launch script moves itself into a cgroup. v1: its own thread, by writing 0 to `tasks`.
 * A write to `cgroup.procs` (or of a pid) takes the kernel's global lock on thread groups, whose
 * writer waits for an RCU grace period, a large part of a sandbox's start; moving the writing
 * thread itself needs no such lock and no such wait. The launch script is
 * a single-threaded bash, so its thread is the whole process, and everything it starts inherits
 * the cgroup. v2 moves processes only (`cgroup.procs`), lock and all.
 */
const JOIN_V1 = ['tasks', '0'] as const;
const JOIN_V2 = ['cgroup.procs', '$$'] as const;

export interface SandboxCgroups {
  version: 'v1' | 'v2';
  /** Which limits the cgroups enforce. */
  enforces: { memory: boolean; pids: boolean };
  /** bash statements that move the running shell into the conversation's cgroups, or exit 125 (`mkdir`: its absolute path). */
  joinScript(key: string, mkdir: string): string;
  /** Makes the conversation's cgroup directories, off the event loop: a join script then runs no mkdir. Never rejects. */
  makeDirectories(key: string): Promise<void>;
  /** Removes the conversation's cgroups if empty. */
  release(key: string): void;
  /** The conversation's cgroup directories (one per hierarchy). */
  directories(key: string): string[];
  /** Removes every empty child cgroup (start-up), off the event loop; resolves when done. */
  sweep(): Promise<void>;
  /**
   * Shutdown: removes every cgroup this server made, waiting (bounded) for the processes still in
   * them to end; they are being killed by the shutdown, not here.
   */
  removeMade(): Promise<void>;
  /**
   * The server exits next, its sandboxes' processes killed but not waited for: a small detached
   * bash outlives it to remove the cgroups it made once they are empty (bounded).
   */
  removeMadeAfterExit(programs: { bash: string; rmdir: string; sleep: string }): void;
}

interface MountEntry {
  root: string;
  mountPoint: string;
  fsType: string;
  superOptions: string[];
}

export interface DetectOptions {
  limits: CgroupLimits;
  /** For tests: where /proc/self/{mountinfo,cgroup} are read. */
  procSelf?: string;
}

/** The cgroups this host lets the server use for `limits`, or null with the reason. */
export function detectSandboxCgroups(options: DetectOptions): { cgroups: SandboxCgroups | null; reason: string | null } {
  const { limits } = options;
  if (limits.memoryBytes === null && limits.pids === null) return { cgroups: null, reason: 'no memory or process limit is configured' };
  const procSelf = options.procSelf ?? '/proc/self';
  let mounts: MountEntry[];
  let membership: Map<string, string>;
  try {
    mounts = parseMountInfo(fs.readFileSync(path.join(procSelf, 'mountinfo'), 'utf8'));
    membership = parseCgroupFile(fs.readFileSync(path.join(procSelf, 'cgroup'), 'utf8'));
  } catch (error) {
    return { cgroups: null, reason: `cannot read the process's cgroups (${(error as Error).message})` };
  }
  const reasons: string[] = [];
  const v2 = tryV2({ mounts, membership, limits });
  if (v2.cgroups) return v2;
  reasons.push(`v2: ${v2.reason}`);
  const v1 = tryV1({ mounts, membership, limits });
  if (v1.cgroups) return v1;
  reasons.push(`v1: ${v1.reason}`);
  return { cgroups: null, reason: reasons.join('; ') };
}

interface TryOptions {
  mounts: MountEntry[];
  membership: Map<string, string>;
  limits: CgroupLimits;
}

function tryV2(options: TryOptions): { cgroups: SandboxCgroups | null; reason: string } {
  const mount = options.mounts.find((entry) => entry.fsType === 'cgroup2');
  const own = options.membership.get('');
  if (!mount || own === undefined) return { cgroups: null, reason: 'no cgroup2 hierarchy' };
  const dir = ownDir(mount, own);
  if (dir === null) return { cgroups: null, reason: "the server's cgroup is outside the mounted hierarchy" };
  const wanted = [...(options.limits.memoryBytes !== null ? ['memory'] : []), ...(options.limits.pids !== null ? ['pids'] : [])];
  const available = readWords(path.join(dir, 'cgroup.controllers'));
  const missing = wanted.filter((name) => !available.includes(name));
  if (missing.length > 0) return { cgroups: null, reason: `controllers ${missing.join(', ')} not available to the server's cgroup` };
  const base = path.join(dir, 'agentd');
  try {
    leaveInnerNode(dir, wanted);
    enableControllers(dir, wanted);
    fs.mkdirSync(base, { recursive: true });
    enableControllers(base, wanted);
  } catch (error) {
    return { cgroups: null, reason: `cannot delegate ${wanted.join(', ')} to a child of the server's cgroup (${(error as NodeJS.ErrnoException).code ?? (error as Error).message})` };
  }
  const files: Array<[string, string]> = [];
  const optional: Array<[string, string]> = [];
  if (options.limits.memoryBytes !== null) {
    files.push(['memory.max', String(options.limits.memoryBytes)]);
    optional.push(['memory.swap.max', '0']);
  }
  if (options.limits.pids !== null) files.push(['pids.max', String(options.limits.pids)]);
  const controllers = [{ base, files, optional, join: JOIN_V2 }];
  const probe = probeControllers(controllers);
  if (probe !== null) return { cgroups: null, reason: probe };
  return { cgroups: new CgroupSet('v2', controllers, { memory: options.limits.memoryBytes !== null, pids: options.limits.pids !== null }), reason: '' };
}

function tryV1(options: TryOptions): { cgroups: SandboxCgroups | null; reason: string } {
  const controllers: ControllerDir[] = [];
  const wanted: Array<{ name: string; files: Array<[string, string]>; optional: Array<[string, string]> }> = [];
  if (options.limits.memoryBytes !== null) {
    const bytes = String(options.limits.memoryBytes);
    wanted.push({ name: 'memory', files: [['memory.limit_in_bytes', bytes]], optional: [['memory.memsw.limit_in_bytes', bytes]] });
  }
  if (options.limits.pids !== null) wanted.push({ name: 'pids', files: [['pids.max', String(options.limits.pids)]], optional: [] });
  for (const controller of wanted) {
    const mount = options.mounts.find((entry) => entry.fsType === 'cgroup' && entry.superOptions.includes(controller.name));
    const own = [...options.membership].find(([names]) => names.split(',').includes(controller.name))?.[1];
    if (!mount || own === undefined) return { cgroups: null, reason: `no ${controller.name} hierarchy` };
    const dir = ownDir(mount, own);
    if (dir === null) return { cgroups: null, reason: `the server's ${controller.name} cgroup is outside the mounted hierarchy` };
    controllers.push({ base: path.join(dir, 'agentd'), files: controller.files, optional: controller.optional, join: JOIN_V1 });
  }
  const probe = probeControllers(controllers);
  if (probe !== null) return { cgroups: null, reason: probe };
  return { cgroups: new CgroupSet('v1', controllers, { memory: options.limits.memoryBytes !== null, pids: options.limits.pids !== null }), reason: '' };
}

/** Creates, configures and removes a probe child in each hierarchy: null when it all worked. */
function probeControllers(controllers: ControllerDir[]): string | null {
  for (const controller of controllers) {
    const probe = path.join(controller.base, `probe-${process.pid}`);
    try {
      fs.mkdirSync(probe, { recursive: true });
      for (const [name, value] of controller.files) fs.writeFileSync(path.join(probe, name), value);
    } catch (error) {
      return `cannot create a child cgroup in ${controller.base} (${(error as NodeJS.ErrnoException).code ?? (error as Error).message})`;
    } finally {
      removeQuietly(probe);
    }
  }
  return null;
}

class CgroupSet implements SandboxCgroups {
  /** The keys whose cgroups this server made (or joined): removed at shutdown. */
  private readonly made = new Set<string>();
  /** Per key, how many sandboxes were prepared to join it: a release stops once a newer one was. */
  private readonly joins = new Map<string, number>();

  constructor(
    readonly version: 'v1' | 'v2',
    private readonly controllers: ControllerDir[],
    readonly enforces: { memory: boolean; pids: boolean },
  ) {}

  joinScript(key: string, mkdir: string): string {
    this.made.add(key);
    this.joins.set(key, (this.joins.get(key) ?? 0) + 1);
    const dirs = this.directories(key).map(shellWord);
    // One mkdir (a process) for every directory missing, none when all are there (the
    // conversation's shell holds them while it runs).
    const make = `${dirs.map((dir) => `[ -d ${dir} ]`).join(' && ')} || ${shellWord(mkdir)} -p -- ${dirs.join(' ')} 2>/dev/null`;
    const joins = this.controllers.map((controller) => {
      const dir = path.join(controller.base, safeKey(key));
      const writes = controller.files.map(([name, value]) => `echo ${value} > ${shellWord(path.join(dir, name))}`);
      const optional = controller.optional.map(([name, value]) => `{ [ ! -e ${shellWord(path.join(dir, name))} ] || echo ${value} > ${shellWord(path.join(dir, name))} || :; }`);
      // A concurrent sweep may remove the directory between mkdir and the writes: made again, retried.
      // Optional limits (swap) are written before and after the others: v1 refuses a memory limit
      // above the memory+swap limit, and a memory+swap limit below the memory limit.
      const [joinFile, joinValue] = controller.join;
      const attempt = [`{ [ -d ${shellWord(dir)} ] || ${shellWord(mkdir)} -p -- ${shellWord(dir)}; }`, ...optional, ...writes, ...optional, `echo ${joinValue} > ${shellWord(path.join(dir, joinFile))}`].join(' && ');
      return `agentd_join() { ${attempt}; } 2>/dev/null; agentd_join || agentd_join || agentd_join || { echo 'agentd sandbox: cannot join its cgroup' >&2; exit 125; }`;
    });
    return [make, ...joins].join('\n');
  }

  release(key: string): void {
    // The sandbox's last processes may still be exiting when bwrap is gone (EBUSY): try again a
    // few times, then leave it to the next start-up's sweep. Another sandbox of the conversation
    // keeps it busy for good, and it stays.
    // Asynchronously: removing a cgroup takes the kernel a millisecond or more, and a shutdown
    // releases a thousand.
    // A sandbox of the workdir prepared since holds the cgroups (its own release removes them):
    // a retry removing them while it joins, between its mkdir and its write, failed its start.
    const joinsAtRelease = this.joins.get(key);
    const attempt = async (left: number): Promise<void> => {
      if (this.joins.get(key) !== joinsAtRelease) return;
      const removed = await Promise.all(this.directories(key).map(removeSoon));
      if (removed.includes(false) && left > 0) setTimeout(() => void attempt(left - 1), RELEASE_RETRY_MS).unref();
    };
    void attempt(RELEASE_RETRIES);
  }

  async makeDirectories(key: string): Promise<void> {
    this.made.add(key);
    // A failure is the join script's to report (it tries mkdir itself).
    await Promise.all(this.directories(key).map((dir) => fs.promises.mkdir(dir, { recursive: true }).catch(() => undefined)));
  }

  directories(key: string): string[] {
    return this.controllers.map((controller) => path.join(controller.base, safeKey(key)));
  }

  async removeMade(): Promise<void> {
    let left = [...this.made].flatMap((key) => this.directories(key));
    const deadline = Date.now() + SHUTDOWN_REMOVAL_S * 1000;
    for (;;) {
      const removed = await Promise.all(left.map(removeSoon));
      left = left.filter((_, index) => !removed[index]);
      if (left.length === 0 || Date.now() > deadline) return;
      await new Promise((resolve) => setTimeout(resolve, RELEASE_RETRY_MS / 2));
    }
  }

  removeMadeAfterExit(programs: { bash: string; rmdir: string; sleep: string }): void {
    const dirs = [...this.made].flatMap((key) => this.directories(key));
    if (dirs.length === 0) return;
    // Waiting here would reap the dying shells and hold the exit; the loop below does neither.
    const script = [
      `end=$((SECONDS + ${SHUTDOWN_REMOVAL_S}))`,
      'while :; do',
      '  left=0',
      `  for dir in "$@"; do [ ! -d "$dir" ] || ${shellWord(programs.rmdir)} -- "$dir" 2>/dev/null || left=1; done`,
      `  [ "$left" = 0 ] || [ "$SECONDS" -ge "$end" ] && exit 0`,
      `  ${shellWord(programs.sleep)} 0.05`,
      'done',
    ].join('\n');
    try {
      const child = spawn(programs.bash, ['--norc', '--noprofile', '-p', '-c', script, 'agentd-cgroups', ...dirs], { detached: true, stdio: 'ignore', cwd: '/', env: {} });
      child.on('error', () => undefined);
      child.unref();
    } catch {
      // The next start's sweep removes them.
    }
  }

  async sweep(): Promise<void> {
    // A server killed with a thousand sandboxes leaves a thousand cgroups: removed synchronously
    // they held the next start's event loop (a CPU profile of a start after P13 showed it). A sandbox starting
    // meanwhile may lose its fresh directory to this sweep: its join script tries again.
    for (const controller of this.controllers) {
      let names: string[];
      try {
        names = (await fs.promises.readdir(controller.base, { withFileTypes: true })).filter((entry) => entry.isDirectory()).map((entry) => entry.name);
      } catch {
        continue;
      }
      for (let start = 0; start < names.length; start += SWEEP_BATCH) {
        await Promise.all(names.slice(start, start + SWEEP_BATCH).map((name) => removeSoon(path.join(controller.base, name))));
      }
    }
  }
}

function parseMountInfo(text: string): MountEntry[] {
  const entries: MountEntry[] = [];
  for (const line of text.split('\n')) {
    const [left, right] = line.split(' - ');
    if (!left || !right) continue;
    const fields = left.split(' ');
    const [fsType = '', , superOptions = ''] = right.split(' ');
    entries.push({ root: unescapeMount(fields[3] ?? ''), mountPoint: unescapeMount(fields[4] ?? ''), fsType, superOptions: superOptions.split(',') });
  }
  return entries;
}

/** /proc/self/cgroup: "id:controllers:path"; v2's line has empty controllers. */
function parseCgroupFile(text: string): Map<string, string> {
  const membership = new Map<string, string>();
  for (const line of text.split('\n')) {
    const match = /^\d+:([^:]*):(.*)$/.exec(line);
    if (match) membership.set(match[1] as string, match[2] as string);
  }
  return membership;
}

function ownDir(mount: MountEntry, own: string): string | null {
  const relative = path.posix.relative(mount.root, own);
  if (relative.startsWith('..')) return null;
  return path.join(mount.mountPoint, relative);
}

/**
 * cgroup v2 lets a cgroup enable controllers for its children only while it holds no process
 * itself (the root excepted). When the server is alone in its cgroup (systemd `Delegate=yes`, a
 * container's only process), it moves itself into a leaf `agentd-server` below it, keeping every
 * limit it was under. With other processes there it moves nothing (they are not its to move).
 */
function leaveInnerNode(dir: string, wanted: string[]): void {
  const enabled = readWords(path.join(dir, 'cgroup.subtree_control'));
  if (wanted.every((name) => enabled.includes(name))) return;
  const members = readWords(path.join(dir, 'cgroup.procs')).filter(Boolean);
  if (members.length === 0 || members.some((pid) => pid !== String(process.pid))) return;
  const leaf = path.join(dir, 'agentd-server');
  fs.mkdirSync(leaf, { recursive: true });
  fs.writeFileSync(path.join(leaf, 'cgroup.procs'), String(process.pid));
}

function enableControllers(dir: string, names: string[]): void {
  const enabled = readWords(path.join(dir, 'cgroup.subtree_control'));
  const missing = names.filter((name) => !enabled.includes(name));
  if (missing.length > 0) fs.writeFileSync(path.join(dir, 'cgroup.subtree_control'), missing.map((name) => `+${name}`).join(' '));
}

function readWords(file: string): string[] {
  try {
    return fs.readFileSync(file, 'utf8').trim().split(/\s+/);
  } catch {
    return [];
  }
}

/** rmdir; true when the directory is gone (removed now or before), false while in use. */
function removeQuietly(dir: string): boolean {
  try {
    fs.rmdirSync(dir);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'ENOENT';
  }
}

/** removeQuietly off the event loop. */
async function removeSoon(dir: string): Promise<boolean> {
  try {
    await fs.promises.rmdir(dir);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'ENOENT';
  }
}

function unescapeMount(text: string): string {
  return text.replace(/\\([0-7]{3})/g, (_, octal: string) => String.fromCharCode(parseInt(octal, 8)));
}

function safeKey(key: string): string {
  return key.replace(/[^A-Za-z0-9_.-]/g, '_');
}
