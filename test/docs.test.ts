/**
 * The documents a newcomer reads (README.md, docs/*.md): the configuration reference is the
 * code's list of variables, and no page names a variable that does not exist.
 */
import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { VARIABLES, type VariableName } from '../src/config-variables.js';

const ROOT = path.resolve(import.meta.dirname, '..');
const read = (file: string) => fs.readFileSync(path.join(ROOT, file), 'utf8');
const PAGES = ['README.md', ...fs.readdirSync(path.join(ROOT, 'docs')).filter((name) => name.endsWith('.md')).map((name) => `docs/${name}`)];

/** `| \`NAME\` | flag | default |` rows of a page's tables. */
function variableRows(text: string): { name: string; flag: string; fallback: string }[] {
  return [...text.matchAll(/^\| `([A-Z][A-Z0-9_]*)` \|([^|]*)\|([^|]*)\|/gm)].map((match) => ({ name: match[1]!, flag: match[2]!.trim(), fallback: match[3]!.trim() }));
}

function expectRowMatchesCode(row: { name: string; flag: string; fallback: string }, page: string): void {
  expect(Object.hasOwn(VARIABLES, row.name), `${page}: ${row.name} is not a variable of src/config-variables.ts`).toBe(true);
  const variable: { default: string; flag?: string } = VARIABLES[row.name as VariableName];
  expect(row.fallback, `${page}: the default of ${row.name}`).toBe(`\`${variable.default}\``);
  expect(row.flag, `${page}: the flag of ${row.name}`).toBe(variable.flag ? `\`${variable.flag}\`` : '');
}

describe('docs/configuration.md', () => {
  const page = read('docs/configuration.md');
  const rows = variableRows(page);

  it('has one row for each variable of src/config-variables.ts, with its flag and default', () => {
    const names = rows.map((row) => row.name);
    expect(names.filter((name, index) => names.indexOf(name) !== index), 'rows given twice').toEqual([]);
    expect(Object.keys(VARIABLES).filter((name) => !names.includes(name)), 'variables with no row').toEqual([]);
    for (const row of rows) expectRowMatchesCode(row, 'docs/configuration.md');
  });
});

/** Every AGENTD_ name the code mentions: the server's, and the client's (AGENTD_URL), the tests' and the benchmarks' own. */
function namesInCode(): Set<string> {
  const names = new Set<string>();
  const walk = (dir: string): void => {
    for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
      const full = path.join(dir, entry.name);
      if (entry.isDirectory()) walk(full);
      else if (/\.(ts|tsx|mjs|js)$/.test(entry.name)) for (const match of fs.readFileSync(full, 'utf8').matchAll(/\bAGENTD_[A-Z0-9_]*[A-Z0-9]\b/g)) names.add(match[0]);
    }
  };
  for (const dir of ['src', 'bench', 'scripts', 'test']) walk(path.join(ROOT, dir));
  return names;
}

describe('variables named by the documents', () => {
  it('exist: in src/config-variables.ts, or read by the code (the client, the tests, the benchmarks)', () => {
    const inCode = namesInCode();
    const unknown: string[] = [];
    for (const page of PAGES) {
      for (const [name] of read(page).matchAll(/\bAGENTD_[A-Z0-9_]+\*?/g)) {
        const known = name.endsWith('*') ? Object.keys(VARIABLES).some((variable) => variable.startsWith(name.slice(0, -1))) : Object.hasOwn(VARIABLES, name) || inCode.has(name);
        if (!known) unknown.push(`${page}: ${name}`);
      }
    }
    expect(unknown).toEqual([]);
  });
});
