import { mkdir, mkdtemp, readFile, realpath, rm, stat, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { fileEditorParameters, fileEditorTool } from '../../src/core/tools/file-editor.js';
import type { ToolContext, ToolResult } from '../../src/core/tools/tool.js';
import { CANARY_CONTENT, createTraversalFixture, type TraversalFixture } from '../support/traversal-fixture.js';
import { NodeWorkdirFileSystem } from '../../src/adapters/workspace/node-workdir-file-system.js';

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

async function run(context: ToolContext, input: Record<string, unknown>): Promise<ToolResult> {
  return fileEditorTool.execute(fileEditorParameters.parse(input), context);
}

describe('file_editor', () => {
  let workdir: string;
  let context: ToolContext;

  beforeEach(async () => {
    workdir = await realpath(await mkdtemp(path.join(os.tmpdir(), 'agentd-editor-')));
    context = makeContext(workdir);
  });
  afterEach(async () => {
    await rm(workdir, { recursive: true, force: true });
  });

  it('creates a file with its parent directories, then views it numbered', async () => {
    const created = await run(context, { command: 'create', path: 'pkg/deep/hello.py', file_text: 'print("hi")\nx = 1\n' });
    expect(created.isError).toBe(false);
    expect(created.content).toContain('created');
    expect(await readFile(path.join(workdir, 'pkg/deep/hello.py'), 'utf8')).toBe('print("hi")\nx = 1\n');

    const viewed = await run(context, { command: 'view', path: 'pkg/deep/hello.py' });
    expect(viewed.isError).toBe(false);
    expect(viewed.content).toContain('     1\tprint("hi")\n     2\tx = 1');
  });

  it('honours view_range, including -1 for the end, and rejects bad ranges', async () => {
    await writeFile(path.join(workdir, 'f.txt'), Array.from({ length: 10 }, (_, i) => `line ${i + 1}`).join('\n') + '\n');
    const middle = await run(context, { command: 'view', path: 'f.txt', view_range: [3, 5] });
    expect(middle.content).toContain('     3\tline 3');
    expect(middle.content).toContain('     5\tline 5');
    expect(middle.content).not.toContain('line 6');
    const tail = await run(context, { command: 'view', path: 'f.txt', view_range: [9, -1] });
    expect(tail.content).toContain('    10\tline 10');
    expect(tail.content).not.toContain('line 8');
    const bad = await run(context, { command: 'view', path: 'f.txt', view_range: [20, 30] });
    expect(bad.isError).toBe(true);
    expect(bad.content).toMatch(/between 1 and 10/);
  });

  it('caps the output of a big file and says how to see more', async () => {
    const lines = Array.from({ length: 5000 }, (_, i) => `${i + 1} ${'x'.repeat(40)}`);
    await writeFile(path.join(workdir, 'big.txt'), lines.join('\n'));
    const viewed = await run(context, { command: 'view', path: 'big.txt' });
    expect(viewed.isError).toBe(false);
    expect(viewed.content.length).toBeLessThan(60_000);
    expect(viewed.content).toMatch(/Output capped: showed lines 1-\d+ of 5000\. Use view_range \[\d+, \d+\]/);
  });

  it('lists a directory two levels deep, skipping hidden items and not expanding node_modules', async () => {
    await mkdir(path.join(workdir, 'src/core/deeper'), { recursive: true });
    await mkdir(path.join(workdir, '.git/objects'), { recursive: true });
    await mkdir(path.join(workdir, 'node_modules/lib'), { recursive: true });
    await writeFile(path.join(workdir, 'src/core/deeper/too-deep.ts'), '');
    await writeFile(path.join(workdir, 'src/index.ts'), '');
    await writeFile(path.join(workdir, '.env'), 'SECRET=1');
    const listed = await run(context, { command: 'view', path: '.' });
    expect(listed.isError).toBe(false);
    expect(listed.content).toContain('src/\n');
    expect(listed.content).toContain('src/core/');
    expect(listed.content).toContain('src/index.ts');
    expect(listed.content).toContain('node_modules/ (not expanded)');
    expect(listed.content).not.toContain('too-deep');
    expect(listed.content).not.toContain('.git');
    expect(listed.content).not.toContain('.env');
    expect(listed.content).not.toContain('node_modules/lib');
  });

  it('str_replace needs exactly one match and explains 0 or N matches', async () => {
    await writeFile(path.join(workdir, 'a.ts'), 'function a() {\n\treturn 1;\n}\nconst x = 1;\nconst y = 1;\n');
    const none = await run(context, { command: 'str_replace', path: 'a.ts', old_str: 'function b()', new_str: 'x' });
    expect(none.isError).toBe(true);
    expect(none.content).toContain('did not appear verbatim');

    // Part of a line, with other whitespace: not a whole-line match, so not applied loosely.
    const whitespace = await run(context, { command: 'str_replace', path: 'a.ts', old_str: 'return  1', new_str: 'return 2' });
    expect(whitespace.isError).toBe(true);
    expect(whitespace.content).toMatch(/whitespace is ignored, near line 2/);

    const many = await run(context, { command: 'str_replace', path: 'a.ts', old_str: ' = 1;', new_str: ' = 2;' });
    expect(many.isError).toBe(true);
    expect(many.content).toContain('occurs 2 times');
    expect(many.content).toContain('lines 4, 5');

    const one = await run(context, { command: 'str_replace', path: 'a.ts', old_str: 'const y = 1;', new_str: 'const y = 2;\nconst z = 3;' });
    expect(one.isError).toBe(false);
    expect(one.content).toContain('     5\tconst y = 2;');
    expect(one.content).toContain('     6\tconst z = 3;');
    expect(await readFile(path.join(workdir, 'a.ts'), 'utf8')).toBe('function a() {\n\treturn 1;\n}\nconst x = 1;\nconst y = 2;\nconst z = 3;\n');
  });

  it('str_replace works on CRLF files with LF old_str, and deletes when new_str is omitted', async () => {
    await writeFile(path.join(workdir, 'w.txt'), 'one\r\ntwo\r\nthree\r\n');
    const edited = await run(context, { command: 'str_replace', path: 'w.txt', old_str: 'one\ntwo', new_str: 'uno\ndos' });
    expect(edited.isError).toBe(false);
    expect(await readFile(path.join(workdir, 'w.txt'), 'utf8')).toBe('uno\r\ndos\r\nthree\r\n');
    await run(context, { command: 'str_replace', path: 'w.txt', old_str: 'three\r\n' });
    expect(await readFile(path.join(workdir, 'w.txt'), 'utf8')).toBe('uno\r\ndos\r\n');
  });

  it('inserts after a line (0 = top, last line = end) and validates insert_line', async () => {
    const file = path.join(workdir, 'i.txt');
    await writeFile(file, 'a\nb');
    await run(context, { command: 'insert', path: 'i.txt', insert_line: 0, new_str: 'top' });
    expect(await readFile(file, 'utf8')).toBe('top\na\nb');
    await run(context, { command: 'insert', path: 'i.txt', insert_line: 2, new_str: 'mid1\nmid2\n' });
    expect(await readFile(file, 'utf8')).toBe('top\na\nmid1\nmid2\nb');
    const end = await run(context, { command: 'insert', path: 'i.txt', insert_line: 5, new_str: 'end' });
    expect(end.isError).toBe(false);
    expect(end.content).toContain('     6\tend');
    expect(await readFile(file, 'utf8')).toBe('top\na\nmid1\nmid2\nb\nend\n');
    const bad = await run(context, { command: 'insert', path: 'i.txt', insert_line: 99, new_str: 'x' });
    expect(bad.isError).toBe(true);
    expect(bad.content).toMatch(/between 0 and 6/);
  });

  it('undo_edit reverts edits one by one, and undoing a create removes the file', async () => {
    const file = path.join(workdir, 'u.txt');
    await run(context, { command: 'create', path: 'u.txt', file_text: 'v1\n' });
    await run(context, { command: 'str_replace', path: 'u.txt', old_str: 'v1', new_str: 'v2' });
    await run(context, { command: 'create', path: 'u.txt', file_text: 'v3\n' });
    expect(await readFile(file, 'utf8')).toBe('v3\n');
    expect((await run(context, { command: 'undo_edit', path: 'u.txt' })).isError).toBe(false);
    expect(await readFile(file, 'utf8')).toBe('v2\n');
    await run(context, { command: 'undo_edit', path: 'u.txt' });
    expect(await readFile(file, 'utf8')).toBe('v1\n');
    const last = await run(context, { command: 'undo_edit', path: './u.txt' });
    expect(last.content).toContain('removed');
    await expect(stat(file)).rejects.toMatchObject({ code: 'ENOENT' });
    const nothing = await run(context, { command: 'undo_edit', path: 'u.txt' });
    expect(nothing.isError).toBe(true);
    expect(nothing.content).toContain('No edit history');
  });

  it('refuses binary files, files over the size limit, and directories where a file is needed', async () => {
    await writeFile(path.join(workdir, 'bin.dat'), Buffer.from([0x89, 0x50, 0x00, 0x01, 0x02]));
    await writeFile(path.join(workdir, 'huge.txt'), Buffer.alloc(6 * 1024 * 1024, 0x61));
    await mkdir(path.join(workdir, 'dir'));
    const binary = await run(context, { command: 'view', path: 'bin.dat' });
    expect(binary.isError).toBe(true);
    expect(binary.content).toContain('binary');
    const huge = await run(context, { command: 'str_replace', path: 'huge.txt', old_str: 'a', new_str: 'b' });
    expect(huge.isError).toBe(true);
    expect(huge.content).toMatch(/over file_editor's 5\.0 MB limit/);
    expect((await run(context, { command: 'create', path: 'dir', file_text: 'x' })).isError).toBe(true);
    expect((await run(context, { command: 'view', path: 'missing.txt' })).content).toContain('No such file');
  });

  it('reports missing parameters as errors the model can act on', async () => {
    expect((await run(context, { command: 'create', path: 'x.txt' })).content).toContain('needs `file_text`');
    await writeFile(path.join(workdir, 'x.txt'), 'x\n');
    expect((await run(context, { command: 'str_replace', path: 'x.txt' })).content).toContain('non-empty `old_str`');
    expect((await run(context, { command: 'insert', path: 'x.txt', new_str: 'y' })).content).toContain('needs `insert_line`');
  });

  it('accepts absolute paths inside the workdir', async () => {
    const created = await run(context, { command: 'create', path: path.join(workdir, 'abs.txt'), file_text: 'abs\n' });
    expect(created.isError).toBe(false);
    expect(created.data?.path).toBe('abs.txt');
  });
});

describe('file_editor containment over the traversal corpus', () => {
  let fixture: TraversalFixture;
  beforeAll(async () => {
    fixture = await createTraversalFixture();
  });
  afterAll(async () => {
    await fixture.cleanup();
  });

  it('refuses every payload for every command and never touches the canary', async () => {
    const context = makeContext(fixture.workdir);
    const before = await fixture.outsideSnapshot();
    const leaks: string[] = [];
    const inputs = [
      { command: 'view' },
      { command: 'create', file_text: 'PWNED' },
      { command: 'str_replace', old_str: 'CANARY', new_str: 'PWNED' },
      { command: 'insert', insert_line: 0, new_str: 'PWNED' },
      { command: 'undo_edit' },
    ];
    for (const payload of fixture.payloads) {
      for (const input of inputs) {
        const result = await run(context, { ...input, path: payload });
        if (!result.isError || result.content.includes('CANARY') || result.content.includes('outside secret')) {
          leaks.push(`${input.command} ${JSON.stringify(payload)}: ${result.content.slice(0, 120)}`);
        }
      }
    }
    expect(leaks).toEqual([]);
    expect(await fixture.outsideSnapshot()).toBe(before);
    await fixture.assertDecoysIntact();
    expect(await readFile(fixture.canary, 'utf8')).toBe(CANARY_CONTENT);
  });
});
