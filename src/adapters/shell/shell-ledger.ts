import fs from 'node:fs';
import type { ShellCreateOptions, ShellFactory, ShellSession } from '../../core/tools/shell-session.js';
import { StorageFullError } from '../../core/errors.js';
import { isOutOfSpace } from '../files/disk-space.js';
import { descendantsOf, killRecordedGroup, listProcesses, readProcess, signalQuietly } from '../process/process-tree.js';
import { writeFileAtomic } from '../files/index.js';

interface Entry {
  pid: number;
  startTime: number;
}

/** How long a closed shell may stay in the ledger file (see forget). */
const FORGET_DELAY_MS = 100;
/** The journal is rewritten with only the live shells once it has this many lines more than them. */
const COMPACT_SLACK = 256;

/**
 * A journal of the shells this server started (pid and start time), one line per start or
 * close, appended (a start costs one small write: no file replaced while the shell starts).
 * A server killed with `kill -9` cannot stop its shells; the next start reaps what the ledger
 * names, with everything below them, unless a pid now belongs to a younger process.
 */
export class ShellLedger {
  private readonly entries = new Map<string, Entry>();
  private writeScheduled = false;
  private fd: number | null = null;
  private size = 0;
  private lines = 0;

  /** `file`: the journal (JSON lines); `legacyFile`: the whole-object ledger of earlier versions, reaped and removed. */
  constructor(
    private readonly file: string,
    private readonly legacyFile?: string,
  ) {}

  /** The shells a ledger file names (the journal, or an earlier version's single JSON object). */
  static read(file: string): Entry[] {
    let text = '';
    try {
      text = fs.readFileSync(file, 'utf8');
    } catch {
      return [];
    }
    const live = new Map<string, Entry>();
    for (const line of text.split('\n')) {
      let parsed: unknown;
      try {
        parsed = JSON.parse(line);
      } catch {
        continue; // empty, or torn by a crash mid-append
      }
      if (typeof parsed !== 'object' || parsed === null) continue;
      const record = parsed as { k?: unknown; pid?: unknown; t?: unknown };
      if (typeof record.k !== 'string') {
        for (const [key, entry] of Object.entries(parsed as Record<string, Entry>)) if (isEntry(entry)) live.set(key, entry);
      } else if (typeof record.pid === 'number' && typeof record.t === 'number') live.set(record.k, { pid: record.pid, startTime: record.t });
      else live.delete(record.k);
    }
    return [...live.values()];
  }

  /** Kill the shells a previous run of the server left behind. Returns how many were found. */
  reapOrphans(): number {
    const previous = [...ShellLedger.read(this.file), ...(this.legacyFile ? ShellLedger.read(this.legacyFile) : [])];
    let reaped = 0;
    // Scanned only when the journal names a shell (the scan reads every process's status), then
    // once: listProcesses keeps its snapshot for the rest of this turn of the event loop.
    for (const entry of previous) {
      const current = readProcess(entry.pid);
      // A zombie has exited already: the previous server's shells, killed at its exit, may not
      // be reaped by init yet. Only a running process is a shell left behind.
      if (!current || current.zombie) {
        // The leader is gone; what is left of its group (a sandbox's init that outlived bwrap) is ours.
        if (listProcesses().some((other) => other.pgid === entry.pid && !other.zombie)) {
          killRecordedGroup({ pgid: entry.pid, startTime: entry.startTime });
          reaped += 1;
        }
        continue;
      }
      if (current.startTime !== entry.startTime) continue;
      for (const pid of descendantsOf(entry.pid, listProcesses())) signalQuietly(pid, 'SIGKILL');
      signalQuietly(-entry.pid, 'SIGKILL');
      signalQuietly(entry.pid, 'SIGKILL');
      reaped += 1;
    }
    this.compact();
    if (this.legacyFile) fs.rmSync(this.legacyFile, { force: true });
    return reaped;
  }

  /**
   * A shell started by `factory`, recorded from its spawn until it is closed. An exit of the
   * process (killAllForExit) leaves it named, as close() does, so that the next start stops it if
   * it outlived this process (it finds the others gone).
   */
  async start(factory: ShellFactory, options: ShellCreateOptions): Promise<ShellSession> {
    // Recorded at spawn: a sandbox can take seconds to answer, and a server killed meanwhile
    // must still find it at the next start.
    const onSpawn = (pid: number) => {
      options.onSpawn?.(pid);
      this.record(key, pid);
    };
    const key = options.shellId ?? options.conversationId;
    try {
      const shell = await factory.create({ ...options, onSpawn });
      return this.wrap(key, shell);
    } catch (error) {
      if (this.entries.delete(key)) this.append({ k: key });
      throw error;
    }
  }

  private wrap(key: string, shell: ShellSession): ShellSession {
    const ledger = this;
    return {
      run: (command, options) => shell.run(command, options),
      setEnv: (vars, unset) => shell.setEnv(vars, unset),
      interrupt: () => shell.interrupt(),
      async close() {
        await shell.close();
        ledger.forget(key);
      },
      async suspend() {
        const state = shell.suspend ? await shell.suspend() : (await shell.close(), null);
        if (!shell.alive) ledger.forget(key);
        return state;
      },
      get pid() {
        return shell.pid;
      },
      get alive() {
        return shell.alive;
      },
    };
  }

  private record(key: string, pid: number | undefined): void {
    const process = pid === undefined ? undefined : readProcess(pid);
    if (!process) return;
    this.entries.set(key, { pid: process.pid, startTime: process.startTime });
    this.append({ k: key, pid: process.pid, t: process.startTime });
  }

  /**
   * A closed shell leaves the ledger within FORGET_DELAY_MS: closing a thousand shells (shutdown,
   * a burst of deletes) writes the file a few times, not a thousand. An entry left behind by a
   * crash or an exit meanwhile is harmless: the next start finds its process gone or younger.
   */
  private forget(key: string): void {
    if (!this.entries.delete(key)) return;
    this.closed.push(key);
    if (this.writeScheduled) return;
    this.writeScheduled = true;
    setTimeout(() => {
      this.writeScheduled = false;
      const closed = this.closed.splice(0);
      if (closed.length === 0) return;
      try {
        if (this.lines + closed.length > this.entries.size + COMPACT_SLACK) this.compact();
        else this.append(...closed.filter((gone) => !this.entries.has(gone)).map((gone) => ({ k: gone })));
      } catch {
        // The disk is full: the stale entries stay until the next write.
      }
    }, FORGET_DELAY_MS).unref();
  }

  private readonly closed: string[] = [];

  /** The server stops (its shells were closed): the journal keeps what still lives, and is closed. */
  close(): void {
    try {
      this.compact();
    } catch {
      // The disk is full: the next start reaps what the journal names (closed shells are found gone).
    }
    this.closed.length = 0;
  }

  /** Lines at the end of the journal, all or nothing (a write cut short by a full disk is truncated away). */
  private append(...records: object[]): void {
    if (records.length === 0) return;
    const bytes = Buffer.from(records.map((record) => `${JSON.stringify(record)}\n`).join(''));
    try {
      if (this.fd === null) {
        this.fd = fs.openSync(this.file, 'a', 0o600);
        this.size = fs.fstatSync(this.fd).size;
      }
      let written = 0;
      try {
        while (written < bytes.length) written += fs.writeSync(this.fd, bytes, written);
      } catch (error) {
        fs.ftruncateSync(this.fd, this.size);
        throw error;
      }
      this.size += bytes.length;
      this.lines += records.length;
    } catch (error) {
      throw isOutOfSpace(error) ? new StorageFullError() : error;
    }
  }

  /**
   * The journal rewritten with the live shells only (a new file renamed into place). The old
   * file is held open across the rename and closed by the thread pool: its blocks are freed when
   * its last reference goes, which on a disk mounted with `discard` waits for the device (P13:
   * the event loop held at shutdown, when the close was synchronous).
   */
  private compact(): void {
    const old = this.fd ?? openQuietly(this.file);
    this.fd = null;
    try {
      const lines = [...this.entries].map(([k, entry]) => `${JSON.stringify({ k, pid: entry.pid, t: entry.startTime })}\n`).join('');
      writeFileAtomic(this.file, lines, { mode: 0o600, temp: `${this.file}.tmp` });
    } catch (error) {
      throw isOutOfSpace(error) ? new StorageFullError() : error;
    } finally {
      if (old !== null) fs.close(old, () => undefined);
    }
    this.lines = this.entries.size;
  }
}

function openQuietly(file: string): number | null {
  try {
    return fs.openSync(file, 'r');
  } catch {
    return null;
  }
}

function isEntry(value: unknown): value is Entry {
  return typeof value === 'object' && value !== null && typeof (value as Entry).pid === 'number' && typeof (value as Entry).startTime === 'number';
}
