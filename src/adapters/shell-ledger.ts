import fs from 'node:fs';
import type { ShellFactory, ShellSession } from '../core/tools/shell-session.js';
import { StorageFullError } from '../core/errors.js';
import { isOutOfSpace } from './disk-space.js';
import { descendantsOf, killRecordedGroup, listProcesses, readProcess, signalQuietly } from './process-tree.js';

interface Entry {
  pid: number;
  startTime: number;
}

/** How long a closed shell may stay in the ledger file (see forget). */
const FORGET_DELAY_MS = 100;

/**
 * A file of the shells this server started (pid and start time). A server killed with `kill -9`
 * cannot stop its shells; the next start reaps what the ledger names, with everything below
 * them, unless a pid now belongs to a younger process.
 */
export class ShellLedger {
  private readonly entries = new Map<string, Entry>();
  private writeScheduled = false;

  constructor(private readonly file: string) {}

  /** Kill the shells a previous run of the server left behind. Returns how many were found. */
  reapOrphans(): number {
    let previous: Record<string, Entry> = {};
    try {
      previous = JSON.parse(fs.readFileSync(this.file, 'utf8')) as Record<string, Entry>;
    } catch {
      // no ledger, or a torn one: nothing to reap
    }
    let reaped = 0;
    const processes = listProcesses();
    for (const entry of Object.values(previous)) {
      const current = readProcess(entry.pid);
      if (!current) {
        // The leader is gone; what is left of its group (a sandbox's init that outlived bwrap) is ours.
        if (processes.some((other) => other.pgid === entry.pid)) {
          killRecordedGroup({ pgid: entry.pid, startTime: entry.startTime });
          reaped += 1;
        }
        continue;
      }
      if (current.startTime !== entry.startTime) continue;
      for (const pid of descendantsOf(entry.pid, processes)) signalQuietly(pid, 'SIGKILL');
      signalQuietly(-entry.pid, 'SIGKILL');
      signalQuietly(entry.pid, 'SIGKILL');
      reaped += 1;
    }
    this.write();
    return reaped;
  }

  /** A factory whose shells are recorded while they live. */
  track(factory: ShellFactory): ShellFactory {
    return {
      create: async (options) => {
        // Recorded at spawn: a sandbox can take seconds to answer, and a server killed meanwhile
        // must still find it at the next start.
        const onSpawn = (pid: number) => {
          options.onSpawn?.(pid);
          this.record(options.conversationId, pid);
        };
        try {
          const shell = await factory.create({ ...options, onSpawn });
          return this.wrap(options.conversationId, shell);
        } catch (error) {
          this.entries.delete(options.conversationId);
          this.write();
          throw error;
        }
      },
    };
  }

  private wrap(conversationId: string, shell: ShellSession): ShellSession {
    const ledger = this;
    return {
      run: (command, options) => shell.run(command, options),
      setEnv: (vars, unset) => shell.setEnv(vars, unset),
      interrupt: () => shell.interrupt(),
      async close() {
        await shell.close();
        ledger.forget(conversationId);
      },
      async suspend() {
        const state = shell.suspend ? await shell.suspend() : (await shell.close(), null);
        if (!shell.alive) ledger.forget(conversationId);
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

  private record(conversationId: string, pid: number | undefined): void {
    const process = pid === undefined ? undefined : readProcess(pid);
    if (!process) return;
    this.entries.set(conversationId, { pid: process.pid, startTime: process.startTime });
    this.write();
  }

  /**
   * A closed shell leaves the ledger within FORGET_DELAY_MS: closing a thousand shells (shutdown,
   * a burst of deletes) writes the file a few times, not a thousand. An entry left behind by a
   * crash or an exit meanwhile is harmless: the next start finds its process gone or younger.
   */
  private forget(conversationId: string): void {
    this.entries.delete(conversationId);
    if (this.writeScheduled) return;
    this.writeScheduled = true;
    setTimeout(() => {
      this.writeScheduled = false;
      try {
        this.write();
      } catch {
        // The disk is full: the stale entry stays until the next write.
      }
    }, FORGET_DELAY_MS).unref();
  }

  private write(): void {
    const temp = `${this.file}.tmp`;
    try {
      fs.writeFileSync(temp, JSON.stringify(Object.fromEntries(this.entries)), { mode: 0o600 });
      fs.renameSync(temp, this.file);
    } catch (error) {
      fs.rmSync(temp, { force: true });
      throw isOutOfSpace(error) ? new StorageFullError() : error;
    }
  }
}
