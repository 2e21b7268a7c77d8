// The one write-to-temp-then-rename helper every file store uses: the file is replaced whole or
// left as it was, with the mode asked for, and a failed write leaves no temp file behind.
import fs from 'node:fs';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { writeFileAtomic, writeFileAtomicAsync } from '../../src/adapters/files/index.js';
import { tempDir } from '../support/agentd.js';

let dir: string;

beforeEach(() => {
  dir = tempDir('agentd-atomic-write-');
});

afterEach(() => {
  fs.rmSync(dir, { recursive: true, force: true });
});

describe('writeFileAtomic', () => {
  it('replaces the file with the new content and mode, and leaves only the file', () => {
    const file = path.join(dir, 'record.json');
    fs.writeFileSync(file, 'old', { mode: 0o644 });
    writeFileAtomic(file, 'new content', { mode: 0o600, fsync: true, syncDirectory: true });
    expect(fs.readFileSync(file, 'utf8')).toBe('new content');
    expect(fs.statSync(file).mode & 0o777).toBe(0o600);
    expect(fs.readdirSync(dir)).toEqual(['record.json']);
  });

  it('writes through the temp path it is given', () => {
    const file = path.join(dir, 'ledger');
    const other = path.join(dir, 'beside');
    fs.mkdirSync(other);
    writeFileAtomic(file, Buffer.from([1, 2, 3]), { temp: path.join(other, 'x.tmp') });
    expect([...fs.readFileSync(file)]).toEqual([1, 2, 3]);
    expect(fs.readdirSync(other)).toEqual([]);
  });

  it('leaves the old file and no temp file when the rename fails', () => {
    // A directory in the file's place: the rename over it fails after the temp file was written.
    const target = path.join(dir, 'taken');
    fs.mkdirSync(target);
    fs.writeFileSync(path.join(target, 'inside'), 'kept');
    expect(() => writeFileAtomic(target, 'new')).toThrow();
    expect(fs.readdirSync(dir)).toEqual(['taken']);
    expect(fs.readFileSync(path.join(target, 'inside'), 'utf8')).toBe('kept');
  });

  it('refuses a temp file that is already there when exclusive', () => {
    const file = path.join(dir, 'object');
    const temp = path.join(dir, 'planted.tmp');
    fs.writeFileSync(temp, 'planted');
    expect(() => writeFileAtomic(file, 'data', { temp, exclusive: true })).toThrow(/EEXIST/);
    expect(fs.existsSync(file)).toBe(false);
  });
});

describe('writeFileAtomicAsync', () => {
  it('streams a writer into the temp file, then renames it into place', async () => {
    const file = path.join(dir, 'snapshot');
    fs.writeFileSync(file, 'old');
    await writeFileAtomicAsync(
      file,
      async (handle) => {
        await handle.write('one ');
        // Not yet in place while the writer runs: the old content is what a reader sees.
        expect(fs.readFileSync(file, 'utf8')).toBe('old');
        await handle.write('two');
      },
      { mode: 0o600 },
    );
    expect(fs.readFileSync(file, 'utf8')).toBe('one two');
    expect(fs.statSync(file).mode & 0o777).toBe(0o600);
    expect(fs.readdirSync(dir)).toEqual(['snapshot']);
  });

  it('leaves the old file and no temp file when the writer fails', async () => {
    const file = path.join(dir, 'summaries.json');
    fs.writeFileSync(file, 'old');
    await expect(
      writeFileAtomicAsync(file, async (handle) => {
        await handle.write('half');
        throw new Error('disk gone');
      }),
    ).rejects.toThrow('disk gone');
    expect(fs.readFileSync(file, 'utf8')).toBe('old');
    expect(fs.readdirSync(dir)).toEqual(['summaries.json']);
  });
});
