import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { executeTool, MAX_OBSERVATION_CHARS } from '../../src/core/agent/tool-executor.js';
import { defineTool, type ToolContext } from '../../src/core/tools/tool.js';
import { NodeWorkdirFileSystem } from '../../src/adapters/workspace/node-workdir-file-system.js';

let workdir: string;
let context: ToolContext;
beforeEach(() => {
  workdir = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), 'agentd-executor-')));
  context = { conversationId: 'c1', workdir, workdirFs: new NodeWorkdirFileSystem(), signal: new AbortController().signal, state: new Map(), shell: () => Promise.reject(new Error('no shell')) };
});
afterEach(() => fs.rmSync(workdir, { recursive: true, force: true }));

const lines = Array.from({ length: 20_000 }, (_, i) => `line ${i + 1}`).join('\n');
const formatted = (n: number) => n.toLocaleString('en-US');
const chatty = defineTool({
  name: 'chatty',
  description: 'prints a lot',
  parameters: z.object({ path: z.string().optional() }),
  execute: async (input) => ({ isError: false, content: input.path ? `path=${input.path}` : lines }),
});
const tools = new Map([[chatty.name, chatty]]);

describe('executeTool', () => {
  it('cuts a long result on line boundaries, marks the lines cut, keeps the whole of it in .agentd/outputs/ and says how to read it', async () => {
    const result = await executeTool({ tools, name: 'chatty', args: { ok: true, value: {} }, context });
    expect(result.content.length).toBeLessThan(MAX_OBSERVATION_CHARS + 500);
    const file = result.data?.full_output as string;
    expect(path.dirname(file)).toBe(path.join(workdir, '.agentd', 'outputs'));
    expect(path.basename(file)).toMatch(/^chatty-.+\.txt$/);
    expect(fs.readFileSync(file, 'utf8')).toBe(lines);
    expect(fs.readFileSync(path.join(workdir, '.agentd', '.gitignore'), 'utf8')).toBe('*\n');
    const [head, marker, ...rest] = result.content.split(/\n(\[lines [^\n]*\])\n/);
    const headLines = head!.split('\n');
    const tailLines = rest.join('').split('\n').slice(0, -1);
    expect(headLines[0]).toBe('line 1');
    expect(headLines.at(-1)).toBe(`line ${headLines.length}`);
    expect(tailLines.at(-1)).toBe('line 20000');
    expect(tailLines[0]).toBe(`line ${20_000 - tailLines.length + 1}`);
    const relative = path.relative(workdir, file);
    expect(marker).toBe(`[lines ${formatted(headLines.length + 1)}-${formatted(20_000 - tailLines.length)} of 20,000 cut; full output in ${relative}]`);
    expect(result.content).toContain(`sed -n '${headLines.length + 1},${headLines.length + 200}p' ${file}`);
    expect(result.content).toContain(`grep -n PATTERN ${file}`);
  });

  it('saves each cut output once, in a file of its own', async () => {
    const first = await executeTool({ tools, name: 'chatty', args: { ok: true, value: {} }, context });
    const second = await executeTool({ tools, name: 'chatty', args: { ok: true, value: {} }, context });
    expect(first.data?.full_output).not.toBe(second.data?.full_output);
    expect(fs.readdirSync(path.join(workdir, '.agentd', 'outputs'))).toHaveLength(2);
  });

  it('never writes the full output through a planted symlink', async () => {
    const decoy = fs.mkdtempSync(path.join(os.tmpdir(), 'agentd-executor-decoy-'));
    try {
      fs.symlinkSync(decoy, path.join(workdir, '.agentd'));
      const result = await executeTool({ tools, name: 'chatty', args: { ok: true, value: {} }, context });
      expect(fs.readdirSync(decoy)).toEqual([]);
      expect(result.data?.full_output).toBeUndefined();
      expect(result.data?.truncated).toBe(true);
      expect(result.content).toMatch(/\n\[lines [\d,]+-[\d,]+ of 20,000 cut; the full output could not be saved\]\n/);
    } finally {
      fs.rmSync(decoy, { recursive: true, force: true });
    }
  });

  it('renames an alias, and refuses an unknown argument with the nearest name', async () => {
    const aliased = await executeTool({ tools, name: 'chatty', args: { ok: true, value: { file_path: 'a.txt' } }, context });
    expect(aliased.content).toBe('path=a.txt');
    const wrong = await executeTool({ tools, name: 'chatty', args: { ok: true, value: { paht: 'a.txt' } }, context });
    expect(wrong).toMatchObject({ isError: true, data: { error: 'invalid_arguments' } });
    expect(wrong.content).toContain('`paht` (did you mean `path`?)');
  });

  it("takes a tool's own aliases and ignores arguments that change nothing", async () => {
    const own = defineTool({ ...chatty, argumentAliases: { where: 'path' }, ignoredArguments: ['description'] });
    const mine = new Map([[own.name, own]]);
    const result = await executeTool({ tools: mine, name: 'chatty', args: { ok: true, value: { where: 'b.txt', description: 'prints b' } }, context });
    expect(result).toMatchObject({ isError: false, content: 'path=b.txt' });
  });
});
