import fs from 'node:fs';

/** What a process and everything below it hold and have used so far (Linux /proc). */
export interface Census {
  /** Processes below the root (the root excluded). */
  processes: number;
  /** Open file descriptors of the root. */
  rootFds: number;
  /** Open file descriptors of the processes below it. */
  childFds: number;
  /** Resident set of the root, bytes. */
  rootRss: number;
  /** Proportional set size of the processes below it (shared pages split among sharers), bytes. */
  childPss: number;
  /** CPU time of the root and of the processes below it (user + system), ms. */
  rootCpuMs: number;
  childCpuMs: number;
  /** Context switches (voluntary + involuntary: each one a wakeup) of the root and of the processes below it. */
  rootSwitches: number;
  childSwitches: number;
  /** Per process below the root: pid → its context switches (to tell who wakes up). */
  switchesByPid: Map<number, number>;
  /** Per process below the root: pid → its command name (comm). */
  nameByPid: Map<number, string>;
  /** By command name: processes, fds and PSS bytes. */
  byName: Map<string, { processes: number; fds: number; pss: number }>;
}

const TICK_MS = 10;

export function census(rootPid: number): Census {
  const below = descendants(rootPid);
  const result: Census = {
    processes: below.length,
    rootFds: fdCount(rootPid),
    childFds: 0,
    rootRss: statusField(rootPid, 'VmRSS'),
    childPss: 0,
    rootCpuMs: cpuMs(rootPid),
    childCpuMs: 0,
    rootSwitches: switches(rootPid),
    childSwitches: 0,
    switchesByPid: new Map(),
    nameByPid: new Map(),
    byName: new Map(),
  };
  for (const pid of below) {
    const fds = fdCount(pid);
    const size = pss(pid);
    const name = commOf(pid);
    const named = result.byName.get(name) ?? { processes: 0, fds: 0, pss: 0 };
    named.processes += 1;
    named.fds += fds;
    named.pss += size;
    result.byName.set(name, named);
    result.nameByPid.set(pid, name);
    result.childFds += fds;
    result.childPss += size;
    result.childCpuMs += cpuMs(pid);
    const count = switches(pid);
    result.childSwitches += count;
    result.switchesByPid.set(pid, count);
  }
  return result;
}

/** Wakeups between two censuses of processes present in both (new and gone processes left out). */
export function wakeupsBetween(before: Census, after: Census): number {
  let total = 0;
  for (const [pid, count] of after.switchesByPid) {
    const earlier = before.switchesByPid.get(pid);
    if (earlier !== undefined) total += count - earlier;
  }
  return total;
}

/** Wakeups between two censuses by command name (processes present in both). */
export function wakeupsByName(before: Census, after: Census): Map<string, number> {
  const byName = new Map<string, number>();
  for (const [pid, count] of after.switchesByPid) {
    const earlier = before.switchesByPid.get(pid);
    const name = after.nameByPid.get(pid) ?? '?';
    if (earlier !== undefined) byName.set(name, (byName.get(name) ?? 0) + count - earlier);
  }
  return byName;
}

function commOf(pid: number): string {
  try {
    return fs.readFileSync(`/proc/${pid}/comm`, 'utf8').trim();
  } catch {
    return '?';
  }
}

export function descendants(rootPid: number): number[] {
  const found: number[] = [];
  const pending = [rootPid];
  while (pending.length > 0) {
    const pid = pending.pop() as number;
    let tasks: string[] = [];
    try {
      tasks = fs.readdirSync(`/proc/${pid}/task`);
    } catch {
      continue;
    }
    for (const task of tasks) {
      let text = '';
      try {
        text = fs.readFileSync(`/proc/${pid}/task/${task}/children`, 'utf8');
      } catch {
        continue;
      }
      for (const word of text.split(' ')) {
        if (word === '') continue;
        found.push(Number(word));
        pending.push(Number(word));
      }
    }
  }
  return found;
}

function fdCount(pid: number): number {
  try {
    return fs.readdirSync(`/proc/${pid}/fd`).length;
  } catch {
    return 0;
  }
}

function statusField(pid: number, name: string): number {
  try {
    const line = fs.readFileSync(`/proc/${pid}/status`, 'utf8').split('\n').find((entry) => entry.startsWith(`${name}:`));
    return Number(/(\d+)/.exec(line ?? '')?.[1] ?? 0) * 1024;
  } catch {
    return 0;
  }
}

function switches(pid: number): number {
  try {
    const status = fs.readFileSync(`/proc/${pid}/status`, 'utf8');
    const field = (name: string) => Number(new RegExp(`^${name}:\\s+(\\d+)`, 'm').exec(status)?.[1] ?? 0);
    return field('voluntary_ctxt_switches') + field('nonvoluntary_ctxt_switches');
  } catch {
    return 0;
  }
}

function pss(pid: number): number {
  try {
    return Number(/^Pss:\s+(\d+) kB/m.exec(fs.readFileSync(`/proc/${pid}/smaps_rollup`, 'utf8'))?.[1] ?? 0) * 1024;
  } catch {
    return 0;
  }
}

function cpuMs(pid: number): number {
  try {
    const fields = fs.readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
    return (Number(fields[11]) + Number(fields[12])) * TICK_MS;
  } catch {
    return 0;
  }
}

/**
 * The resident part of glibc's main heap (the `[heap]` mapping, grown with brk): what the main
 * thread's malloc keeps, blocks in use and freed ones it has not given back. Bytes; 0 if none.
 */
export function glibcHeapRss(pid: number): number {
  let inHeap = false;
  for (const line of fs.readFileSync(`/proc/${pid}/smaps`, 'utf8').split('\n')) {
    if (/^[0-9a-f]+-[0-9a-f]+ /.test(line)) inHeap = line.endsWith('[heap]');
    else if (inHeap && line.startsWith('Rss:')) return Number(/(\d+) kB/.exec(line)![1]) * 1024;
  }
  return 0;
}
