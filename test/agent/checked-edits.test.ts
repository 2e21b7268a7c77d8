// file_editor through a real run: each write's syntax checked in the sandbox, loose matching that
// says so, replace_all, and no edit of a file that changed on disk since it was viewed.
import fs from 'node:fs';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import type { FakeTurn } from '../fake-llm/fake-llm-server.js';
import { startAgentHarness, type AgentHarness } from '../support/agent-harness.js';

let harness: AgentHarness;
afterEach(async () => harness?.close());

const editor = (args: Record<string, unknown>): FakeTurn => ({ toolCalls: [{ name: 'file_editor', arguments: args }] });
const bash = (command: string): FakeTurn => ({ toolCalls: [{ name: 'bash', arguments: { command } }] });

async function run(script: FakeTurn[], options: { env?: Record<string, string>; files?: Record<string, string> } = {}) {
  harness = await startAgentHarness([...script, { text: 'done' }], options.env ? { env: options.env } : {});
  const workdir = fs.realpathSync(fs.mkdtempSync(path.join(harness.server.dataDir, '..', 'agentd-edits-')));
  for (const [name, text] of Object.entries(options.files ?? {})) fs.writeFileSync(path.join(workdir, name), text);
  const id = await harness.createConversation({ workdir, initial_message: 'edit' });
  expect((await harness.waitForStatus(id, ['idle', 'error'], 30_000)).status).toBe('idle');
  const observations = (await harness.events(id)).filter((event) => event.kind === 'observation');
  return { workdir, observations };
}

describe('checked edits', () => {
  it('a write that breaks the syntax says so in its first line, with the diagnostics; a good one is said to be checked', async () => {
    const { workdir, observations } = await run([
      editor({ command: 'create', path: 'good.js', file_text: 'export const answer = 42;\n' }),
      editor({ command: 'create', path: 'bad.js', file_text: 'function broken( {\n  return 1;\n}\n' }),
      editor({ command: 'create', path: 'bad.py', file_text: 'def f(:\n    pass\n' }),
      editor({ command: 'create', path: 'good.py', file_text: 'def f():\n    return 1\n' }),
      editor({ command: 'create', path: 'bad.sh', file_text: 'if true; then\n  echo yes\n' }),
      editor({ command: 'create', path: 'bad.json', file_text: '{"a": 1,}\n' }),
      editor({ command: 'create', path: 'notes.txt', file_text: 'no checker for text\n' }),
    ]);
    const [goodJs, badJs, badPy, goodPy, badSh, badJson, text] = observations.map((event) => event.content as string) as [string, string, string, string, string, string, string];
    expect(goodJs).toMatch(/^File good\.js created: 1 line\.\n\[Syntax check \(node --check\): no errors\.\]$/);
    expect(badJs.split('\n')[0]).toBe('Warning: bad.js was written but now has syntax errors (node --check): fix them before you go on.');
    expect(badJs).toContain('File bad.js created: 3 lines.');
    expect(badJs).toContain('SyntaxError');
    expect(badPy.split('\n')[0]).toBe('Warning: bad.py was written but now has syntax errors (python3 compile()): fix them before you go on.');
    expect(badPy).toContain('SyntaxError');
    expect(goodPy).toContain('[Syntax check (python3 compile()): no errors.]');
    expect(badSh.split('\n')[0]).toContain('(bash -n)');
    expect(badSh).toContain('syntax error');
    expect(badJson.split('\n')[0]).toContain('(JSON.parse)');
    expect(text).toBe('File notes.txt created: 1 line.');
    // The write happened anyway (the result is not an error), and the check left nothing behind.
    expect(observations[1].is_error).toBe(false);
    expect(observations[1].data.syntax_check).toEqual({ checker: 'node --check', ok: false });
    expect(fs.existsSync(path.join(workdir, '__pycache__'))).toBe(false);
  });

  it('AGENTD_CHECK_EDITS_S=0 turns the checks off', async () => {
    const { observations } = await run([editor({ command: 'create', path: 'bad.js', file_text: 'function broken( {\n' })], { env: { AGENTD_CHECK_EDITS_S: '0' } });
    expect(observations[0].content).toBe('File bad.js created: 1 line.');
  });
});

describe('str_replace', () => {
  it('matches loosely once when indentation differs, and says so; refuses a loose match found twice', async () => {
    const source = 'function a() {\n\tif (x) {\n\t\treturn 1;\n\t}\n}\nfunction b() {\n\treturn 2;\n}\nfunction c() {\n\treturn 2;\n}\n';
    const { workdir, observations } = await run(
      [
        editor({ command: 'view', path: 'a.txt' }),
        editor({ command: 'str_replace', path: 'a.txt', old_str: '    if (x) {\n        return 1;\n    }', new_str: '    if (x) {\n        return 10;\n    }' }),
        editor({ command: 'str_replace', path: 'a.txt', old_str: '  return 2;', new_str: '  return 20;' }),
      ],
      { files: { 'a.txt': source } },
    );
    expect(observations[1].is_error).toBe(false);
    expect(observations[1].content).toMatch(/^The file a\.txt has been edited, matched loosely: old_str did not appear verbatim, but exactly one place \(line 2\) matches it when indentation and whitespace are ignored/);
    expect(observations[1].data.matched).toBe('loose');
    expect(observations[2].is_error).toBe(true);
    expect(observations[2].content).toContain('near line 7, 10');
    // The replacement took the file's indentation (tabs).
    expect(fs.readFileSync(path.join(workdir, 'a.txt'), 'utf8')).toBe(source.replace('\t\treturn 1;', '\t\treturn 10;'));
  });

  it('replace_all replaces every occurrence and says how many', async () => {
    const { workdir, observations } = await run([editor({ command: 'view', path: 'r.txt' }), editor({ command: 'str_replace', path: 'r.txt', old_str: 'oldName', new_str: 'newName', replace_all: true })], { files: { 'r.txt': 'oldName();\nx = oldName;\n// oldName\n' } });
    expect(observations[1].content).toMatch(/^The file r\.txt has been edited: 3 occurrences of old_str replaced \(now at lines 1, 2, 3\)/);
    expect(fs.readFileSync(path.join(workdir, 'r.txt'), 'utf8')).toBe('newName();\nx = newName;\n// newName\n');
  });

  it('refuses to edit a file changed on disk since it was viewed; after a new view the edit is made', async () => {
    const { workdir, observations } = await run(
      [
        editor({ command: 'view', path: 'c.txt' }),
        bash('echo from-the-shell >> c.txt'),
        editor({ command: 'str_replace', path: 'c.txt', old_str: 'first', new_str: 'FIRST' }),
        editor({ command: 'insert', path: 'c.txt', insert_line: 0, new_str: 'top' }),
        editor({ command: 'view', path: 'c.txt' }),
        editor({ command: 'str_replace', path: 'c.txt', old_str: 'first', new_str: 'FIRST' }),
      ],
      { files: { 'c.txt': 'first\n' } },
    );
    for (const refused of [observations[2], observations[3]]) {
      expect(refused.is_error).toBe(true);
      expect(refused.content).toMatch(/^c\.txt has changed on disk since you last viewed or edited it/);
    }
    expect(observations[5].is_error).toBe(false);
    expect(fs.readFileSync(path.join(workdir, 'c.txt'), 'utf8')).toBe('FIRST\nfrom-the-shell\n');
  });
});
