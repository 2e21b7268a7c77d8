import { existsSync, readdirSync, readFileSync } from 'node:fs';

/** One row of the process table: enough to find a shell's children and process groups. */
export interface ProcessEntry {
  pid: number;
  ppid: number;
  pgid: number;
  /** Start time in clock ticks since boot: tells a process from a later one that reused its pid. */
  startTime: number;
  /** Exited, waiting for its parent (or init) to reap it: nothing left to stop. */
  zombie: boolean;
}

/**
 * A snapshot of the process table from /proc (Linux). Elsewhere: empty, callers degrade to group kills.
 * One snapshot serves the whole event-loop turn: closing a thousand shells at shutdown (each
 * walks its tree in the same synchronous sweep) reads /proc once, not a thousand times. Later
 * turns read it again. The array is frozen: callers filter it, never change it.
 */
export function listProcesses(): ProcessEntry[] {
  if (turnSnapshot) return turnSnapshot;
  const snapshot = Object.freeze(scanProcesses()) as ProcessEntry[];
  turnSnapshot = snapshot;
  setImmediate(() => {
    if (turnSnapshot === snapshot) turnSnapshot = undefined;
  }).unref();
  return snapshot;
}

let turnSnapshot: ProcessEntry[] | undefined;

function scanProcesses(): ProcessEntry[] {
  let names: string[];
  try {
    names = readdirSync('/proc');
  } catch {
    return [];
  }
  const entries: ProcessEntry[] = [];
  for (const name of names) {
    const entry = /^\d+$/.test(name) ? readProcess(Number(name)) : undefined;
    if (entry) entries.push(entry);
  }
  return entries;
}

/** One process from /proc, or undefined when it does not exist (or /proc is not there). */
export function readProcess(pid: number): ProcessEntry | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // Fields after "(comm)" start at field 3 (state); comm may itself contain spaces or parentheses.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return { pid, ppid: Number(fields[1]), pgid: Number(fields[2]), startTime: Number(fields[19]), zombie: fields[0] === 'Z' || fields[0] === 'X' };
  } catch {
    return undefined;
  }
}

/**
 * Kills a process group recorded earlier, unless it is provably someone else's now: its leader
 * pid was reused by a younger process, or no process is left in it.
 */
export function killRecordedGroup(group: { pgid: number; startTime: number }): void {
  const leader = readProcess(group.pgid);
  const stillOurs = leader ? leader.startTime === group.startTime : listProcesses().some((entry) => entry.pgid === group.pgid);
  if (stillOurs) signalQuietly(-group.pgid, 'SIGKILL');
}

/** Every process below `rootPid` in the snapshot (children, grandchildren, ...), root excluded. */
export function descendantsOf(rootPid: number, processes: ProcessEntry[]): number[] {
  const children = new Map<number, number[]>();
  for (const entry of processes) children.set(entry.ppid, [...(children.get(entry.ppid) ?? []), entry.pid]);
  const found: number[] = [];
  const pending = [rootPid];
  while (pending.length > 0) {
    for (const child of children.get(pending.pop() as number) ?? []) {
      if (child === rootPid || found.includes(child)) continue;
      found.push(child);
      pending.push(child);
    }
  }
  return found;
}

/**
 * Every process below `rootPid` (root excluded), found through /proc/<pid>/task/<tid>/children:
 * the cost grows with the tree, not with the machine's process table. Where the kernel lacks
 * those files, a full snapshot (listProcesses) is walked instead.
 */
export function descendantsByChildren(rootPid: number): number[] {
  if (!childrenFilesExist()) return descendantsOf(rootPid, listProcesses());
  const found: number[] = [];
  const seen = new Set<number>([rootPid]);
  const pending = [rootPid];
  while (pending.length > 0) {
    const pid = pending.pop() as number;
    for (const child of childrenOf(pid)) {
      if (seen.has(child)) continue;
      seen.add(child);
      found.push(child);
      pending.push(child);
    }
  }
  return found;
}

/**
 * The processes whose parent is `pid`: through its children files, else (a kernel without them)
 * from a full snapshot.
 */
export function childProcesses(pid: number): ProcessEntry[] {
  if (!childrenFilesExist()) return listProcesses().filter((entry) => entry.ppid === pid);
  return childrenOf(pid).flatMap((child) => readProcess(child) ?? []);
}

function childrenOf(pid: number): number[] {
  let tasks: string[];
  try {
    tasks = readdirSync(`/proc/${pid}/task`);
  } catch {
    return [];
  }
  const children: number[] = [];
  for (const task of tasks) {
    try {
      for (const word of readFileSync(`/proc/${pid}/task/${task}/children`, 'utf8').split(' ')) if (word !== '') children.push(Number(word));
    } catch {
      // The task ended meanwhile.
    }
  }
  return children;
}

let childrenFiles: boolean | undefined;
function childrenFilesExist(): boolean {
  childrenFiles ??= existsSync(`/proc/${process.pid}/task/${process.pid}/children`);
  return childrenFiles;
}

/** How many pid namespaces deep a process is, as /proc's NSpid says (0: it is gone, or the kernel does not say). */
export function pidNamespaceDepth(pid: number): number {
  try {
    const line = /^NSpid:(.*)$/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1];
    return line === undefined ? 0 : line.trim().split(/\s+/).length;
  } catch {
    return 0;
  }
}

/** process.kill that ignores "no such process" (a negative pid targets a process group). */
export function signalQuietly(pid: number, signal: NodeJS.Signals): void {
  try {
    process.kill(pid, signal);
  } catch {
    // Already gone.
  }
}
