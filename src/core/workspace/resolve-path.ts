/**
 * The syntax half of THE path resolver of the server: every user- or model-supplied path (HTTP
 * file routes, upload names, command `cwd`, the agent's file tools) goes through
 * WorkdirFileSystem.pin (adapters/workspace/pin-path.ts) before any filesystem call, which
 * starts here. Its typed errors:
 *  - InvalidPathError (`invalid_path`): malformed or suspicious forms (NUL and control
 *    bytes, backslashes, percent-encoded dots/separators/percent signs/control bytes, Unicode
 *    look-alikes of `.` and `/`, `~`, drive letters, absolute paths unless allowed, symlink loops).
 *  - PathOutsideWorkdirError (`path_outside_workdir`): `..` climbing above the root, an
 *    absolute path elsewhere, a symlink (anywhere on the path, dangling or not) leaving the root.
 *  - PathNotFoundError (`path_not_found`): only with `mustExist`.
 *
 * adapters/workspace/pin-path.ts walks the filesystem with every directory held open, so the
 * check and the use cannot be separated by a swapped symlink.
 */
import path from 'node:path';
import { InvalidPathError } from './invalid-path-error.js';
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
 * path_outside_workdir, any other `..` is invalid_path.
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
