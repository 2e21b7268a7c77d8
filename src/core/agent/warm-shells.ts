import { randomUUID } from 'node:crypto';
import path from 'node:path';
import { afterThisTurn } from '../after-this-turn.js';
import type { Workdirs } from '../conversations/workdirs.js';
import type { ShellCreateOptions, ShellFactory, ShellSession } from '../tools/shell-session.js';

export interface WarmShellsDeps {
  /** What the warm shells are started with (a new shell, noted in the shell ledger). */
  shells: ShellFactory;
  workdirs: Workdirs;
  /** Where conversations without a workdir of their own get one: `<base>/<id>`. */
  workdirBase: string;
  /** The sandbox network of a conversation that does not choose one. */
  network: boolean | 'host';
  /** How many are kept ready (AGENTD_WARM_SHELLS, at least 1). */
  count: number;
  /** A warm shell nobody took for this long is closed and its workdir removed (AGENTD_IDLE_TIMEOUT_S). */
  idleTimeoutMs: number;
  /**
   * Records the workdirs made for the next conversations, before a new one is made and after one
   * is removed, so a restart removes those a crash left. Not told of a take (nothing on a
   * conversation's creation path): the workdir is the conversation's then, which the restart
   * finds in use and keeps. Resolves once written.
   */
  remember?: (workdirs: readonly string[]) => Promise<void>;
}

/** How long after a warm shell was taken the next one starts, while one is still ready: off the path of the start that took it. */
const REFILL_DELAY_MS = 100;
/** A taken shell that no run or early start of its conversation asked for within this is closed. */
const CLAIM_MS = 30_000;

interface Warm {
  id: string;
  workdir: string;
  shell: Promise<ShellSession | null>;
  timer: NodeJS.Timeout | undefined;
}

/**
 * The shells of the next conversations created without a workdir of their own, started before
 * those conversations exist: each one's id (and so its default workdir, `<base>/<id>`) is chosen
 * ahead, the workdir made, and its sandboxed shell started there as a shell started ahead is (its
 * workdir given to the agent's uid only before its first command). A conversation created with
 * the server's defaults (no workdir, the default network, an LLM and the bash tool) takes the
 * oldest (`take`), and its first shell is that one, given the conversation's secrets (`claim`):
 * the sandbox's start is then behind it. The next starts a moment later, off the
 * path of the conversation that took one; at once when that take left none ready (the next
 * creation would find none). Shells start one at a time, each as soon as the one before has
 * started, until `count` are ready again: conversations created one right after the other (a
 * client starting several tasks) each find one, and so do conversations created at a steady pace
 * quicker than the delay (the pool keeps up at the pace a sandbox starts).
 *
 * Only while conversations are being created: none before the first (unless the server primes
 * the pool as it starts: `prime`), and each one left unused for the idle timeout is closed, its
 * workdir removed (none is made again until the next creation).
 */
export class WarmShells {
  /** Ready or starting, oldest first. */
  private readonly ready: Warm[] = [];
  /** A shell is being made (its note written, its workdir made) or starting: the next one waits for it (one sandbox start at a time). */
  private starting = false;
  private readonly taken = new Map<string, Warm>();
  private refill: NodeJS.Timeout | undefined;
  private closed = false;
  /** The note's writes, one after the other. */
  private noting: Promise<void> = Promise.resolve();

  constructor(private readonly deps: WarmShellsDeps) {}

  /**
   * The id and workdir for a conversation being created with the defaults, whose shell is
   * starting or started; null when there is none ready (more are started for the next). The
   * conversation must then be created with them (its first shell comes from `claim`).
   */
  take(): { id: string; workdir: string } | null {
    const warm = this.ready.shift();
    // Emptied by this take: the next creation would find none, so the next one starts now. None
    // was ready: this conversation starts a shell of its own now, and the next waits a moment.
    this.fillSoon(warm && this.ready.length === 0 ? 0 : REFILL_DELAY_MS);
    if (!warm) return null;
    clearTimeout(warm.timer);
    warm.timer = setTimeout(() => void this.giveUp(warm), CLAIM_MS);
    warm.timer.unref();
    this.taken.set(warm.id, warm);
    return { id: warm.id, workdir: warm.workdir };
  }

  /** Fills the pool now, before any conversation is created: a server warming up as it starts (cli/warm-up.ts). */
  prime(): void {
    this.fillSoon(0);
  }

  /**
   * Server shutdown: the next conversations' shells are closed and their workdirs removed; a taken
   * one its conversation has not asked for yet is closed (the workdir is the conversation's).
   */
  async close(): Promise<void> {
    this.closed = true;
    clearTimeout(this.refill);
    const ready = this.ready.splice(0);
    await Promise.all([...ready.map((warm) => this.discard(warm)), ...[...this.taken.values()].map((taken) => this.giveUp(taken))]);
    await this.note().catch(() => undefined);
  }

  /**
   * A taken conversation's first shell: its warm one, given the conversation's variables, when it
   * still fits what is asked (else closed); null when a new shell must be started.
   */
  async claim(options: ShellCreateOptions): Promise<ShellSession | null> {
    const warm = options.shellId === undefined && !options.restore ? this.taken.get(options.conversationId) : undefined;
    if (!warm) return null;
    this.taken.delete(warm.id);
    clearTimeout(warm.timer);
    const shell = await warm.shell;
    if (shell?.alive && options.workdir === warm.workdir && (options.sandbox?.network ?? true) === this.deps.network) {
      if (Object.keys(options.env).length > 0) await shell.setEnv(options.env);
      return shell;
    }
    await shell?.close();
    return null;
  }

  /**
   * The next one is made `delayMs` from now (0: once this turn's work is on its way), unless
   * enough are ready. While one is being made or starting, its start brings the next.
   */
  private fillSoon(delayMs: number): void {
    if (this.closed || this.starting || this.ready.length >= this.deps.count) return;
    if (delayMs === 0) {
      clearTimeout(this.refill);
      this.refill = undefined;
      afterThisTurn(() => void this.fill());
      return;
    }
    this.refill ??= setTimeout(() => {
      this.refill = undefined;
      void this.fill();
    }, delayMs).unref();
  }

  /**
   * Its workdir noted first (a crash then leaves nothing unnoted), made, and its shell started;
   * once started, the next one if fewer than `count` are ready (a failed start brings none: the
   * next take tries again).
   */
  private async fill(): Promise<void> {
    if (this.closed || this.starting || this.ready.length >= this.deps.count) return;
    this.starting = true;
    const id = randomUUID();
    const planned = path.join(this.deps.workdirBase, id);
    let workdir: string | undefined;
    try {
      await this.note(planned);
      if (!this.closed) workdir = this.deps.workdirs.prepare(planned, { isDefault: true }).workdir;
    } catch {
      // not noted, or not made: none this time
    }
    if (workdir === undefined) {
      this.starting = false;
      return;
    }
    const shell = this.deps.shells
      .create({ conversationId: id, workdir, env: {}, sandbox: { network: this.deps.network }, ahead: true })
      .catch(() => null);
    void shell.then((started) => {
      this.starting = false;
      if (started) this.fillSoon(0);
    });
    const warm: Warm = { id, workdir, shell, timer: undefined };
    warm.timer = setTimeout(() => {
      const at = this.ready.indexOf(warm);
      if (at < 0) return;
      this.ready.splice(at, 1);
      // A note not rewritten (the disk is full) names a workdir that is gone: the next start skips it.
      void this.discard(warm)
        .then(() => this.note())
        .catch(() => undefined);
    }, this.deps.idleTimeoutMs);
    warm.timer.unref();
    this.ready.push(warm);
  }

  /**
   * The note rewritten (after the writes before it) with the workdirs made and not taken, and
   * `planned` if given: the workdir about to be made.
   */
  private note(planned?: string): Promise<void> {
    const remember = this.deps.remember;
    if (!remember) return Promise.resolve();
    const written = this.noting.then(() => remember([...this.ready.map((warm) => warm.workdir), ...(planned ? [planned] : [])]));
    this.noting = written.catch(() => undefined);
    return written;
  }

  /** A taken shell its conversation never asked for: closed (the workdir is the conversation's). */
  private async giveUp(warm: Warm): Promise<void> {
    if (this.taken.get(warm.id) !== warm) return;
    this.taken.delete(warm.id);
    clearTimeout(warm.timer);
    await (await warm.shell)?.close();
  }

  private async discard(warm: Warm): Promise<void> {
    clearTimeout(warm.timer);
    await (await warm.shell)?.close();
    await this.deps.workdirs.remove(warm.workdir).catch(() => undefined);
  }
}
