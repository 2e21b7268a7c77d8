import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

/**
 * The read-only part of the sandbox's filesystem, computed once per server: system directories,
 * an allowlist of /etc (what programs need to run, resolve names, verify TLS and find their
 * alternatives; not shadow, not the server's own config), the installation of the tools the agent
 * is expected to use when they live outside the system directories (node under nvm, ...), and
 * paths the operator adds (AGENTD_SANDBOX_RO_PATHS). `/` is never bound wholesale: the data dir,
 * the key files, other conversations' workdirs and the server's home simply are not there.
 */
const SYSTEM_DIRS = ['/usr', '/bin', '/sbin', '/lib', '/lib32', '/lib64', '/libx32', '/nix/store'];

const ETC_ENTRIES = [
  'alternatives', 'ld.so.cache', 'ld.so.conf', 'ld.so.conf.d', 'localtime', 'timezone', 'locale.alias', 'locale.conf', 'default/locale',
  'resolv.conf', 'hosts', 'host.conf', 'nsswitch.conf', 'gai.conf', 'services', 'protocols', 'networks',
  'ssl', 'ca-certificates', 'ca-certificates.conf', 'pki', 'crypto-policies',
  'os-release', 'lsb-release', 'debian_version', 'mime.types', 'magic', 'inputrc', 'terminfo', 'manpath.config',
  'ssh/ssh_config', 'ssh/ssh_config.d', 'ssh/ssh_known_hosts', 'npmrc', 'pip.conf', 'perl', 'vim', 'wgetrc',
];
/** /etc entries matched by name: python3, python3.11, java-17-openjdk, ... */
const ETC_PATTERNS = [/^python3(\.\d+)?$/, /^java-/];

/**
 * The /etc files (not directories) the sandbox gets as copies, written into its root by bwrap
 * (`--file FD`) from a descriptor the launch script opens, instead of one bind mount each. bwrap
 * reads the whole mount table after every bind to set its flags: a bind per file of the allowlist
 * was a sizeable part of every sandbox's start, and a copy costs next to nothing. A copy is made
 * at each start, so it is as current as a bind made then; the root is made read-only after, as
 * for the binds. Files up to COPY_MAX_BYTES, readable by the server, at most COPY_FD_COUNT of
 * them; any other entry is bound as before.
 */
export interface CopiedFile {
  /** The host's file (read through symlinks, as a bind would), and where it goes in the sandbox. */
  source: string;
  /** The descriptor the launch script opens it on and bwrap reads. */
  fd: number;
  /** Its permission bits on the host (set-id and sticky bits dropped). */
  mode: number;
}

/** The descriptors of copied files: 20 up (bwrap's info fd is 9, the seccomp program's 10; bash's own land at 10 and up, and 63 for a process substitution). */
const COPY_FIRST_FD = 20;
const COPY_FD_COUNT = 30;
const COPY_MAX_BYTES = 256 * 1024;

export interface SystemMountOptions {
  /** Binaries the agent relies on (node, git, rg, ...), as absolute paths or names looked up in `searchPath`. */
  tools: string[];
  searchPath: string;
  /** Operator-chosen read-only paths. */
  extraReadOnly: readonly string[];
  /** Paths that must not be visible; hidden under an empty tmpfs when a bound directory holds them. */
  hidden: readonly string[];
  /**
   * /etc's allowlist (default), or only these entries, bound (the light sandbox of the server's
   * own git: the loader's cache, no copies).
   */
  etc?: readonly string[];
}

/**
 * Directories the sandbox covers with a private tmpfs after the system mounts: a path bound from
 * inside one of them (a repository cloned under /tmp holding a tool or an MCP server) must be
 * bound after that tmpfs, or the tmpfs hides it.
 */
export const PRIVATE_TMP_DIRS = ['/tmp', '/dev/shm'] as const;

/**
 * bwrap arguments: ro-binds and symlinks of the system, then empty tmpfs over hidden paths inside
 * them. `late` holds the binds of paths inside PRIVATE_TMP_DIRS: they go after those tmpfs mounts.
 */
export function systemMountArgs(options: SystemMountOptions): { early: string[]; late: string[]; copies: CopiedFile[] } {
  const early: string[] = [];
  const copies: CopiedFile[] = [];
  const late: string[] = [];
  const bound: string[] = [];
  const made = new Set<string>();
  const privateDirOf = (source: string) => PRIVATE_TMP_DIRS.find((dir) => isInside(source, dir) && source !== dir);
  const bind = (source: string): void => {
    if (bound.some((dir) => isInside(source, dir))) return;
    const privateDir = privateDirOf(source);
    const args = privateDir ? late : early;
    // Parents bwrap would create on its own are root-only (0700): the agent's uid could not reach
    // the path. They are created searchable first, shallowest first (inside a private tmp dir,
    // below that dir: the tmpfs itself is world-searchable).
    const parents: string[] = [];
    for (let dir = path.dirname(source); dir !== path.dirname(dir); dir = path.dirname(dir)) parents.unshift(dir);
    for (const dir of parents) {
      if (privateDir && !isInside(dir, privateDir)) continue;
      if (dir === privateDir) continue;
      if (made.has(dir) || bound.some((bind) => isInside(dir, bind))) continue;
      args.push('--perms', '0755', '--dir', dir);
      made.add(dir);
    }
    args.push('--ro-bind', source, source);
    bound.push(source);
  };
  for (const dir of SYSTEM_DIRS) {
    const stat = lstatOrNull(dir);
    if (stat?.isSymbolicLink()) early.push('--symlink', fs.readlinkSync(dir), dir);
    else if (stat?.isDirectory()) bind(dir);
  }
  const etc = options.etc ? options.etc.filter((entry) => fs.existsSync(entry)) : etcEntries();
  // Directories bwrap creates on its own are root-only (0700): make /etc and its subdirectories searchable.
  for (const dir of new Set(['/etc', ...etc.map((entry) => path.dirname(entry))])) early.push('--perms', '0755', '--dir', dir);
  for (const entry of etc) {
    const mode = !options.etc && copies.length < COPY_FD_COUNT ? copyableMode(entry) : null;
    if (mode === null) {
      early.push('--ro-bind', entry, entry);
      continue;
    }
    const copy = { source: entry, fd: COPY_FIRST_FD + copies.length, mode };
    copies.push(copy);
    early.push('--perms', copy.mode.toString(8).padStart(4, '0'), '--file', String(copy.fd), copy.source);
  }
  for (const prefix of toolPrefixes(options)) bind(prefix);
  for (const extra of options.extraReadOnly) if (fs.existsSync(extra)) bind(path.resolve(extra));
  for (const hidden of options.hidden) {
    const real = realpathOrSelf(hidden);
    for (const candidate of new Set([hidden, real])) {
      if (bound.some((dir) => isInside(candidate, dir)) && fs.existsSync(candidate)) (privateDirOf(candidate) ? late : early).push('--tmpfs', candidate);
    }
  }
  return { early, late, copies };
}

/** The permission bits an /etc entry is copied with, or null when it is bound instead (see CopiedFile). */
function copyableMode(entry: string): number | null {
  try {
    const stat = fs.statSync(entry);
    if (!stat.isFile() || stat.size > COPY_MAX_BYTES) return null;
    fs.accessSync(entry, fs.constants.R_OK);
    return stat.mode & 0o777;
  } catch {
    return null;
  }
}

/**
 * The launch script's lines that open each copied file on its descriptor. One the server can no
 * longer read (or that is gone) becomes an empty file rather than a sandbox that cannot start.
 */
export function copiedFileRedirections(copies: readonly CopiedFile[]): string[] {
  return copies.map((copy) => `{ exec ${copy.fd}<${shellWord(copy.source)}; } 2>/dev/null || exec ${copy.fd}</dev/null`);
}


function etcEntries(): string[] {
  let names: string[] = [];
  try {
    names = fs.readdirSync('/etc');
  } catch {
    return [];
  }
  const matched = names.filter((name) => ETC_PATTERNS.some((pattern) => pattern.test(name)));
  return [...ETC_ENTRIES, ...matched].map((name) => path.join('/etc', name)).filter((entry) => fs.existsSync(entry));
}

/**
 * Where each tool is installed, when that is outside the system directories: the prefix above a
 * `bin` directory (node's lib/ sits beside it), unless that prefix is a home or `/`, in which case
 * only the binary itself.
 */
function toolPrefixes(options: SystemMountOptions): string[] {
  const prefixes: string[] = [];
  for (const tool of options.tools) {
    const found = path.isAbsolute(tool) ? tool : findInPath(tool, options.searchPath);
    const real = found ? realpathOrNull(found) : null;
    if (!real || SYSTEM_DIRS.some((dir) => isInside(real, realpathOrSelf(dir)))) continue;
    const dir = path.dirname(real);
    const prefix = path.basename(dir) === 'bin' ? path.dirname(dir) : dir;
    prefixes.push(isPersonal(prefix) ? real : prefix);
  }
  return prefixes;
}

function isPersonal(dir: string): boolean {
  const home = os.homedir();
  return dir === '/' || dir === '/root' || dir === '/home' || path.dirname(dir) === '/home' || dir === home || isInside(home, dir);
}

/**
 * The first executable `name` on the absolute entries of `searchPath`. A relative entry (or an
 * empty one: the current directory) is skipped: the sandbox's machinery runs with the workdir as
 * its current directory, where the agent writes, so `node_modules/.bin` in AGENTD_AGENT_PATH made
 * the agent's own `setpriv` run as root on the host.
 */
export function findInPath(name: string, searchPath: string): string | null {
  for (const dir of searchPath.split(':')) {
    if (!dir || !path.isAbsolute(dir)) continue;
    const candidate = path.join(dir, name);
    try {
      fs.accessSync(candidate, fs.constants.X_OK);
      if (fs.statSync(candidate).isFile()) return candidate;
    } catch {
      // not here
    }
  }
  return null;
}

export function isInside(child: string, parent: string): boolean {
  const relative = path.relative(parent, child);
  return relative === '' || (!relative.startsWith('..') && !path.isAbsolute(relative));
}

function lstatOrNull(file: string): fs.Stats | null {
  try {
    return fs.lstatSync(file);
  } catch {
    return null;
  }
}

function realpathOrNull(file: string): string | null {
  try {
    return fs.realpathSync(file);
  } catch {
    return null;
  }
}

function realpathOrSelf(file: string): string {
  return realpathOrNull(file) ?? file;
}

/** The programs the sandbox's own scripts run (before and while they drop privileges), by absolute path. */
export interface SandboxPrograms {
  bash: string;
  env: string;
  setpriv: string;
  mkdir: string;
  sleep: string;
  rmdir: string;
  /** A workdir's id-mapped mount, in the launch's own mount namespace (workdir-idmap.ts). */
  perl: string;
  unshare: string;
}

const SYSTEM_PATH = '/usr/local/bin:/usr/bin:/bin:/usr/local/sbin:/usr/sbin:/sbin';

/**
 * Where the sandbox's scripts find their programs: on the absolute entries of the agent's PATH
 * (as the agent's tools are), else in the system's directories. Never by name at run time: a
 * name is looked up on the agent's PATH from the workdir, and a relative entry there would find
 * what the agent wrote (see findInPath).
 */
export function sandboxPrograms(searchPath: string): SandboxPrograms {
  const find = (name: string) => findInPath(name, searchPath) ?? findInPath(name, SYSTEM_PATH) ?? `/usr/bin/${name}`;
  return { bash: find('bash'), env: find('env'), setpriv: find('setpriv'), mkdir: find('mkdir'), sleep: find('sleep'), rmdir: find('rmdir'), perl: find('perl'), unshare: find('unshare') };
}

/** Quotes any text as one word for bash (or sh): single quotes, each `'` inside closed and escaped. */
export function shellWord(text: string): string {
  return `'${text.replaceAll("'", "'\\''")}'`;
}
