import { readFile, realpath } from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { InvalidPathError } from '../../src/core/workspace/invalid-path-error.js';
import { PathNotFoundError } from '../../src/core/workspace/path-not-found-error.js';
import { PathOutsideWorkdirError } from '../../src/core/workspace/path-outside-workdir-error.js';
import { resolveInWorkdir } from '../../src/adapters/workspace/pin-path.js';
import { isInsideRoot, parseUserPath, toWorkdirRelative } from '../../src/core/workspace/resolve-path.js';
import { CANARY_CONTENT, createTraversalFixture, type TraversalFixture } from '../support/traversal-fixture.js';

let fixture: TraversalFixture;
let root: string;

beforeAll(async () => {
  fixture = await createTraversalFixture();
  root = await realpath(fixture.workdir);
});
afterAll(async () => {
  await fixture.cleanup();
});

function isTypedRefusal(error: unknown): boolean {
  return error instanceof InvalidPathError || error instanceof PathOutsideWorkdirError;
}

describe('resolveInWorkdir: traversal corpus', () => {
  it('has at least 50 payloads', () => {
    expect(fixture.payloads.length).toBeGreaterThanOrEqual(50);
  });

  for (const allowAbsolute of [false, true]) {
    for (const mustExist of [false, true]) {
      it(`refuses every payload with a typed error (allowAbsolute=${allowAbsolute}, mustExist=${mustExist})`, async () => {
        const before = await fixture.outsideSnapshot();
        const accepted: string[] = [];
        for (const payload of fixture.payloads) {
          for (const workdir of [fixture.workdir, fixture.workdirLink]) {
            try {
              const resolved = await resolveInWorkdir(workdir, payload, { allowAbsolute, mustExist });
              accepted.push(`${JSON.stringify(payload)} -> ${resolved}`);
            } catch (error) {
              if (!isTypedRefusal(error)) accepted.push(`${JSON.stringify(payload)} threw ${String(error)}`);
            }
          }
        }
        expect(accepted).toEqual([]);
        expect(await fixture.outsideSnapshot()).toBe(before);
        await fixture.assertDecoysIntact();
        expect(await readFile(fixture.canary, 'utf8')).toBe(CANARY_CONTENT);
      });
    }
  }

  it('uses stable codes: invalid_path for malformed forms, path_outside_workdir for escapes', async () => {
    await expect(resolveInWorkdir(fixture.workdir, '%2e%2e/x')).rejects.toMatchObject({ code: 'invalid_path' });
    await expect(resolveInWorkdir(fixture.workdir, 'a\0b')).rejects.toMatchObject({ code: 'invalid_path' });
    await expect(resolveInWorkdir(fixture.workdir, '/etc/passwd')).rejects.toMatchObject({ code: 'invalid_path' });
    await expect(resolveInWorkdir(fixture.workdir, '../canary.txt')).rejects.toMatchObject({ code: 'path_outside_workdir' });
    await expect(resolveInWorkdir(fixture.workdir, 'link-canary')).rejects.toMatchObject({ code: 'path_outside_workdir' });
    await expect(resolveInWorkdir(fixture.workdir, '/etc/passwd', { allowAbsolute: true })).rejects.toMatchObject({
      code: 'path_outside_workdir',
    });
    await expect(resolveInWorkdir(fixture.workdir, 'dangling-out')).rejects.toBeInstanceOf(PathOutsideWorkdirError);
  });

  it('never puts the server path of the workdir in error messages', async () => {
    for (const payload of fixture.payloads.filter((item) => !item.startsWith('/'))) {
      const error = await resolveInWorkdir(fixture.workdir, payload).catch((caught: Error) => caught);
      expect((error as Error).message).not.toContain(fixture.base);
    }
  });
});

describe('resolveInWorkdir: legitimate paths', () => {
  const cases: Array<[string, string]> = [
    ['', '.'],
    ['.', '.'],
    ['./', '.'],
    ['src/a.txt', 'src/a.txt'],
    ['./src//a.txt', 'src/a.txt'],
    ['src/', 'src'],
    ['new/dir/file.txt', 'new/dir/file.txt'],
    ['link-in/a.txt', 'src/a.txt'],
    ['link-in-file', 'src/a.txt'],
    ['link-in/new.txt', 'src/new.txt'],
    ['100% done.txt', '100% done.txt'],
    ['a%20b.txt', 'a%20b.txt'],
    ['caf\u00e9 %C3%A9.txt', 'caf\u00e9 %C3%A9.txt'],
    ['...', '...'],
    ['....//....//x', '..../..../x'],
    ['.hidden', '.hidden'],
    ['file:/etc/passwd', 'file:/etc/passwd'],
    ['src/a.txt/child', 'src/a.txt/child'],
  ];
  for (const [input, expected] of cases) {
    it(`resolves ${JSON.stringify(input)} inside the workdir`, async () => {
      for (const workdir of [fixture.workdir, fixture.workdirLink]) {
        const resolved = await resolveInWorkdir(workdir, input);
        expect(isInsideRoot(root, resolved)).toBe(true);
        expect(toWorkdirRelative(root, resolved)).toBe(expected);
      }
    });
  }

  it('accepts absolute paths inside the workdir only with allowAbsolute', async () => {
    const inside = path.join(fixture.workdir, 'src', 'a.txt');
    await expect(resolveInWorkdir(fixture.workdir, inside)).rejects.toBeInstanceOf(InvalidPathError);
    expect(await resolveInWorkdir(fixture.workdir, inside, { allowAbsolute: true })).toBe(path.join(root, 'src/a.txt'));
    const viaLink = path.join(fixture.workdirLink, 'src', 'a.txt');
    expect(await resolveInWorkdir(fixture.workdirLink, viaLink, { allowAbsolute: true })).toBe(path.join(root, 'src/a.txt'));
    expect(await resolveInWorkdir(fixture.workdir, `${fixture.workdir}/`, { allowAbsolute: true })).toBe(root);
  });

  it('throws PathNotFoundError with mustExist', async () => {
    await expect(resolveInWorkdir(fixture.workdir, 'missing.txt', { mustExist: true })).rejects.toBeInstanceOf(PathNotFoundError);
    await expect(resolveInWorkdir(fixture.workdir, 'src/a.txt/x', { mustExist: true })).rejects.toMatchObject({ code: 'path_not_found' });
    expect(await resolveInWorkdir(fixture.workdir, 'src/a.txt', { mustExist: true })).toBe(path.join(root, 'src/a.txt'));
  });

  it('keepFinalSymlink returns the link itself, still checking its parents', async () => {
    expect(await resolveInWorkdir(fixture.workdir, 'link-canary', { keepFinalSymlink: true })).toBe(path.join(root, 'link-canary'));
    await expect(resolveInWorkdir(fixture.workdir, 'link-out-dir/secret.txt', { keepFinalSymlink: true })).rejects.toBeInstanceOf(
      PathOutsideWorkdirError,
    );
  });

  it('refuses a dangling symlink that points inside, and symlink loops, as invalid', async () => {
    await expect(resolveInWorkdir(fixture.workdir, 'loop-a')).rejects.toMatchObject({ code: 'invalid_path' });
  });

  it('reports a missing workdir as not found', async () => {
    await expect(resolveInWorkdir(path.join(fixture.base, 'nope'), 'x')).rejects.toBeInstanceOf(PathNotFoundError);
  });
});

describe('parseUserPath and toWorkdirRelative', () => {
  it('normalises segments without touching the filesystem', () => {
    expect(parseUserPath('a/./b/c/')).toEqual({ absolute: false, segments: ['a', 'b', 'c'] });
    // `..` is never resolved textually, even where it would stay inside (`sub/file/..` is not `sub`).
    for (const inside of ['a/./b/../c/', 'src/../src/a.txt', 'sub/up.txt/..', 'x/..']) expect(() => parseUserPath(inside), inside).toThrow(InvalidPathError);
    expect(parseUserPath('/x/y', { allowAbsolute: true })).toEqual({ absolute: true, segments: ['x', 'y'] });
    expect(() => parseUserPath('../b')).toThrow(PathOutsideWorkdirError);
    expect(() => parseUserPath('a/../../b')).toThrow(InvalidPathError);
    expect(() => parseUserPath('x'.repeat(300))).toThrow(InvalidPathError);
  });

  it('maps absolute paths back to workdir-relative ones and refuses outsiders', () => {
    expect(toWorkdirRelative(root, root)).toBe('.');
    expect(toWorkdirRelative(root, path.join(root, 'src', 'a.txt'))).toBe('src/a.txt');
    expect(() => toWorkdirRelative(root, fixture.canary)).toThrow(PathOutsideWorkdirError);
    expect(isInsideRoot(root, `${root}-sibling/x`)).toBe(false);
  });
});
