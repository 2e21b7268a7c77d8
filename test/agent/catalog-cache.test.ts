// The catalog cache (core/catalog/catalog-cache.ts) over real files: a catalog is read again
// exactly when something it was read from changed, never served stale, and what the guarded
// reads refused stays refused.
import fs from 'node:fs';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { NodeWorkdirFileSystem } from '../../src/adapters/workspace/node-workdir-file-system.js';
import { HostProjectFiles } from '../../src/adapters/workspace/host-project-files.js';
import { CatalogCache } from '../../src/core/catalog/catalog-cache.js';
import type { CatalogFiles } from '../../src/core/catalog/catalog-files.js';
import { workspaceCatalogFiles } from '../../src/core/catalog/workspace-catalog-files.js';
import { WorkspaceFiles } from '../../src/core/workspace/workspace-files.js';
import { tempDir } from '../support/agentd.js';

const skill = (name: string, body: string) => `---\nname: ${name}\ndescription: The ${name} skill.\n---\n${body}\n`;

let base: string;
let workdir: string;
let reads: number;

beforeEach(() => {
  base = fs.realpathSync(tempDir('agentd-catalog-cache-'));
  workdir = path.join(base, 'work');
  fs.mkdirSync(workdir);
  reads = 0;
});
afterEach(() => fs.rmSync(base, { recursive: true, force: true }));

function write(name: string, text: string): void {
  fs.mkdirSync(path.dirname(path.join(workdir, name)), { recursive: true });
  fs.writeFileSync(path.join(workdir, name), text);
}

/** The workdir's catalog files as the server reads them (pinned), counting every list and read. */
function counted(): CatalogFiles {
  const files = workspaceCatalogFiles({ files: new WorkspaceFiles({ workdirFs: new NodeWorkdirFileSystem(), workdirOf: () => workdir }), key: 'c1', root: workdir });
  return {
    root: files.root,
    list: (dir) => ((reads += 1), files.list(dir)),
    read: (file, maxBytes) => ((reads += 1), files.read(file, maxBytes)),
  };
}

/** A cache whose clock is `aheadMs` past the files' times (so nothing counts as just changed), or the real one. */
function cache(aheadMs = 60_000): CatalogCache {
  return new CatalogCache({ stamp: (file) => new HostProjectFiles().stamp(file), now: () => Date.now() + aheadMs, server: null });
}

/** Past the filesystem's timestamp tick, so that a change gets a new ctime. */
const tick = () => new Promise((resolve) => setTimeout(resolve, 30));

const skillTexts = async (catalogs: CatalogCache, agents?: Record<string, { description: string; prompt: string }>) =>
  Object.fromEntries((await catalogs.load('c1', { project: counted(), agents })).skills.map((one) => [one.name, one.text]));

describe('CatalogCache', () => {
  it('reads nothing again while nothing changed, and again after a file changes whatever its size and mtime', async () => {
    write('.claude/skills/pdf/SKILL.md', skill('pdf', 'BODY-ONE'));
    write('.claude/commands/ship.md', 'Ship it.\n');
    const catalogs = cache();
    expect(await skillTexts(catalogs)).toEqual({ pdf: 'BODY-ONE' });
    expect(reads).toBeGreaterThan(0);
    reads = 0;
    expect(await skillTexts(catalogs)).toEqual({ pdf: 'BODY-ONE' });
    expect(reads).toBe(0);

    // Same size, mtime put back: the ctime still tells.
    await tick();
    const file = path.join(workdir, '.claude/skills/pdf/SKILL.md');
    const { mtime } = fs.statSync(file);
    fs.writeFileSync(file, skill('pdf', 'BODY-TWO'));
    fs.utimesSync(file, mtime, mtime);
    expect(await skillTexts(catalogs)).toEqual({ pdf: 'BODY-TWO' });
    expect(reads).toBeGreaterThan(0);
  });

  it('sees skills added and removed, a directory that appears, and a symlink whose target changed', async () => {
    write('.claude/skills/pdf/SKILL.md', skill('pdf', 'PDF'));
    write('shared/lint.md', skill('lint', 'LINT-ONE'));
    fs.mkdirSync(path.join(workdir, '.claude/skills/lint'));
    fs.symlinkSync('../../../shared/lint.md', path.join(workdir, '.claude/skills/lint/SKILL.md'));
    const catalogs = cache();
    expect(await skillTexts(catalogs)).toEqual({ pdf: 'PDF', lint: 'LINT-ONE' });

    await tick();
    fs.writeFileSync(path.join(workdir, 'shared/lint.md'), skill('lint', 'LINT-TWO'));
    expect(await skillTexts(catalogs)).toEqual({ pdf: 'PDF', lint: 'LINT-TWO' });

    await tick();
    write('.agents/skills/docs/SKILL.md', skill('docs', 'DOCS'));
    fs.rmSync(path.join(workdir, '.claude/skills/pdf'), { recursive: true });
    expect(await skillTexts(catalogs)).toEqual({ lint: 'LINT-TWO', docs: 'DOCS' });
    reads = 0;
    expect(await skillTexts(catalogs)).toEqual({ lint: 'LINT-TWO', docs: 'DOCS' });
    expect(reads).toBe(0);
  });

  it('keeps refusing a link out of the workdir, and reads again when it is replaced by a file', async () => {
    fs.writeFileSync(path.join(base, 'outside.md'), skill('outside', 'OUTSIDE-SECRET'));
    fs.mkdirSync(path.join(workdir, '.claude/skills/out'), { recursive: true });
    fs.symlinkSync(path.join(base, 'outside.md'), path.join(workdir, '.claude/skills/out/SKILL.md'));
    const catalogs = cache();
    const first = await catalogs.load('c1', { project: counted(), agents: undefined });
    expect(first.skills).toEqual([]);
    expect(first.errors).toHaveLength(1);
    // The target outside changes: still refused, from the cache or not.
    await tick();
    fs.writeFileSync(path.join(base, 'outside.md'), skill('outside', 'OUTSIDE-SECRET-2'));
    expect(JSON.stringify(await catalogs.load('c1', { project: counted(), agents: undefined }))).not.toContain('OUTSIDE-SECRET');
    await tick();
    fs.rmSync(path.join(workdir, '.claude/skills/out/SKILL.md'));
    write('.claude/skills/out/SKILL.md', skill('out', 'INSIDE'));
    expect(await skillTexts(catalogs)).toEqual({ out: 'INSIDE' });
  });

  it('reads again when the conversation\'s agents change, after forget, and while its files were changed a moment ago', async () => {
    write('.claude/agents/reviewer.md', '---\ndescription: Reviews.\n---\nReview the diff.\n');
    const catalogs = cache();
    const names = async (agents?: Record<string, { description: string; prompt: string }>) => (await catalogs.load('c1', { project: counted(), agents })).agents.map((agent) => agent.name).sort();
    expect(await names()).toEqual(['general-purpose', 'reviewer']);
    expect(await names({ tester: { description: 'Tests.', prompt: 'Test it.' } })).toEqual(['general-purpose', 'reviewer', 'tester']);
    reads = 0;
    catalogs.forget('c1');
    expect(await names({ tester: { description: 'Tests.', prompt: 'Test it.' } })).toEqual(['general-purpose', 'reviewer', 'tester']);
    expect(reads).toBeGreaterThan(0);

    // With the real clock the files were written a moment ago: a change within the same timestamp tick could go unseen, so nothing is kept.
    const recent = cache(0);
    await recent.load('c1', { project: counted(), agents: undefined });
    reads = 0;
    await recent.load('c1', { project: counted(), agents: undefined });
    expect(reads).toBeGreaterThan(0);
  });
});
