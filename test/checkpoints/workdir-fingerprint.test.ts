// The workdir's stat fingerprint, taken before each file-changing tool call (issue 19): a big
// workdir is walked in slices, so the server's event loop serves its other conversations between
// them; a small one in one go; and every change still makes another print.
import fs from 'node:fs';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { DirectoryListings, unchangedSince, workdirFingerprint } from '../../src/adapters/git/workdir-fingerprint.js';
import { tempDir } from '../support/agentd.js';
import { turnsDuring } from '../support/event-loop-turns.js';

let workdir: string;

beforeEach(() => {
  workdir = tempDir('agentd-fingerprint-');
});
afterEach(() => {
  vi.restoreAllMocks();
  fs.rmSync(workdir, { recursive: true, force: true });
});

/** `count` files spread over ten directories, their stamps set in the past (not racy: no content hashed). */
function populate(count: number): void {
  const past = new Date(Date.now() - 60_000);
  for (let i = 0; i < count; i++) {
    const dir = path.join(workdir, `d${i % 10}`);
    fs.mkdirSync(dir, { recursive: true });
    const file = path.join(dir, `f${i}.txt`);
    fs.writeFileSync(file, `${i}\n`);
    fs.utimesSync(file, past, past);
  }
}

describe('the workdir fingerprint', () => {
  it('walks a big workdir in slices, with the event loop turning between them, and still sees a change deep inside', async () => {
    populate(1_200);
    // Every walk at one instant, a minute on: files whose ctime is within 2 s of a walk are hashed
    // by content, and on a loaded machine writing them took long enough for the two walks below
    // to disagree on which (a different print of an unchanged tree, once in a full `npm test` here).
    const later = Date.now() + 60_000;
    vi.spyOn(Date, 'now').mockReturnValue(later);
    const { result: first, turns } = await turnsDuring(() => workdirFingerprint(workdir));
    expect(first.kind).toBe('print');
    // 1,210 entries in slices of 256: the loop turned while it walked (a walk in one go lets it turn none).
    expect(turns).toBeGreaterThanOrEqual(3);
    expect(await workdirFingerprint(workdir)).toEqual(first);
    fs.appendFileSync(path.join(workdir, 'd7', 'f1197.txt'), 'changed\n');
    const second = await workdirFingerprint(workdir);
    expect(second.kind).toBe('print');
    expect(second).not.toEqual(first);
  });

  it('walks a small workdir in one turn', async () => {
    populate(100);
    const { result, turns } = await turnsDuring(() => workdirFingerprint(workdir));
    expect(result.kind).toBe('print');
    expect(turns).toBe(0);
  });

  it('gives up past its bound of entries: git decides for such a workdir', async () => {
    populate(2_100);
    expect(await workdirFingerprint(workdir)).toEqual({ kind: 'large' });
  });

  it('reads again only the directories that changed since the last walk, and sees every change', async () => {
    populate(40);
    // A listing is kept only once its directory's stamps are past the racy window (ctime cannot be set back).
    await new Promise((resolve) => setTimeout(resolve, 2_100));
    const listings = new DirectoryListings();
    const readdir = vi.spyOn(fs, 'readdirSync');
    const first = await workdirFingerprint(workdir, listings);
    expect(readdir).toHaveBeenCalledTimes(11); // the root and its ten directories
    readdir.mockClear();
    expect(await workdirFingerprint(workdir, listings)).toEqual(first);
    expect(readdir).not.toHaveBeenCalled();

    const readOf = () => readdir.mock.calls.map(([dir]) => path.relative(workdir, String(dir)));
    fs.writeFileSync(path.join(workdir, 'd3', 'new.txt'), 'new\n');
    const added = await workdirFingerprint(workdir, listings);
    expect(added).not.toEqual(first);
    expect(readOf()).toEqual(['d3']);
    readdir.mockClear();
    // d3 just changed: its listing is read at every walk until its stamps are old.
    expect(await workdirFingerprint(workdir, listings)).toEqual(added);
    expect(readOf()).toEqual(['d3']);

    fs.rmSync(path.join(workdir, 'd5', 'f15.txt'));
    const removed = await workdirFingerprint(workdir, listings);
    expect(removed).not.toEqual(added);
    fs.renameSync(path.join(workdir, 'd6'), path.join(workdir, 'd6-old'));
    fs.mkdirSync(path.join(workdir, 'd6'));
    const replaced = await workdirFingerprint(workdir, listings);
    expect(replaced).not.toEqual(removed);
    fs.writeFileSync(path.join(workdir, 'top.txt'), 'top\n');
    expect(await workdirFingerprint(workdir, listings)).not.toEqual(replaced);
    // The same prints as walks that keep nothing.
    expect(await workdirFingerprint(workdir, listings)).toEqual(await workdirFingerprint(workdir));
  });

  it('reads a root changed a moment ago without a stat, and still sees a change at its top', async () => {
    populate(20);
    const listings = new DirectoryListings();
    const stat = vi.spyOn(fs, 'statSync');
    const first = await workdirFingerprint(workdir, listings);
    expect(stat).toHaveBeenCalledTimes(1);
    stat.mockClear();
    // Its listing cannot be kept for 2 s: its stat would be of no use meanwhile.
    expect(await workdirFingerprint(workdir, listings)).toEqual(first);
    expect(stat).not.toHaveBeenCalled();
    fs.writeFileSync(path.join(workdir, 'top.txt'), 'top\n');
    expect(await workdirFingerprint(workdir, listings)).not.toEqual(first);
  });

  it('a file leaving its young moments is no change (its content is read once more), and a rewrite its stat data missed still is one', async () => {
    // (populate() would make young files too: setting their times back stamps their ctime now.)
    fs.mkdirSync(path.join(workdir, 'd3'));
    const file = path.join(workdir, 'd3', 'young.txt');
    fs.writeFileSync(file, 'first\n');
    const first = await workdirFingerprint(workdir);
    // Written a moment ago: its stat data could miss a rewrite in the same tick, so its content counts.
    expect(first.kind === 'print' && [...first.young.keys()]).toEqual(['d3/young.txt']);
    // Three seconds on, unchanged: no longer young, read once more against the earlier print.
    const later = Date.now() + 3_000;
    vi.spyOn(Date, 'now').mockReturnValue(later);
    const second = await workdirFingerprint(workdir, new DirectoryListings(), first);
    expect(second.kind === 'print' && [...second.young.keys()]).toEqual([]);
    expect(second.kind === 'print' && [...second.rechecked.keys()]).toEqual(['d3/young.txt']);
    expect(unchangedSince(first, second)).toBe(true);
    // From then on its stat data tell: nothing is read again.
    const read = vi.spyOn(fs, 'openSync');
    const third = await workdirFingerprint(workdir, new DirectoryListings(), second);
    expect(read).not.toHaveBeenCalled();
    expect(unchangedSince(second, third)).toBe(true);
    read.mockRestore();

    // A rewrite of the same size in the tick of the first write, on a filesystem whose stamps did
    // not move (its stat data as they were): its content tells.
    const stamped = fs.lstatSync(file);
    fs.writeFileSync(file, 'FIRST\n');
    const lstat = fs.lstatSync;
    vi.spyOn(fs, 'lstatSync').mockImplementation(((target: fs.PathLike, options?: fs.StatSyncOptions) => (String(target) === file ? stamped : lstat(target, options))) as typeof fs.lstatSync);
    const rewritten = await workdirFingerprint(workdir, new DirectoryListings(), first);
    expect(rewritten.kind === 'print' && rewritten.digest).toBe(second.kind === 'print' && second.digest);
    expect(unchangedSince(first, rewritten)).toBe(false);
  });
});
