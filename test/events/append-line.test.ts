/**
 * appendLine (webhook deliveries append one line each) and AppendFiles (run records and
 * checkpoints, a line at every step, their files kept open between appends): the file's
 * directory is made when missing, lines go one after another, and a line the disk has no room
 * for is cut back whole, the lines before it untouched. The disk-full case mounts a 64 KiB tmpfs
 * inside the test's temp dir (skipped with one line where mounting is not permitted).
 */
import fs from 'node:fs';
import path from 'node:path';
import { execFileSync } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AppendFiles, appendLine } from '../../src/adapters/files/append-line.js';
import { tempDir } from '../support/agentd.js';
import { fillFilesystem } from '../support/fill-filesystem.js';
import { openFilesWith } from '../support/open-files.js';

let root: string;
let small: string;
let mounted = false;
let mountError = '';

beforeAll(() => {
  root = tempDir('agentd-append-line-');
  small = path.join(root, 'small');
  fs.mkdirSync(small);
  try {
    execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=64k,mode=0700', 'tmpfs', small], { stdio: 'pipe' });
    mounted = true;
  } catch (error) {
    mountError = String((error as { stderr?: Buffer }).stderr ?? error).trim();
  }
});

afterAll(() => {
  if (mounted) execFileSync('umount', ['--lazy', small]);
  fs.rmSync(root, { recursive: true, force: true });
});

/** The files this process holds open among `files`. */
function heldOpen(files: string[]): string[] {
  const held = openFilesWith(root);
  return files.filter((file) => held.includes(file));
}

describe('appendLine', () => {
  it('makes the missing directory, then appends lines in order with the mode asked', () => {
    const file = path.join(root, 'conversation', 'deeper', 'runs.jsonl');
    appendLine(file, '{"n":1}');
    appendLine(file, '{"n":2}');
    expect(fs.readFileSync(file, 'utf8')).toBe('{"n":1}\n{"n":2}\n');
    expect(fs.statSync(file).mode & 0o777).toBe(0o600);
    // Gone meanwhile (the conversation's directory moved aside): made again, as before.
    fs.rmSync(path.dirname(file), { recursive: true });
    appendLine(file, '{"n":3}');
    expect(fs.readFileSync(file, 'utf8')).toBe('{"n":3}\n');
  });

  it('cuts back a line the disk has no room for, keeping the lines before it', (context) => {
    if (!mounted) {
      console.warn(`skipped: cannot mount a tmpfs here (${mountError})`);
      return context.skip();
    }
    const file = path.join(small, 'checkpoints.jsonl');
    appendLine(file, 'first');
    // Most of the room taken by another file: the next line fits only in part (a page or so is free).
    fillFilesystem(path.join(small, 'filler'));
    fs.truncateSync(path.join(small, 'filler'), fs.statSync(path.join(small, 'filler')).size - 6000);
    const long = 'y'.repeat(64 * 1024);
    expect(() => appendLine(file, long)).toThrow(expect.objectContaining({ code: 'ENOSPC' }));
    expect(fs.readFileSync(file, 'utf8')).toBe('first\n');
    fs.rmSync(path.join(small, 'filler'));
    appendLine(file, 'second');
    expect(fs.readFileSync(file, 'utf8')).toBe('first\nsecond\n');
  });
});

describe('AppendFiles', () => {
  it('keeps the files it appends to open, at most `max` of them (the least recently used closed first), each line in order', () => {
    const files = new AppendFiles({ max: 2 });
    const [a, b, c] = ['a', 'b', 'c'].map((name) => path.join(fs.realpathSync(root), 'kept', name, 'runs.jsonl')) as [string, string, string];
    files.append(a, 'a1');
    files.append(b, 'b1');
    files.append(a, 'a2');
    expect(heldOpen([a, b, c])).toEqual([a, b]);
    // c opens: b, used least recently, is closed; a stays.
    files.append(c, 'c1');
    expect(heldOpen([a, b, c])).toEqual([a, c]);
    expect(files.size).toBe(2);
    // b again: a is now the least recently used.
    files.append(b, 'b2');
    expect(heldOpen([a, b, c])).toEqual([b, c]);
    expect(fs.readFileSync(a, 'utf8')).toBe('a1\na2\n');
    expect(fs.readFileSync(b, 'utf8')).toBe('b1\nb2\n');
    expect(fs.statSync(b).mode & 0o777).toBe(0o600);
    files.close(b);
    expect(heldOpen([a, b, c])).toEqual([c]);
    // Closed, then removed with its directory: the next append makes both again.
    fs.rmSync(path.dirname(b), { recursive: true });
    files.append(b, 'b3');
    expect(fs.readFileSync(b, 'utf8')).toBe('b3\n');
    files.closeAll();
    expect(heldOpen([a, b, c])).toEqual([]);
  });

  it('cuts back a line the disk has no room for, and appends whole lines after it', (context) => {
    if (!mounted) {
      console.warn(`skipped: cannot mount a tmpfs here (${mountError})`);
      return context.skip();
    }
    const files = new AppendFiles({ max: 4 });
    const file = path.join(small, 'runs.jsonl');
    files.append(file, 'first');
    fillFilesystem(path.join(small, 'filler'));
    fs.truncateSync(path.join(small, 'filler'), fs.statSync(path.join(small, 'filler')).size - 6000);
    expect(() => files.append(file, 'y'.repeat(64 * 1024))).toThrow(expect.objectContaining({ code: 'ENOSPC' }));
    expect(fs.readFileSync(file, 'utf8')).toBe('first\n');
    fs.rmSync(path.join(small, 'filler'));
    files.append(file, 'second');
    expect(fs.readFileSync(file, 'utf8')).toBe('first\nsecond\n');
    files.closeAll();
  });
});
