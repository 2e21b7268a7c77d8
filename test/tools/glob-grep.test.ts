import { mkdir, mkdtemp, readFile, realpath, rm, utimes, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createRipgrepSearcher, detectRipgrep, selectTextSearcher, textSearcherOnFirstUse } from '../../src/adapters/search/ripgrep-searcher.js';
import { ProcessSpawner } from '../../src/adapters/process/process-spawner.js';
import { globTool } from '../../src/core/tools/glob.js';
import { createGrepTool } from '../../src/core/tools/grep.js';
import type { ToolContext } from '../../src/core/tools/tool.js';
import { compileGlob, expandBraces, splitGlobBase } from '../../src/core/workspace/glob-match.js';
import { jsTextSearcher } from '../../src/adapters/search/js-searcher.js';
import type { TextSearcher } from '../../src/core/workspace/text-searcher.js';
import { walkDirectory } from '../../src/adapters/workspace/walk.js';
import type { WalkLimit } from '../../src/core/workspace/walk-entry.js';
import { CANARY_CONTENT, createTraversalFixture, type TraversalFixture } from '../support/traversal-fixture.js';
import { NodeWorkdirFileSystem } from '../../src/adapters/workspace/node-workdir-file-system.js';

const ripgrepVersion = await detectRipgrep();
if (!ripgrepVersion) console.warn('ripgrep (rg) is not on PATH: the ripgrep searcher tests are skipped; the JS fallback is tested.');

function makeContext(workdir: string): ToolContext {
  return {
    conversationId: 'c-test',
    workdir,
    workdirFs: new NodeWorkdirFileSystem(),
    signal: new AbortController().signal,
    shell: () => Promise.reject(new Error('no shell in these tests')),
    state: new Map(),
  };
}

async function writeAt(file: string, content: string | Buffer, secondsAgo: number): Promise<void> {
  await mkdir(path.dirname(file), { recursive: true });
  await writeFile(file, content);
  const time = new Date(Date.now() - secondsAgo * 1000);
  await utimes(file, time, time);
}

describe('glob matcher', () => {
  const table: Array<[pattern: string, candidate: string, expected: boolean]> = [
    ['*.ts', 'a.ts', true],
    ['*.ts', 'src/a.ts', false],
    ['**/*.ts', 'a.ts', true],
    ['**/*.ts', 'src/deep/a.ts', true],
    ['src/**/*.ts', 'src/a.ts', true],
    ['src/**/*.ts', 'src/x/y/a.ts', true],
    ['src/**/*.ts', 'lib/a.ts', false],
    ['src/**', 'src/x/y', true],
    ['src/**', 'src', false],
    ['**', 'a/b/c', true],
    ['a?c.txt', 'abc.txt', true],
    ['a?c.txt', 'a/c.txt', false],
    ['*.{ts,tsx}', 'a.tsx', true],
    ['*.{ts,tsx}', 'a.js', false],
    ['{src,lib}/**/*.{js,mjs}', 'lib/x/a.mjs', true],
    ['file[0-9].txt', 'file7.txt', true],
    ['file[!0-9].txt', 'file7.txt', false],
    ['file[!0-9].txt', 'fileX.txt', true],
    ['file[^abc].txt', 'filea.txt', false],
    ['[[]x].txt', '[x].txt', true],
    ['\\*.txt', '*.txt', true],
    ['\\*.txt', 'a.txt', false],
    ['*', '.env', false],
    ['.*', '.env', true],
    ['**/.env', 'config/.env', true],
    ['**/*.ts', '.hidden/a.ts', false],
    ['.github/**/*.yml', '.github/workflows/ci.yml', true],
    ['a.(b)+c', 'a.(b)+c', true],
    ['./src/*.ts', 'src/a.ts', true],
    ['src//*.ts', 'src/a.ts', true],
    ['{a}', '{a}', true],
  ];
  for (const [pattern, candidate, expected] of table) {
    it(`${pattern} ${expected ? 'matches' : 'does not match'} ${candidate}`, () => {
      expect(compileGlob(pattern)(candidate)).toBe(expected);
    });
  }

  it('supports matchBase, dot and nocase options', () => {
    expect(compileGlob('*.ts', { matchBase: true })('src/deep/a.ts')).toBe(true);
    expect(compileGlob('**/*.ts', { dot: true })('.hidden/a.ts')).toBe(true);
    expect(compileGlob('*.TS', { nocase: true })('a.ts')).toBe(true);
  });

  it('expands nested braces, bounds the expansion, and splits the literal base', () => {
    expect(expandBraces('a{b,c{d,e}}f')).toEqual(['abf', 'acdf', 'acef']);
    expect(() => expandBraces('{a,b}{c,d}{e,f}{g,h}{i,j}{k,l}{m,n}{o,p}{q,r}{s,t}{u,v}')).toThrow(/more than 1000/);
    expect(splitGlobBase('src/core/**/*.ts')).toEqual({ base: 'src/core', rest: '**/*.ts' });
    expect(splitGlobBase('*.ts')).toEqual({ base: '', rest: '*.ts' });
  });
});

describe('walkDirectory', () => {
  let fixture: TraversalFixture;
  beforeAll(async () => {
    fixture = await createTraversalFixture();
  });
  afterAll(async () => {
    await fixture.cleanup();
  });

  it('never yields or enters symlinks that leave the root, and does not descend symlinked dirs', async () => {
    const root = await realpath(fixture.workdir);
    const seen: string[] = [];
    for await (const entry of walkDirectory({ root })) seen.push(entry.relativePath + (entry.symlink ? '@' : ''));
    expect(seen).toContain('src/a.txt');
    expect(seen).toContain('link-in@');
    expect(seen).toContain('link-in-file@');
    expect(seen).not.toContain('link-in/a.txt');
    for (const outside of ['link-out-dir', 'link-out-rel', 'link-canary', 'link-root', 'link-etc', 'sub/link-up', 'chain1', 'loop-a']) {
      expect(seen.join(' ')).not.toContain(outside);
    }
  });

  it('stops at maxEntries and maxDepth and says so', async () => {
    const root = await realpath(fixture.workdir);
    const limits: WalkLimit[] = [];
    let count = 0;
    for await (const _entry of walkDirectory({ root, maxEntries: 3, onLimit: (limit) => limits.push(limit) })) count++;
    expect(count).toBeLessThanOrEqual(3);
    expect(limits).toEqual(['max_entries']);
    const shallow: string[] = [];
    for await (const entry of walkDirectory({ root, maxDepth: 1, onLimit: (limit) => limits.push(limit) })) shallow.push(entry.relativePath);
    expect(shallow).not.toContain('src/a.txt');
    expect(limits).toContain('max_depth');
  });
});

describe('glob tool', () => {
  let workdir: string;
  beforeEach(async () => {
    workdir = await realpath(await mkdtemp(path.join(os.tmpdir(), 'agentd-glob-')));
  });
  afterEach(async () => {
    await rm(workdir, { recursive: true, force: true });
  });

  it('returns matching files newest first, relative to the workdir, skipping .git and node_modules', async () => {
    await writeAt(path.join(workdir, 'old.ts'), '', 300);
    await writeAt(path.join(workdir, 'src/new.ts'), '', 10);
    await writeAt(path.join(workdir, 'src/mid.ts'), '', 100);
    await writeAt(path.join(workdir, 'node_modules/x/index.ts'), '', 0);
    await writeAt(path.join(workdir, '.git/hooks/h.ts'), '', 0);
    await writeAt(path.join(workdir, 'readme.md'), '', 0);
    const result = await globTool.execute({ pattern: '**/*.ts' }, makeContext(workdir));
    expect(result.isError).toBe(false);
    expect(result.content.split('\n')).toEqual(['src/new.ts', 'src/mid.ts', 'old.ts']);

    const scoped = await globTool.execute({ pattern: '*.ts', path: 'src' }, makeContext(workdir));
    expect(scoped.content.split('\n')).toEqual(['src/new.ts', 'src/mid.ts']);
    const explicit = await globTool.execute({ pattern: 'node_modules/x/*.ts' }, makeContext(workdir));
    expect(explicit.content).toBe('node_modules/x/index.ts');
    const none = await globTool.execute({ pattern: '*.py' }, makeContext(workdir));
    expect(none.content).toContain('No files found');
  });

  it('caps results at 100 and says so', async () => {
    await Promise.all(Array.from({ length: 130 }, (_, i) => writeAt(path.join(workdir, `f${i}.txt`), '', i)));
    const result = await globTool.execute({ pattern: '*.txt' }, makeContext(workdir));
    const lines = result.content.split('\n');
    expect(lines[0]).toBe('f0.txt');
    expect(lines.filter((line) => line.endsWith('.txt'))).toHaveLength(100);
    expect(result.content).toContain('Showing the 100 most recently modified of 130 matches');
    expect(result.data).toMatchObject({ count: 130, truncated: true });
  });

  it('refuses paths and patterns that leave the workdir', async () => {
    const fixture = await createTraversalFixture();
    try {
      const context = makeContext(fixture.workdir);
      for (const payload of fixture.payloads) {
        const result = await globTool.execute({ pattern: '**/*', path: payload }, context);
        expect(result.isError, payload).toBe(true);
      }
      for (const pattern of ['../*', '../../**/*.txt', '/etc/*', `${fixture.base}/*`]) {
        expect((await globTool.execute({ pattern }, context)).isError, pattern).toBe(true);
      }
      const all = await globTool.execute({ pattern: '**/*' }, context);
      expect(all.content).not.toContain('canary');
      expect(all.content).not.toContain('secret');
    } finally {
      await fixture.cleanup();
    }
  });
});

// The server's searches go through its spawner (process-spawner.ts): the same tests, rg spawned there.
const spawner = new ProcessSpawner();
afterAll(() => spawner.close());

const searchers: Array<[string, TextSearcher | undefined]> = [
  ['javascript', jsTextSearcher],
  ['ripgrep', ripgrepVersion ? createRipgrepSearcher() : undefined],
  ['ripgrep, through a spawner', ripgrepVersion ? createRipgrepSearcher({ spawn: spawner.spawn }) : undefined],
];

for (const [name, searcher] of searchers) {
  describe.skipIf(!searcher)(`grep tool (${name} searcher)`, () => {
    const grep = createGrepTool(searcher ?? jsTextSearcher);
    let workdir: string;
    beforeEach(async () => {
      workdir = await realpath(await mkdtemp(path.join(os.tmpdir(), `agentd-grep-${name}-`)));
    });
    afterEach(async () => {
      await rm(workdir, { recursive: true, force: true });
    });

    it('reports file:line: text, newest files first, honouring include and skipping noise', async () => {
      await writeAt(path.join(workdir, 'old.ts'), 'const needle = 1;\n', 300);
      await writeAt(path.join(workdir, 'src/new.ts'), 'x\nneedle();\ny\nanother needle\n', 10);
      await writeAt(path.join(workdir, 'notes.md'), 'needle in markdown\n', 0);
      await writeAt(path.join(workdir, 'node_modules/pkg/index.ts'), 'needle\n', 0);
      await writeAt(path.join(workdir, '.git/config'), 'needle\n', 0);
      await writeAt(path.join(workdir, 'image.bin'), Buffer.from('needle\0\x01\x02'), 0);
      const result = await grep.execute({ pattern: 'needle', include: '*.ts' }, makeContext(workdir));
      expect(result.isError).toBe(false);
      expect(result.content.split('\n').slice(1)).toEqual([
        'src/new.ts:2: needle();',
        'src/new.ts:4: another needle',
        'old.ts:1: const needle = 1;',
      ]);
      expect(result.data).toMatchObject({ matches: 3, files: 2, truncated: false, engine: searcher!.name });

      const everywhere = await grep.execute({ pattern: 'needle' }, makeContext(workdir));
      expect(everywhere.content).toContain('notes.md:1: needle in markdown');
      expect(everywhere.content).not.toContain('node_modules');
      expect(everywhere.content).not.toContain('.git');
      expect(everywhere.content).not.toContain('image.bin');
    });

    it('searches a single file, supports (?i), and reports no matches plainly', async () => {
      await writeAt(path.join(workdir, 'a.txt'), 'Hello\nhello\n', 0);
      const file = await grep.execute({ pattern: '(?i)HELLO', path: 'a.txt' }, makeContext(workdir));
      expect(file.content).toContain('a.txt:1: Hello');
      expect(file.content).toContain('a.txt:2: hello');
      const none = await grep.execute({ pattern: 'absent' }, makeContext(workdir));
      expect(none.isError).toBe(false);
      expect(none.content).toContain('No matches');
    });

    it('caps matches at 100 and truncates long lines', async () => {
      await writeAt(path.join(workdir, 'many.txt'), Array.from({ length: 250 }, (_, i) => `hit ${i}`).join('\n'), 0);
      await writeAt(path.join(workdir, 'long.txt'), `hit ${'y'.repeat(5000)}\n`, 100);
      const result = await grep.execute({ pattern: 'hit' }, makeContext(workdir));
      expect(result.data).toMatchObject({ matches: 100, truncated: true });
      expect(result.content).toContain('Results capped at 100');
      const long = await grep.execute({ pattern: 'hit', path: 'long.txt' }, makeContext(workdir));
      expect(long.content).toContain('line truncated');
      expect(long.content.length).toBeLessThan(1000);
    });

    it('returns an invalid regex as an error the model can fix', async () => {
      await writeAt(path.join(workdir, 'a.txt'), 'x\n', 0);
      const result = await grep.execute({ pattern: 'a(b' }, makeContext(workdir));
      expect(result.isError).toBe(true);
      expect(result.content).toMatch(/Invalid regular expression/);
    });

    it('never reads outside the workdir', async () => {
      const fixture = await createTraversalFixture();
      try {
        const context = makeContext(fixture.workdir);
        for (const payload of fixture.payloads) {
          const result = await grep.execute({ pattern: 'CANARY|secret', path: payload }, context);
          expect(result.isError, payload).toBe(true);
        }
        const all = await grep.execute({ pattern: 'CANARY|secret' }, context);
        expect(all.content).toContain('No matches');
        expect(await readFile(fixture.canary, 'utf8')).toBe(CANARY_CONTENT);
      } finally {
        await fixture.cleanup();
      }
    });
  });
}

describe.skipIf(!ripgrepVersion)('ripgrep adapter', () => {
  it('falls back to the JS engine for patterns rg cannot compile (look-arounds)', async () => {
    const workdir = await realpath(await mkdtemp(path.join(os.tmpdir(), 'agentd-rg-')));
    try {
      await writeAt(path.join(workdir, 'a.txt'), 'foobar\nfoobaz\n', 0);
      const grep = createGrepTool(createRipgrepSearcher());
      const result = await grep.execute({ pattern: 'foo(?=baz)' }, makeContext(workdir));
      expect(result.content).toContain('a.txt:2: foobaz');
      expect(result.content).not.toContain('a.txt:1');
    } finally {
      await rm(workdir, { recursive: true, force: true });
    }
  });

  it('selectTextSearcher picks ripgrep when present and JS when the command is missing', async () => {
    expect((await selectTextSearcher()).name).toBe('ripgrep');
    expect((await selectTextSearcher({ command: 'agentd-no-such-rg-binary' })).name).toBe('javascript');
  });

  it("the server's grep chooses its searcher at its first search, and its results name the one chosen", async () => {
    const workdir = await realpath(await mkdtemp(path.join(os.tmpdir(), 'agentd-grep-first-use-')));
    try {
      await writeFile(path.join(workdir, 'a.txt'), 'one needle\n');
      for (const [command, engine] of [[undefined, 'ripgrep'], ['agentd-no-such-rg-binary', 'javascript']] as const) {
        const searcher = textSearcherOnFirstUse(command ? { command } : {});
        expect(searcher.name).toBe('not chosen yet');
        const result = await createGrepTool(searcher).execute({ pattern: 'needle' }, makeContext(workdir));
        expect(result.content).toContain('a.txt:1: one needle');
        expect(result.data).toMatchObject({ matches: 1, engine });
        expect(searcher.name).toBe(engine);
      }
    } finally {
      await rm(workdir, { recursive: true, force: true });
    }
  });
});

describe('ripgrep detection', () => {
  it('reports a missing binary as undefined', async () => {
    expect(await detectRipgrep('agentd-no-such-rg-binary')).toBeUndefined();
  });
});
