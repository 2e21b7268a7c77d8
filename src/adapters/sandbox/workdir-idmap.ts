import { execFile, execFileSync } from 'node:child_process';
import { promisify } from 'node:util';
import { shellWord } from './mounts.js';

const execFileAsync = promisify(execFile);

/**
 * A workdir the user brought, seen by the agent through an id-mapped mount (server running as
 * root). Such a workdir is never chowned (it is the user's repository), so the agent used to run
 * as its owner: as uid 0 in a repository root owns. Instead, the launch of each sandbox makes its
 * own mount namespace (`unshare --mount`: a copy of the host's mounts at that moment, from which
 * nothing propagates back), and there mounts the workdir over itself with an id mapping: on disk the owner's uid and gid, inside
 * the agent's own. The agent runs as its uid, edits the owner's files as their owner, and what it
 * creates lands on disk as the owner's. The mount lives only in that namespace: it goes with the
 * sandbox's last process, a server killed with -9 leaves none behind, and the host (its data dir
 * included) never holds one that a recursive delete could walk into.
 *
 * The mount is made by a small perl program (perl-base is part of every Debian system) through the
 * kernel's mount calls, `syscall` by number: no native addon. It runs as root on the host with an
 * empty environment (`exec -c`: no PERL5OPT, PERL5LIB or PERLIO of the agent's), in `/`, and opens
 * the workdir once, with no symlink followed on its path (`openat2` RESOLVE_NO_SYMLINKS): the clone
 * of its mount (`open_tree`), the owner it reads (fstat) and the place it mounts onto
 * (`move_mount` to that descriptor) are all that one directory, whatever the agent renames inside.
 * The user namespace that carries the mapping is a child's made for the purpose (`unshare`), whose
 * maps the program writes as root before it keeps a descriptor of it.
 *
 * Whether a workdir can be id-mapped (kernel, filesystem, a container without CAP_SYS_ADMIN) is
 * checked once per workdir by the same program without its last step; where it cannot, the agent
 * runs as the workdir's owner as before, and `onRefused` says why.
 */
export interface WorkdirIdmapOptions {
  /** Absolute paths of perl and unshare (sandboxPrograms). */
  perl: string;
  unshare: string;
  /** A workdir could not be id-mapped: why (once per workdir until it is forgotten). */
  onRefused?: (workdir: string, reason: string) => void;
  /** The host's architecture (default process.arch): the syscall numbers and flags depend on it. */
  arch?: string;
}

/** The agent's uid and gid, which the workdir's owner appears as inside. */
export interface AgentIds {
  uid: number;
  gid: number;
}

/** unshare's number and O_DIRECTORY per architecture; the newer calls have one number everywhere. */
const ABI: Readonly<Record<string, { unshare: number; oDirectory: number }>> = {
  x64: { unshare: 272, oDirectory: 0o200000 },
  arm64: { unshare: 97, oDirectory: 0o40000 },
};
const CHECK_TIMEOUT_MS = 10_000;

export class WorkdirIdmaps {
  /** Per workdir, whether its check passed. */
  private readonly checked = new Map<string, boolean>();
  private readonly checking = new Map<string, Promise<boolean>>();
  private readonly script: string | null;

  constructor(private readonly options: WorkdirIdmapOptions) {
    const abi = ABI[options.arch ?? process.arch];
    this.script = abi ? idmapProgram(abi) : null;
  }

  /** Whether the workdir's sandboxes get the id-mapped mount (checked once, off the event loop). */
  check(workdir: string, ids: AgentIds): Promise<boolean> {
    const known = this.checked.get(workdir);
    if (known !== undefined) return Promise.resolve(known);
    const pending = this.checking.get(workdir);
    if (pending) return pending;
    const checking = this.run(workdir, ids).then((reason) => {
      // Forgotten meanwhile (its conversation deleted): nothing is kept.
      if (this.checking.get(workdir) === checking) this.settle(workdir, reason);
      this.checking.delete(workdir);
      return reason === null;
    });
    this.checking.set(workdir, checking);
    return checking;
  }

  /** As check, blocking: for a start whose check was not awaited first. */
  checkSync(workdir: string, ids: AgentIds): boolean {
    const known = this.checked.get(workdir);
    if (known !== undefined) return known;
    let reason: string | null;
    if (this.script === null) reason = this.unsupported();
    else {
      try {
        execFileSync(this.options.perl, this.perlArgs('check', workdir, ids), { cwd: '/', env: {}, stdio: ['ignore', 'ignore', 'pipe'], timeout: CHECK_TIMEOUT_MS });
        reason = null;
      } catch (error) {
        reason = failure(error);
      }
    }
    return this.settle(workdir, reason);
  }

  /** The workdir's conversation is gone: a later use checks it again. */
  forget(workdir: string): void {
    this.checked.delete(workdir);
    this.checking.delete(workdir);
  }

  /** What a launch runs under: a mount namespace of its own (slave: the host's later mounts may still arrive), where the mount is made. */
  launchPrefix(): string[] {
    return [this.options.unshare, '--mount', '--propagation', 'slave', '--'];
  }

  /** The launch's first line: the workdir mounted over itself, id-mapped (the start fails if it cannot be). */
  launchLine(workdir: string, ids: AgentIds): string {
    const args = this.perlArgs('mount', workdir, ids).map(shellWord).join(' ');
    return `( exec -c ${shellWord(this.options.perl)} ${args} ) || exit 126`;
  }

  private async run(workdir: string, ids: AgentIds): Promise<string | null> {
    if (this.script === null) return this.unsupported();
    try {
      await execFileAsync(this.options.perl, this.perlArgs('check', workdir, ids), { cwd: '/', env: {}, timeout: CHECK_TIMEOUT_MS });
      return null;
    } catch (error) {
      return failure(error);
    }
  }

  private settle(workdir: string, reason: string | null): boolean {
    this.checked.set(workdir, reason === null);
    if (reason !== null) this.options.onRefused?.(workdir, reason);
    return reason === null;
  }

  private unsupported(): string {
    return `no id-mapped mounts on ${this.options.arch ?? process.arch}`;
  }

  private perlArgs(mode: 'check' | 'mount', workdir: string, ids: AgentIds): string[] {
    return ['-e', this.script ?? '', '--', mode, workdir, String(ids.uid), String(ids.gid)];
  }
}

/** The program's own words on stderr (`agentd idmap: <step>: <error>`), else what node says. */
function failure(error: unknown): string {
  const stderr = (error as { stderr?: Buffer | string }).stderr?.toString().trim();
  return stderr || (error instanceof Error ? error.message : String(error));
}

/**
 * The perl program: `check|mount WORKDIR UID GID`. Every step that fails prints what it was and
 * the kernel's error, and exits 1. `check` stops before the mount is attached anywhere (the
 * detached clone goes with the process).
 */
function idmapProgram(abi: { unshare: number; oDirectory: number }): string {
  const O_PATH = 0o10000000;
  const O_CLOEXEC = 0o2000000;
  const RESOLVE_NO_MAGICLINKS = 0x02;
  const RESOLVE_NO_SYMLINKS = 0x04;
  const OPEN_TREE_CLONE = 1;
  const AT_EMPTY_PATH = 0x1000;
  const AT_RECURSIVE = 0x8000;
  const MOUNT_ATTR_IDMAP = 0x100000;
  const MOVE_MOUNT_F_EMPTY_PATH = 0x04;
  const MOVE_MOUNT_T_EMPTY_PATH = 0x40;
  const CLONE_NEWUSER = 0x10000000;
  const [OPENAT2, OPEN_TREE, MOVE_MOUNT, MOUNT_SETATTR] = [437, 428, 429, 442];
  return `
my ($mode, $workdir, $uid, $gid) = @ARGV;
sub fail { print STDERR "agentd idmap: $_[0]: $_[1]\\n"; exit 1 }
chdir '/' or fail('chdir /', $!);
my $none = '';
my $how = pack 'QQQ', ${O_PATH | O_CLOEXEC | abi.oDirectory}, 0, ${RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS};
my $dir = syscall ${OPENAT2}, -100, $workdir, $how, length $how;
$dir >= 0 or fail('open the workdir', $!);
my @owner = (stat "/proc/self/fd/$dir")[4, 5];
@owner == 2 or fail('stat the workdir', $!);
my $tree = syscall ${OPEN_TREE}, $dir, $none, ${OPEN_TREE_CLONE | O_CLOEXEC | AT_EMPTY_PATH | AT_RECURSIVE};
$tree >= 0 or fail('clone its mount', $!);
pipe my $told, my $tell or fail('pipe', $!);
pipe my $held, my $release or fail('pipe', $!);
my $pid = fork;
defined $pid or fail('fork', $!);
if ($pid == 0) {
  close $told; close $release;
  syswrite $tell, syscall(${abi.unshare}, ${CLONE_NEWUSER}) == 0 ? '.' : "$!";
  sysread $held, my $end, 1;
  exit 0;
}
close $tell; close $held;
my $answer = '';
sysread $told, $answer, 200;
$answer eq '.' or fail('make a user namespace', $answer || 'no answer');
for (['uid_map', "$owner[0] $uid 1\\n"], ['gid_map', "$owner[1] $gid 1\\n"]) {
  my ($file, $line) = @$_;
  sysopen my $map, "/proc/$pid/$file", 1 or fail("open its $file", $!);
  syswrite $map, $line or fail("write its $file", $!);
  close $map or fail("write its $file", $!);
}
sysopen my $ns, "/proc/$pid/ns/user", 0 or fail('open the user namespace', $!);
close $release;
waitpid $pid, 0;
my $attr = pack 'QQQQ', ${MOUNT_ATTR_IDMAP}, 0, 0, fileno $ns;
syscall(${MOUNT_SETATTR}, $tree, $none, ${AT_EMPTY_PATH | AT_RECURSIVE}, $attr, length $attr) == 0 or fail('id-map the mount', $!);
exit 0 if $mode ne 'mount';
syscall(${MOVE_MOUNT}, $tree, $none, $dir, $none, ${MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH}) == 0 or fail('mount it over the workdir', $!);
`;
}
