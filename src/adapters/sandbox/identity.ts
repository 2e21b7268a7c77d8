import { randomUUID } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { writeFileAtomic, writeFileAtomicAsync } from '../files/index.js';

/**
 * Who the agent is inside the sandbox when the server runs as root. Root ignores RLIMIT_NPROC,
 * so the agent runs as a uid of its own, derived from the workdir (one per conversation, in a
 * range far above real users): the process limit then counts only that conversation's
 * processes, and its files on the host show that uid. The files below give the uid a name
 * (`agent`), so whoami, git, ssh and `os.userInfo()` work, and tell git to trust the workdir
 * whoever owns it (git refuses a repository owned by another user).
 */
export const SANDBOX_USER = 'agent';
const UID_BASE = 1_000_000_000;
const UID_SPAN = 1_000_000_000;

export interface SandboxIdentity {
  uid: number;
  gid: number;
  /** Host files bound read-only over /etc/passwd, /etc/group and /etc/gitconfig. */
  files: { passwd: string; group: string; gitconfig: string };
}

/** A stable uid for a workdir (FNV-1a of its path). */
export function sandboxUid(workdir: string): number {
  let hash = 0x811c9dc5;
  for (const byte of Buffer.from(workdir)) hash = Math.imul(hash ^ byte, 0x01000193) >>> 0;
  return UID_BASE + (hash % UID_SPAN);
}

/** Writes (once) and names the identity files of sandbox users, in a directory of the server's. */
export class SandboxIdentityFiles {
  /**
   * Each file written by this process, with the home it names (passwd) or '' (group): the host's
   * files are read once, so that is all a file's content depends on. Its name and home, never the
   * content itself (a copy of the host's passwd and group per workdir ever used).
   */
  private readonly known = new Map<string, string>();
  /**
   * Per file, its writes through the thread pool, one after the other (kept only while any is
   * queued or under way): a forget marks those it overtakes, which undo themselves, before a write
   * queued after the forget (a new sandbox of the same uid) makes the file again.
   */
  private readonly writing = new Map<string, { tail: Promise<void>; writes: Set<{ forgotten: boolean }> }>();
  private readonly hostPasswd: string;
  private readonly hostGroup: string;
  private readonly gitconfig: string;

  constructor(private readonly dir: string) {
    fs.mkdirSync(dir, { recursive: true, mode: 0o700 });
    this.hostPasswd = readOrEmpty('/etc/passwd');
    this.hostGroup = readOrEmpty('/etc/group');
    this.gitconfig = path.join(dir, 'gitconfig');
    writeAtomically(this.gitconfig, `${withNewline(readOrEmpty('/etc/gitconfig'))}[safe]\n\tdirectory = *\n`);
  }

  /** The identity for a workdir when the agent runs as a uid of its own (root server). */
  forWorkdir(workdir: string): SandboxIdentity {
    const { uid, files } = this.filesOf(workdir);
    const [passwd, group] = files.map(({ name, variant, content }) => this.write(name, variant, content));
    return { uid, gid: uid, files: { passwd: passwd!, group: group!, gitconfig: this.gitconfig } };
  }

  /**
   * forWorkdir's files written through the thread pool, so that forWorkdir then finds them known:
   * a sandbox's start awaits this first (BwrapProcessLauncher.beforeStart). Creating a file holds the
   * event loop while the disk answers, two of them (and their renames) per new uid: every
   * conversation's first sandbox, a warm shell's too, on the path of the runs going on meanwhile.
   */
  async prepare(workdir: string): Promise<void> {
    await Promise.all(this.filesOf(workdir).files.map((file) => this.writeAsync(file.name, file.variant, file.content)));
  }

  /** The uid's two files: name, what their content depends on besides the host's files, and the content. */
  private filesOf(workdir: string): { uid: number; files: { name: string; variant: string; content: () => string }[] } {
    const uid = sandboxUid(workdir);
    // passwd fields cannot hold ':' or a newline; HOME is set in the environment anyway.
    const home = /[:\n]/.test(workdir) ? '/tmp' : workdir;
    return {
      uid,
      files: [
        { name: `passwd-${uid}`, variant: home, content: () => `${withNewline(this.hostPasswd)}${SANDBOX_USER}:x:${uid}:${uid}:agentd sandbox:${home}:/bin/bash\n` },
        { name: `group-${uid}`, variant: '', content: () => `${withNewline(this.hostGroup)}${SANDBOX_USER}:x:${uid}:\n` },
      ],
    };
  }

  /**
   * The workdir's conversation is gone: its uid's files go, and what is kept about them (another
   * workdir of the same uid, if any, has them written again at its next sandbox; a sandbox
   * running holds its own bind mounts of them).
   */
  forget(workdir: string): void {
    const uid = sandboxUid(workdir);
    for (const name of [`passwd-${uid}`, `group-${uid}`]) {
      this.known.delete(name);
      for (const write of this.writing.get(name)?.writes ?? []) write.forgotten = true;
      fs.rmSync(path.join(this.dir, name), { force: true });
    }
  }

  /** How many identity files this process knows it wrote, two per uid (tests). */
  get held(): number {
    return this.known.size;
  }

  /** The identity files for the server's own user (non-root server): the host's, plus the git trust. */
  forServerUser(): SandboxIdentity['files'] {
    return { passwd: '/etc/passwd', group: '/etc/group', gitconfig: this.gitconfig };
  }

  private write(name: string, variant: string, content: () => string): string {
    const file = path.join(this.dir, name);
    if (this.known.get(name) === variant) return file;
    const text = content();
    if (readOrEmpty(file) !== text) writeAtomically(file, text);
    this.known.set(name, variant);
    return file;
  }

  private writeAsync(name: string, variant: string, content: () => string): Promise<void> {
    if (this.known.get(name) === variant) return Promise.resolve();
    const queue = this.writing.get(name) ?? { tail: Promise.resolve(), writes: new Set() };
    this.writing.set(name, queue);
    const write = { forgotten: false };
    queue.writes.add(write);
    const written = queue.tail.then(() => this.writeNow(name, variant, content, write));
    queue.tail = written.then(
      () => this.settled(name, queue, write),
      () => this.settled(name, queue, write),
    );
    return written;
  }

  private async writeNow(name: string, variant: string, content: () => string, write: { forgotten: boolean }): Promise<void> {
    // Forgotten before its turn (forget removed the file), or written by the write before it.
    if (write.forgotten || this.known.get(name) === variant) return;
    const file = path.join(this.dir, name);
    const text = content();
    const found = await fs.promises.readFile(file, 'utf8').catch(() => '');
    if (found !== text) {
      // A name of its own: forWorkdir's synchronous write of the same file (a start that did not await prepare) may run meanwhile.
      await writeFileAtomicAsync(file, text, { mode: 0o644, temp: `${file}.${process.pid}.${randomUUID()}.tmp` });
    }
    // The conversation was deleted meanwhile: its file goes, as forget() meant.
    if (write.forgotten) await fs.promises.rm(file, { force: true });
    else this.known.set(name, variant);
  }

  private settled(name: string, queue: { writes: Set<{ forgotten: boolean }> }, write: { forgotten: boolean }): void {
    queue.writes.delete(write);
    if (queue.writes.size === 0 && this.writing.get(name) === queue) this.writing.delete(name);
  }
}

function readOrEmpty(file: string): string {
  try {
    return fs.readFileSync(file, 'utf8');
  } catch {
    return '';
  }
}

function withNewline(text: string): string {
  return text === '' || text.endsWith('\n') ? text : `${text}\n`;
}

function writeAtomically(file: string, content: string): void {
  writeFileAtomic(file, content, { mode: 0o644, temp: `${file}.${process.pid}.tmp` });
}
