import fs from 'node:fs';

const pause = new Int32Array(new SharedArrayBuffer(4));

/** Whether the process's current directory is `dir` or lies inside it (false once it is gone, or another user's). */
export function runsIn(pid: number | string, dir: string): boolean {
  let cwd: string;
  try {
    cwd = fs.readlinkSync(`/proc/${pid}/cwd`);
  } catch {
    return false;
  }
  return cwd === dir || cwd.startsWith(`${dir}/`);
}

/**
 * A process's command line, words joined by spaces; null once it is gone. A process in the middle
 * of an `execve` has none for a few milliseconds (the new program's arguments are not yet in place:
 * 3 ms seen here, for each exec of a chain such as bash, setpriv, bash); it is read again until it
 * has one, so a look never takes a process between two programs for one that matches nothing. A
 * zombie's and a kernel thread's stay empty.
 */
export function commandLineOf(pid: number | string): string | null {
  for (let attempt = 0; ; attempt++) {
    let text: string;
    try {
      text = fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8');
    } catch {
      return null; // gone meanwhile
    }
    if (text !== '' || attempt === 200 || !midExec(pid)) return text.replaceAll('\0', ' ');
    Atomics.wait(pause, 0, 0, 1);
  }
}

/** Whether a process with no command line is between two programs: not a zombie, not a kernel thread (kthreadd, pid 2, and its children). */
function midExec(pid: number | string): boolean {
  let stat: string;
  try {
    stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
  } catch {
    return false;
  }
  const [state, parent] = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return state !== 'Z' && state !== 'X' && Number(pid) !== 2 && parent !== '2';
}

/**
 * Whether any process's command line contains `pattern`, read from /proc directly: unlike a
 * `pgrep` that is missing or fails, this cannot answer "no" without having looked.
 */
export function processAlive(pattern: string): boolean {
  const pids = fs.readdirSync('/proc').filter((name) => /^\d+$/.test(name));
  if (pids.length === 0) throw new Error('/proc lists no process: cannot tell whether one is alive');
  for (const pid of pids) {
    if (Number(pid) === process.pid) continue;
    if (commandLineOf(pid)?.includes(pattern)) return true;
  }
  return false;
}

/** Waits (bounded) until a process whose command line contains `pattern` exists. */
export async function waitForProcess(pattern: string, timeoutMs = 10_000): Promise<void> {
  const until = Date.now() + timeoutMs;
  while (!processAlive(pattern)) {
    if (Date.now() > until) throw new Error(`no process matching ${JSON.stringify(pattern)} within ${timeoutMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}

/** SIGKILLs the processes whose command line contains `pattern` (a unique marker the test made); returns how many. */
export function killMatching(pattern: string): number {
  let killed = 0;
  for (const pid of fs.readdirSync('/proc').filter((name) => /^\d+$/.test(name))) {
    if (Number(pid) === process.pid) continue;
    try {
      if (!commandLineOf(pid)?.includes(pattern)) continue;
      process.kill(Number(pid), 'SIGKILL');
      killed++;
    } catch {
      // gone meanwhile
    }
  }
  return killed;
}

/** The live (not zombie) processes descended from `pid`, read from /proc: a server's shells and what they run. */
export function liveDescendants(pid: number): number[] {
  const parentOf = new Map<number, number>();
  const live = new Set<number>();
  for (const name of fs.readdirSync('/proc').filter((entry) => /^\d+$/.test(entry))) {
    let stat: string;
    try {
      stat = fs.readFileSync(`/proc/${name}/stat`, 'utf8');
    } catch {
      continue; // gone meanwhile
    }
    // After the command name in parentheses: state, then the parent's pid.
    const [state, parent] = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    parentOf.set(Number(name), Number(parent));
    if (state !== 'Z') live.add(Number(name));
  }
  const found: number[] = [];
  const frontier = [pid];
  while (frontier.length > 0) {
    const parent = frontier.pop()!;
    for (const [child, itsParent] of parentOf) {
      if (itsParent !== parent) continue;
      frontier.push(child);
      if (live.has(child)) found.push(child);
    }
  }
  return found;
}
