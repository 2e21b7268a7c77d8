// WorkdirOwner gives a workdir to the agent's uid (a server running as root): an empty workdir
// with one call in this process, one with files through `chown -R -P -h`, which changes symlinks
// themselves and never what they point to.
import fs from 'node:fs';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { WorkdirOwner } from '../src/adapters/workdir-owner.js';
import { tempDir } from './support/agentd.js';

const asRoot = process.getuid?.() === 0;
if (!asRoot) console.warn('workdir-owner: skipped: giving files away needs root');

const AGENT = { uid: 1_777_000_123, gid: 1_777_000_123 };
const dirs: string[] = [];
afterEach(() => {
  for (const dir of dirs.splice(0)) fs.rmSync(dir, { recursive: true, force: true });
});

describe.skipIf(!asRoot)('WorkdirOwner.ensure', () => {
  it('gives an empty workdir away, once', () => {
    const workdir = tempDir();
    dirs.push(workdir);
    const owner = new WorkdirOwner();
    owner.ensure({ workdir, ...AGENT });
    expect([fs.statSync(workdir).uid, fs.statSync(workdir).gid]).toEqual([AGENT.uid, AGENT.gid]);
    // Known given away: taken back by hand, it is not given again by this owner.
    fs.chownSync(workdir, 0, 0);
    owner.ensure({ workdir, ...AGENT });
    expect(fs.statSync(workdir).uid).toBe(0);
  });

  it('gives a workdir with files away, a symlink itself but not what it points to', () => {
    const workdir = tempDir();
    const outside = tempDir();
    dirs.push(workdir, outside);
    const decoy = path.join(outside, 'decoy');
    fs.writeFileSync(decoy, 'not the agent\'s');
    fs.mkdirSync(path.join(workdir, 'src'));
    fs.writeFileSync(path.join(workdir, 'src', 'a.txt'), 'a');
    fs.symlinkSync(decoy, path.join(workdir, 'link'));
    new WorkdirOwner().ensure({ workdir, ...AGENT });
    for (const file of ['.', 'src', 'src/a.txt']) expect(fs.statSync(path.join(workdir, file)).uid, file).toBe(AGENT.uid);
    expect(fs.lstatSync(path.join(workdir, 'link')).uid).toBe(AGENT.uid);
    expect(fs.statSync(decoy).uid).toBe(0);
  });
});
