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

export interface SystemMountOptions {
  /** Binaries the agent relies on (node, git, rg, ...), as absolute paths or names looked up in `searchPath`. */
  tools: string[];
  searchPath: string;
  /** Operator-chosen read-only paths. */
  extraReadOnly: readonly string[];
  /** Paths that must not be visible; hidden under an empty tmpfs when a bound directory holds them. */
  hidden: readonly string[];
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
export function systemMountArgs(options: SystemMountOptions): { early: string[]; late: string[] } {
  const early: string[] = [];
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
  const etc = etcEntries();
  // Directories bwrap creates on its own are root-only (0700): make /etc and its subdirectories searchable.
  for (const dir of new Set(['/etc', ...etc.map((entry) => path.dirname(entry))])) early.push('--perms', '0755', '--dir', dir);
  for (const entry of etc) early.push('--ro-bind', entry, entry);
  for (const prefix of toolPrefixes(options)) bind(prefix);
  for (const extra of options.extraReadOnly) if (fs.existsSync(extra)) bind(path.resolve(extra));
  for (const hidden of options.hidden) {
    const real = realpathOrSelf(hidden);
    for (const candidate of new Set([hidden, real])) {
      if (bound.some((dir) => isInside(candidate, dir)) && fs.existsSync(candidate)) (privateDirOf(candidate) ? late : early).push('--tmpfs', candidate);
    }
  }
  return { early, late };
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

export function findInPath(name: string, searchPath: string): string | null {
  for (const dir of searchPath.split(':')) {
    if (!dir) continue;
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
