/**
 * THE path resolver of the server: every user- or model-supplied path (HTTP file routes, upload
 * names, command `cwd`, the agent's file tools) goes through `resolveInWorkdir` before any
 * filesystem call. It returns an absolute real path inside the workdir or throws a typed error:
 *  - InvalidPathError (`invalid_path`, 400): malformed or suspicious forms (NUL and control
 *    bytes, backslashes, percent-encoded dots/separators/percent signs/control bytes, Unicode
 *    look-alikes of `.` and `/`, `~`, drive letters, absolute paths unless allowed, symlink loops).
 *  - PathOutsideWorkdirError (`path_outside_workdir`, 403): `..` climbing above the root, an
 *    absolute path elsewhere, a symlink (anywhere on the path, dangling or not) leaving the root.
 *  - PathNotFoundError (`path_not_found`, 404): only with `mustExist`.
 *
 * Limit: this checks, then the caller acts (time of check / time of use). A process that swaps
 * a directory for a symlink between the two can still win the race; writers should also open
 * files with O_NOFOLLOW (see file-editor) to close it for the final component.
 */
import { lstat, readlink, realpath } from 'node:fs/promises';
import path from 'node:path';
import { InvalidPathError } from './invalid-path-error.js';
import { PathNotFoundError } from './path-not-found-error.js';
import { PathOutsideWorkdirError } from './path-outside-workdir-error.js';

export interface ResolveOptions {
  /** Accept absolute paths that lie inside the workdir (agent tools). HTTP routes leave it off. */
  allowAbsolute?: boolean;
  /** Throw PathNotFoundError when nothing exists at the resolved path. */
  mustExist?: boolean;
  /**
   * Do not follow a symlink in the LAST component: return the link's own path (its parent is
   * still real and inside). Only for operations on the entry itself (unlink, lstat), never for
   * reading or writing through it.
   */
  keepFinalSymlink?: boolean;
}

export interface ParsedUserPath {
  absolute: boolean;
  /** Normalised segments (no '', '.', or '..'). For absolute paths: from the filesystem root. */
  segments: string[];
}

const MAX_PATH_LENGTH = 4096;
const MAX_SEGMENT_BYTES = 255;
/** Bytes that have no business being percent-encoded in a path: controls, '.', '/', '\', '%'. */
const FORBIDDEN_ENCODED_BYTES = new Set([0x2e, 0x2f, 0x5c, 0x25, 0x7f]);
const PERCENT_ESCAPE = /%([0-9a-fA-F]{2})/g;
const CONTROL_CHARS = /[\u0000-\u001f\u007f]/;
const strictUtf8 = new TextDecoder('utf-8', { fatal: true });

/**
 * Syntax checks that need no filesystem: rejects hostile forms and drops `.` segments. A `..`
 * segment is never resolved textually (`sub/file/..` is not `sub`): climbing above the start is
 * path_outside_workdir (403), any other `..` is invalid_path (400).
 */
export function parseUserPath(userPath: string, options: { allowAbsolute?: boolean } = {}): ParsedUserPath {
  if (typeof userPath !== 'string') throw new InvalidPathError(String(userPath), 'a path must be a string');
  if (userPath.length > MAX_PATH_LENGTH) throw new InvalidPathError(userPath, `longer than ${MAX_PATH_LENGTH} characters`);
  if (userPath.includes('\0')) throw new InvalidPathError(userPath, 'it contains a NUL byte');
  if (CONTROL_CHARS.test(userPath)) throw new InvalidPathError(userPath, 'it contains control characters');
  if (userPath.includes('\\')) throw new InvalidPathError(userPath, "backslashes are not accepted; use '/' as the separator");
  checkPercentEscapes(userPath);
  checkUnicodeLookAlikes(userPath);
  if (userPath.startsWith('~')) throw new InvalidPathError(userPath, "'~' is not expanded; give a path relative to the workdir");
  if (/^[A-Za-z]:(\/|$)/.test(userPath)) throw new InvalidPathError(userPath, 'drive-letter paths are not accepted');

  const absolute = userPath.startsWith('/');
  if (absolute && !options.allowAbsolute) {
    throw new InvalidPathError(userPath, 'absolute paths are not accepted; give a path relative to the workdir');
  }
  const segments: string[] = [];
  for (const segment of userPath.split('/')) {
    if (segment === '' || segment === '.') continue;
    if (segment === '..') {
      if (segments.length === 0 && !absolute) throw new PathOutsideWorkdirError(userPath, "'..' climbs above the workdir");
      throw new InvalidPathError(userPath, "'..' segments are not accepted; name the path without them");
    }
    if (Buffer.byteLength(segment) > MAX_SEGMENT_BYTES) {
      throw new InvalidPathError(userPath, `a path segment is longer than ${MAX_SEGMENT_BYTES} bytes`);
    }
    segments.push(segment);
  }
  return { absolute, segments };
}

/**
 * Maps `userPath` onto the workdir and returns the absolute real path. Missing trailing
 * components are allowed (for create/mkdir/upload) unless `mustExist`; every component that
 * exists is checked, and each symlink on the way must resolve inside the workdir.
 */
export async function resolveInWorkdir(workdir: string, userPath: string, options: ResolveOptions = {}): Promise<string> {
  const parsed = parseUserPath(userPath, options);
  const root = await realWorkdir(workdir);
  const segments = parsed.absolute ? absoluteToSegments({ workdir, root, userPath, parsed }) : parsed.segments;

  let current = root;
  for (let index = 0; index < segments.length; index++) {
    const next = path.join(current, segments[index] as string);
    const isLast = index === segments.length - 1;
    const stats = await lstat(next).catch((error: NodeJS.ErrnoException) => {
      if (error.code === 'ENOENT' || error.code === 'ENOTDIR') return undefined;
      throw error;
    });
    if (!stats) {
      if (options.mustExist) throw new PathNotFoundError(userPath);
      return path.join(next, ...segments.slice(index + 1));
    }
    if (!stats.isSymbolicLink()) {
      current = next;
      continue;
    }
    if (isLast && options.keepFinalSymlink) return next;
    current = await followSymlink({ root, link: next, parent: current, userPath });
  }
  return current;
}

/** The path relative to the workdir ('.' for the root itself), for messages and listings. */
export function toWorkdirRelative(workdir: string, absolutePath: string): string {
  const relative = path.relative(workdir, absolutePath);
  if (relative === '') return '.';
  if (relative === '..' || relative.startsWith(`..${path.sep}`) || path.isAbsolute(relative)) {
    throw new PathOutsideWorkdirError(path.basename(absolutePath));
  }
  return relative.split(path.sep).join('/');
}

/** True when `candidate` is `root` or lies below it (both absolute and normalised). */
export function isInsideRoot(root: string, candidate: string): boolean {
  if (candidate === root) return true;
  const prefix = root.endsWith(path.sep) ? root : root + path.sep;
  return candidate.startsWith(prefix);
}

async function realWorkdir(workdir: string): Promise<string> {
  try {
    return await realpath(workdir);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') {
      throw new PathNotFoundError('.', 'The workdir does not exist (it may have been deleted)');
    }
    throw error;
  }
}

function absoluteToSegments(options: { workdir: string; root: string; userPath: string; parsed: ParsedUserPath }): string[] {
  const normalized = path.join('/', ...options.parsed.segments);
  for (const base of [options.root, path.resolve(options.workdir)]) {
    if (isInsideRoot(base, normalized)) {
      return path.relative(base, normalized).split(path.sep).filter((segment) => segment !== '');
    }
  }
  throw new PathOutsideWorkdirError(options.userPath, 'absolute paths must lie inside the workdir');
}

async function followSymlink(options: { root: string; link: string; parent: string; userPath: string }): Promise<string> {
  const { root, link, parent, userPath } = options;
  let target: string;
  try {
    target = await realpath(link);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === 'ELOOP') throw new InvalidPathError(userPath, 'it goes through a symlink loop');
    if (code !== 'ENOENT' && code !== 'ENOTDIR') throw error;
    const lexicalTarget = path.resolve(parent, await readlink(link));
    if (!isInsideRoot(root, lexicalTarget)) {
      throw new PathOutsideWorkdirError(userPath, 'it goes through a symlink that points outside the workdir');
    }
    throw new InvalidPathError(userPath, 'it goes through a dangling symlink');
  }
  if (!isInsideRoot(root, target)) {
    throw new PathOutsideWorkdirError(userPath, 'it goes through a symlink that points outside the workdir');
  }
  return target;
}

function checkPercentEscapes(userPath: string): void {
  const escapes = [...userPath.matchAll(PERCENT_ESCAPE)];
  if (escapes.length === 0) return;
  const bytes = escapes.map((match) => Number.parseInt(match[1] as string, 16));
  for (const byte of bytes) {
    if (byte < 0x20 || FORBIDDEN_ENCODED_BYTES.has(byte)) {
      throw new InvalidPathError(userPath, 'percent-encoded dots, separators, percent signs and control bytes are not accepted');
    }
  }
  // Runs of escaped bytes >= 0x80 must be valid UTF-8 (refuses overlong forms like %c0%ae).
  const highRuns = userPath.match(/(?:%[89a-fA-F][0-9a-fA-F])+/g) ?? [];
  for (const run of highRuns) {
    const runBytes = Uint8Array.from(run.split('%').slice(1), (hex) => Number.parseInt(hex, 16));
    try {
      strictUtf8.decode(runBytes);
    } catch {
      throw new InvalidPathError(userPath, 'it contains percent-encoded bytes that are not valid UTF-8');
    }
  }
  checkUnicodeLookAlikes(decodeEscapes(userPath), userPath);
}

function decodeEscapes(userPath: string): string {
  try {
    return decodeURIComponent(userPath.replace(/%(?![0-9a-fA-F]{2})/g, '%25'));
  } catch {
    return userPath;
  }
}

/** Fullwidth dots and slashes, two-dot leaders...: anything NFKC folds into '.', '/' or '\'. */
function checkUnicodeLookAlikes(candidate: string, reported = candidate): void {
  const folded = candidate.normalize('NFKC');
  if (folded === candidate) return;
  const count = (text: string, char: string) => text.split(char).length - 1;
  const originalSegments = candidate.split('/');
  const newSeparator = count(folded, '/') !== count(candidate, '/') || folded.includes('\\');
  const newDotSegment = folded
    .split('/')
    .some((segment, index) => (segment === '..' || segment === '.') && originalSegments[index] !== segment);
  if (newSeparator || newDotSegment) {
    throw new InvalidPathError(reported, 'it contains Unicode look-alikes of path separators or dots');
  }
}
