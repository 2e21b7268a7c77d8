import { randomUUID } from 'node:crypto';
import path from 'node:path';
import type { Workdirs } from '../conversations/workdirs.js';
import type { ShellCreateOptions, ShellFactory, ShellSession } from '../tools/shell-session.js';

export interface WarmShellsDeps {
  /** The shells of every conversation (tracked by the shell ledger). */
  shells: ShellFactory;
  workdirs: Workdirs;
  /** Where conversations without a workdir of their own get one: `<base>/<id>`. */
  workdirBase: string;
  /** The sandbox network of a conversation that does not choose one. */
  network: boolean | 'host';
  /** A warm shell nobody took for this long is closed and its workdir removed (AGENTD_IDLE_TIMEOUT_S). */
  idleTimeoutMs: number;
  /**
   * Records the workdir made for the next conversation (null: it was removed), so a restart
   * removes one a crash left. Not told of a take (nothing on a conversation's creation path): the
   * workdir is the conversation's then, which the restart finds in use and keeps.
   */
  remember?: (workdir: string | null) => void;
}

/** How long after the next conversation's shell was taken (or given up) the one after it starts: off the path of the start that took it. */
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
 * The shell of the next conversation created without a workdir of its own, started before that
 * conversation exists: its id (and so its default workdir, `<base>/<id>`) is chosen ahead, the
 * workdir made, and its sandboxed shell started there as a shell started ahead is (its workdir given
 * to the agent's uid only before its first command). A conversation created with the server's
 * defaults (no workdir, the default network, an LLM and the bash tool) takes that id and workdir
 * (`take`), and its first shell is that one, given the conversation's secrets (`factory`): the
 * sandbox's start (40 ms here) is then behind it. The next one starts a moment later.
 *
 * One at most, only while conversations are being created: none before the first, none once one
 * waited unused for the idle timeout (it is closed, its workdir removed, until the next creation).
 */
export class WarmShells {
  private next: Warm | undefined;
  private readonly taken = new Map<string, Warm>();
  private refill: NodeJS.Timeout | undefined;
  private closed = false;

  constructor(private readonly deps: WarmShellsDeps) {
    const { shells } = deps;
    this.factory = { create: (options) => this.create(options), ...(shells.killAllForExit && { killAllForExit: () => shells.killAllForExit?.() }) };
  }

  /**
   * The id and workdir for a conversation being created with the defaults, whose shell is
   * starting or started; null when there is none ready (one is started for the next). The
   * conversation must then be created with them (its first shell comes from `factory`).
   */
  take(): { id: string; workdir: string } | null {
    const warm = this.next;
    this.next = undefined;
    this.fillSoon();
    if (!warm) return null;
    clearTimeout(warm.timer);
    warm.timer = setTimeout(() => void this.giveUp(warm), CLAIM_MS);
    warm.timer.unref();
    this.taken.set(warm.id, warm);
    return { id: warm.id, workdir: warm.workdir };
  }

  /** The factory for conversations' shells: a taken conversation's first shell is its warm one. */
  readonly factory: ShellFactory;

  /**
   * Server shutdown: the next conversation's shell is closed and its workdir removed; a taken one
   * its conversation has not asked for yet is closed (the workdir is the conversation's).
   */
  async close(): Promise<void> {
    this.closed = true;
    clearTimeout(this.refill);
    const warm = this.next;
    this.next = undefined;
    await Promise.all([...(warm ? [this.discard(warm)] : []), ...[...this.taken.values()].map((taken) => this.giveUp(taken))]);
  }

  private async create(options: ShellCreateOptions): Promise<ShellSession> {
    const warm = options.shellId === undefined && !options.restore ? this.taken.get(options.conversationId) : undefined;
    if (!warm) return this.deps.shells.create(options);
    this.taken.delete(warm.id);
    clearTimeout(warm.timer);
    const shell = await warm.shell;
    if (shell?.alive && options.workdir === warm.workdir && (options.sandbox?.network ?? true) === this.deps.network) {
      if (Object.keys(options.env).length > 0) await shell.setEnv(options.env);
      return shell;
    }
    await shell?.close();
    return this.deps.shells.create(options);
  }

  private fillSoon(): void {
    if (this.closed || this.next || this.refill) return;
    this.refill = setTimeout(() => {
      this.refill = undefined;
      this.fill();
    }, REFILL_DELAY_MS);
    this.refill.unref();
  }

  private fill(): void {
    if (this.closed || this.next) return;
    const id = randomUUID();
    let workdir: string;
    try {
      workdir = this.deps.workdirs.prepare(path.join(this.deps.workdirBase, id), { isDefault: true }).workdir;
    } catch {
      return;
    }
    this.deps.remember?.(workdir);
    const shell = this.deps.shells
      .create({ conversationId: id, workdir, env: {}, sandbox: { network: this.deps.network }, ahead: true })
      .catch(() => null);
    const warm: Warm = { id, workdir, shell, timer: undefined };
    warm.timer = setTimeout(() => {
      if (this.next !== warm) return;
      this.next = undefined;
      this.deps.remember?.(null);
      void this.discard(warm);
    }, this.deps.idleTimeoutMs);
    warm.timer.unref();
    this.next = warm;
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
