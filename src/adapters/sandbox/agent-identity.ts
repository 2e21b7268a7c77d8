import fs from 'node:fs';
import path from 'node:path';
import { SandboxIdentityFiles, sandboxUid, type SandboxIdentity } from './identity.js';
import { WorkdirIdmaps } from './workdir-idmap.js';
import { WorkdirOwner } from './workdir-owner.js';

/** Who the agent runs as (server is root), and how its workdir is shown to it. */
export interface AgentIdentity {
  uid: number;
  gid: number;
  files: SandboxIdentity['files'];
  /** A workdir agentd made, given to the uid (workdir-owner.ts). */
  own: boolean;
  /** The uid is the sandbox's `agent` (its passwd names it), not a user of the host. */
  named: boolean;
  /** A workdir the user brought, mounted id-mapped: its owner appears as the uid (workdir-idmap.ts). */
  idmapped: boolean;
}

export interface AgentIdentityOptions {
  /** Where the identity files are written (inside the data dir). */
  stateDir: string;
  /** Where the workdirs agentd creates lie (BwrapLauncherOptions.createdWorkdirBase). */
  createdWorkdirBase?: string;
  /** perl and unshare, by absolute path (sandboxPrograms). */
  programs: { perl: string; unshare: string };
  onIdmapRefused?: (workdir: string, reason: string) => void;
}

/**
 * Who the agent runs as in a workdir when the server runs as root, and what that needs done
 * first. A workdir agentd made is given to a uid of the agent's own (chowned once); one the user
 * brought is never chowned, and is shown to that same kind of uid through an id-mapped mount, its
 * owner's files as the uid's; where the kernel or the filesystem refuses that mapping, the agent
 * runs as the workdir's owner, as it always did.
 */
export class AgentIdentities {
  readonly files: SandboxIdentityFiles;
  private readonly owner = new WorkdirOwner();
  private readonly idmaps: WorkdirIdmaps;

  constructor(private readonly options: AgentIdentityOptions) {
    this.files = new SandboxIdentityFiles(options.stateDir);
    this.idmaps = new WorkdirIdmaps({ ...options.programs, ...(options.onIdmapRefused && { onRefused: options.onIdmapRefused }) });
  }

  /** The slow part, off the event loop: a made workdir given away, a brought one's mapping checked. */
  async ready(workdir: string): Promise<void> {
    if (!this.givesOwnUid(workdir)) return void (await this.idmapped(workdir));
    const identity = this.files.forWorkdir(workdir);
    await this.owner.ensureAsync({ workdir, uid: identity.uid, gid: identity.gid });
  }

  /** The identity files of a uid of the agent's own (in a made workdir, or a brought one id-mapped), off the event loop. */
  async prepare(workdir: string): Promise<void> {
    if (this.givesOwnUid(workdir) || (await this.idmapped(workdir))) await this.files.prepare(workdir);
  }

  /**
   * A uid of its own in a workdir agentd made, and in one the user brought when it can be
   * id-mapped; else the workdir's owner (uid 0 in one root owns).
   */
  identityFor(workdir: string): AgentIdentity {
    if (this.givesOwnUid(workdir)) return { ...this.files.forWorkdir(workdir), own: true, named: true, idmapped: false };
    const stats = fs.statSync(workdir);
    const uid = sandboxUid(workdir);
    if (stats.uid !== uid && this.idmaps.checkSync(workdir, { uid, gid: uid })) return { ...this.files.forWorkdir(workdir), own: false, named: true, idmapped: true };
    return { uid: stats.uid, gid: stats.gid, files: this.files.forServerUser(), own: false, named: false, idmapped: false };
  }

  /** Gives a made workdir to the agent's uid now (a start whose `ready` was not awaited). */
  giveNow(workdir: string, identity: AgentIdentity): void {
    if (identity.own) this.owner.ensure({ workdir, uid: identity.uid, gid: identity.gid });
  }

  /** What the launch of an id-mapped workdir's sandbox adds: the command it runs under and its first line. */
  launch(workdir: string, identity: AgentIdentity | null): { prefix: string[]; line: string[] } {
    if (!identity?.idmapped) return { prefix: [], line: [] };
    return { prefix: this.idmaps.launchPrefix(), line: [this.idmaps.launchLine(workdir, identity)] };
  }

  forget(workdir: string): void {
    this.owner.forget(workdir);
    this.idmaps.forget(workdir);
    this.files.forget(workdir);
  }

  /** How many workdirs are known given away (tests). */
  get owned(): number {
    return this.owner.held;
  }

  /** Whether a brought workdir is shown id-mapped (checked once per workdir). */
  private idmapped(workdir: string): Promise<boolean> {
    const uid = sandboxUid(workdir);
    return this.idmaps.check(workdir, { uid, gid: uid });
  }

  /**
   * Whether a workdir is one agentd made (then given to a uid of its own), rather than one the
   * user brought (the CLI's current directory, a client's `workdir`): chowning the user's
   * repository to another uid made git refuse it and took the user's files away from them.
   */
  private givesOwnUid(workdir: string): boolean {
    const base = this.options.createdWorkdirBase;
    if (base === undefined) return true;
    const relative = path.relative(base, workdir);
    return relative !== '' && !relative.startsWith('..') && !path.isAbsolute(relative);
  }
}
