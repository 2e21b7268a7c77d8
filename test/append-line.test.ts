/**
 * appendLine (run records, checkpoints and webhook deliveries append one line each): the file's
 * directory is made when missing, lines go one after another, and a line the disk has no room
 * for is cut back whole, the lines before it untouched. The disk-full case mounts a 64 KiB tmpfs
 * inside the test's temp dir (skipped with one line where mounting is not permitted).
 */
import fs from 'node:fs';
import path from 'node:path';
import { execFileSync } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { appendLine } from '../src/adapters/append-line.js';
import { tempDir } from './support/agentd.js';
import { fillFilesystem } from './support/fill-filesystem.js';

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
