// The project-config reader (adapters/workspace/host-project-files.ts) behind core's ProjectFiles
// port: what AGENTS.md, .mcp.json and .claude/settings.json reads may and may not reach. Every
// link aims at a decoy this test made beside the project directory.
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { HostProjectFiles } from '../../src/adapters/workspace/host-project-files.js';
import { readProjectMcpServers } from '../../src/core/mcp/project-mcp-config.js';
import { readProjectPermissions } from '../../src/core/permissions/project-settings.js';

const files = new HostProjectFiles();
let base: string;
let project: string;

beforeAll(() => {
  base = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), 'agentd-project-files-')));
  project = path.join(base, 'repo', 'pkg');
  fs.mkdirSync(project, { recursive: true });
  fs.mkdirSync(path.join(base, 'repo', '.git'));
  fs.writeFileSync(path.join(base, 'decoy.md'), 'DECOY-OUTSIDE\n');
  fs.writeFileSync(path.join(project, 'AGENTS.md'), 'Use tabs.\n');
  fs.symlinkSync('AGENTS.md', path.join(project, 'CLAUDE.md'));
  fs.symlinkSync(path.join(base, 'decoy.md'), path.join(project, 'OUT.md'));
  execFileSync('mkfifo', [path.join(project, 'FIFO.md')]);
});

afterAll(() => fs.rmSync(base, { recursive: true, force: true }));

const read = (name: string, options: { symlinks: 'never' | 'inside'; oversize?: 'cut' | 'refuse'; maxBytes?: number }) =>
  files.read({ dir: project, name, maxBytes: options.maxBytes ?? 1024, oversize: options.oversize ?? 'refuse', symlinks: options.symlinks });

describe('HostProjectFiles', () => {
  it('finds the repository root above the workdir, and none outside a repository', async () => {
    expect(await files.gitRoot(project)).toBe(path.join(base, 'repo'));
    expect(await files.gitRoot(base)).toBe(null);
  });

  it('follows a symlink that stays inside its directory, never one that leaves it', async () => {
    expect(await read('CLAUDE.md', { symlinks: 'inside' })).toEqual({ kind: 'text', text: 'Use tabs.\n' });
    expect(await read('OUT.md', { symlinks: 'inside' })).toEqual({ kind: 'refused' });
    expect(await read('CLAUDE.md', { symlinks: 'never' })).toMatchObject({ kind: 'unreadable' });
    expect(await read('OUT.md', { symlinks: 'never' })).toMatchObject({ kind: 'unreadable' });
  });

  it('refuses a FIFO without waiting for a writer, and tells a missing file apart', async () => {
    expect(await read('FIFO.md', { symlinks: 'never' })).toEqual({ kind: 'refused' });
    expect(await read('FIFO.md', { symlinks: 'inside' })).toEqual({ kind: 'refused' });
    expect(await read('NONE.md', { symlinks: 'inside' })).toEqual({ kind: 'missing' });
  });

  it('answers a missing file from one lstat, and reads whatever is there as before (a dangling symlink, a file in the path)', async () => {
    fs.symlinkSync(path.join(base, 'gone.md'), path.join(project, 'DANGLING.md'));
    fs.writeFileSync(path.join(project, 'plain'), 'x');
    expect(files.present(project, 'NONE.md')).toBe(false);
    expect(files.present(project, 'DANGLING.md')).toBe(true);
    expect(files.present(project, 'AGENTS.md')).toBe(true);
    expect(files.present(project, 'plain/AGENTS.md')).toBe(true); // not "no such entry": the read says what it is
    expect(await read('NONE.md', { symlinks: 'never' })).toEqual({ kind: 'missing' });
    expect(await read('nodir/NONE.md', { symlinks: 'inside' })).toEqual({ kind: 'missing' });
    // Its target lies outside the directory: refused like any link that leaves it, dangling or not.
    expect(await read('DANGLING.md', { symlinks: 'inside' })).toEqual({ kind: 'refused' });
    expect(await read('DANGLING.md', { symlinks: 'never' })).toMatchObject({ kind: 'unreadable' });
    // A file where a directory should be: nothing is at the path (the pinned walk finds no entry below a file).
    expect(await read('plain/AGENTS.md', { symlinks: 'never' })).toEqual({ kind: 'missing' });
  });

  it('cuts a large file at the limit or refuses it, as asked', async () => {
    expect(await read('AGENTS.md', { symlinks: 'never', oversize: 'cut', maxBytes: 3 })).toEqual({ kind: 'text', text: 'Use' });
    expect(await read('AGENTS.md', { symlinks: 'never', oversize: 'refuse', maxBytes: 3 })).toEqual({ kind: 'refused' });
  });

  it('gives .mcp.json and .claude/settings.json to core, which reports a FIFO .mcp.json instead of hanging', async () => {
    const dir = fs.mkdtempSync(path.join(base, 'workdir-'));
    execFileSync('mkfifo', [path.join(dir, '.mcp.json')]);
    expect(await readProjectMcpServers(files, dir)).toEqual({ servers: {}, invalid: [{ name: '.mcp.json', error: 'not a regular file of at most 256 KiB' }] });
    fs.rmSync(path.join(dir, '.mcp.json'));
    fs.writeFileSync(path.join(dir, '.mcp.json'), '{ not json');
    expect((await readProjectMcpServers(files, dir)).invalid[0]?.error).toMatch(/^unreadable: /);
    fs.mkdirSync(path.join(dir, '.claude'));
    fs.writeFileSync(path.join(dir, '.claude', 'settings.json'), JSON.stringify({ permissions: { deny: ['bash(rm*)'], ask: ['web_fetch'] } }));
    fs.symlinkSync(path.join(base, 'decoy.md'), path.join(dir, '.claude', 'settings.local.json'));
    expect(await readProjectPermissions(files, dir)).toEqual({ ask: ['web_fetch'], deny: ['bash(rm*)'] });
  });
});
