import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { spawnSync } from 'node:child_process';
import { readProcess } from '../process/process-tree.js';

const LOCK_FILE = 'agentd.lock';
/** flock's exit code when `-n` finds the lock held (util-linux and busybox alike). */
const HELD = 1;
/** Where `flock` is looked for when PATH does not have it (PATH is the agent's business, not the lock's). */
const FLOCK_PROGRAMS = ['flock', '/usr/bin/flock', '/bin/flock', '/usr/local/bin/flock'];

/** Who holds the data dir, as written into the lock file by the holder. */
export interface LockHolder {
  pid: number;
  /** Start time of the process in clock ticks since boot (/proc/<pid>/stat): tells it from a later process with the same pid. */
  start_time: number | null;
  hostname: string;
  started_at: string;
}

export class DataDirInUseError extends Error {
  constructor(
    readonly dataDir: string,
    readonly holder: LockHolder | null,
  ) {
    const who = holder ? `agentd pid ${holder.pid} on ${holder.hostname} (since ${holder.started_at})` : 'another process';
    super(`data dir ${dataDir} is in use by ${who}; stop it first or start with another --data-dir`);
    this.name = 'DataDirInUseError';
  }
}

/**
 * One server per data dir: an exclusive `flock(2)` on `<dataDir>/agentd.lock`, taken before the
 * server reads or repairs anything there.
 *
 * Node has no flock() and native addons are not an option, so the util-linux `flock` binary takes
 * the lock on a descriptor this process opened and hands to it as fd 3. A flock belongs to the
 * open file description, which this process keeps open after `flock` exits: the lock lives exactly
 * as long as this process (the kernel drops it on exit, `kill -9` included), so a lock is never
 * stale and two starters cannot both win (flock -n is one atomic system call). The descriptor is
 * close-on-exec, so agent processes never inherit it. The holder writes its pid, start time and
 * host into the file, for the message the next starter prints; the file itself is never removed
 * (removing a flock'd file would let two processes lock two different files).
 */
export class DataDirLock {
  private constructor(
    private readonly fd: number,
    readonly file: string,
  ) {}

  static acquire(dataDir: string): DataDirLock {
    fs.mkdirSync(dataDir, { recursive: true, mode: 0o700 });
    const file = path.join(dataDir, LOCK_FILE);
    const fd = fs.openSync(file, fs.constants.O_RDWR | fs.constants.O_CREAT | fs.constants.O_NOFOLLOW, 0o600);
    try {
      const result = runFlock(fd);
      if (result.status === HELD) throw new DataDirInUseError(dataDir, readHolder(fd));
      if (result.status !== 0) throw new Error(`cannot lock the data dir: flock exited with ${result.status}: ${String(result.stderr).trim()}`);
      const self = readProcess(process.pid);
      const holder: LockHolder = { pid: process.pid, start_time: self?.startTime ?? null, hostname: os.hostname(), started_at: new Date().toISOString() };
      fs.ftruncateSync(fd, 0);
      fs.writeSync(fd, `${JSON.stringify(holder)}\n`, 0);
      return new DataDirLock(fd, file);
    } catch (error) {
      fs.closeSync(fd);
      throw error;
    }
  }

  /** Let go of the data dir (also happens when the process exits, however it exits). */
  release(): void {
    try {
      fs.closeSync(this.fd);
    } catch {
      // already closed
    }
  }
}

function runFlock(fd: number): ReturnType<typeof spawnSync> {
  let failure: Error | undefined;
  for (const program of FLOCK_PROGRAMS) {
    const result = spawnSync(program, ['-x', '-n', '3'], { stdio: ['ignore', 'ignore', 'pipe', fd] });
    if (!result.error) return result;
    failure = result.error;
    if ((result.error as NodeJS.ErrnoException).code !== 'ENOENT') break;
  }
  throw new Error(`cannot lock the data dir: the \`flock\` program (util-linux) is needed and could not run (${(failure as NodeJS.ErrnoException).code ?? failure?.message})`);
}

/**
 * The holder's note. Right after a holder is killed and another takes the lock, the file may
 * still name the dead one for a moment (until the winner writes its own): a note counts only
 * when that exact process (pid and start time) is alive, else it is read again.
 */
function readHolder(fd: number): LockHolder | null {
  for (let attempt = 0; attempt < 40; attempt++) {
    try {
      const size = fs.fstatSync(fd).size;
      const buffer = Buffer.alloc(Math.min(size, 4096));
      fs.readSync(fd, buffer, 0, buffer.length, 0);
      const holder = JSON.parse(buffer.toString('utf8')) as LockHolder;
      if (Number.isInteger(holder.pid) && isAlive(holder)) return holder;
    } catch {
      // being written
    }
    Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 25);
  }
  return null;
}

function isAlive(holder: LockHolder): boolean {
  // Another host's process cannot be checked from here: its note is taken as it is.
  if (holder.hostname !== os.hostname()) return true;
  const current = readProcess(holder.pid);
  return current !== undefined && (holder.start_time === null || current.startTime === holder.start_time);
}
