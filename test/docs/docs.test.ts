/**
 * The documents a newcomer reads (README.md, docs/*.md): the configuration reference is the
 * code's list of variables, no page names a variable that does not exist, every relative link
 * leads to a file (and heading) that exists, and the README quotes no measured figure that
 * bench/RESULTS.md does not hold.
 */
import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { configVariables, type VariableName } from '../../src/config-variables.js';

const variables = configVariables();

const ROOT = path.resolve(import.meta.dirname, '../..');
const read = (file: string) => fs.readFileSync(path.join(ROOT, file), 'utf8');
const PAGES = ['README.md', ...fs.readdirSync(path.join(ROOT, 'docs')).filter((name) => name.endsWith('.md')).map((name) => `docs/${name}`)];
/** Pages whose links are checked too, though no variable or figure rule applies to them. */
const LINKED_PAGES = [...PAGES, 'bench/RESULTS.md', 'bench/full-run.md', 'test/README.md'];

/** The text of a page outside its fenced code blocks. */
function prose(text: string): string {
  return text.replace(/^```[^\n]*\n[\s\S]*?^```$/gm, '');
}

/** `| \`NAME\` | flag | default |` rows of a page's tables. */
function variableRows(text: string): { name: string; flag: string; fallback: string }[] {
  return [...text.matchAll(/^\| `([A-Z][A-Z0-9_]*)` \|([^|]*)\|([^|]*)\|/gm)].map((match) => ({ name: match[1]!, flag: match[2]!.trim(), fallback: match[3]!.trim() }));
}

function expectRowMatchesCode(row: { name: string; flag: string; fallback: string }, page: string): void {
  expect(Object.hasOwn(variables, row.name), `${page}: ${row.name} is not a variable of src/config-variables.ts`).toBe(true);
  const variable: { default: string; flag?: string } = variables[row.name as VariableName];
  expect(row.fallback, `${page}: the default of ${row.name}`).toBe(`\`${variable.default}\``);
  expect(row.flag, `${page}: the flag of ${row.name}`).toBe(variable.flag ? `\`${variable.flag}\`` : '');
}

describe('docs/configuration.md', () => {
  const page = read('docs/configuration.md');
  const rows = variableRows(page);

  it('has one row for each variable of src/config-variables.ts, with its flag and default', () => {
    const names = rows.map((row) => row.name);
    expect(names.filter((name, index) => names.indexOf(name) !== index), 'rows given twice').toEqual([]);
    expect(Object.keys(variables).filter((name) => !names.includes(name)), 'variables with no row').toEqual([]);
    for (const row of rows) expectRowMatchesCode(row, 'docs/configuration.md');
  });
});

describe("the README's table of settings", () => {
  it('lists real variables with their flag and default', () => {
    const rows = variableRows(read('README.md'));
    expect(rows.length).toBeGreaterThanOrEqual(8);
    for (const row of rows) expectRowMatchesCode(row, 'README.md');
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
        const known = name.endsWith('*') ? Object.keys(variables).some((variable) => variable.startsWith(name.slice(0, -1))) : Object.hasOwn(variables, name) || inCode.has(name);
        if (!known) unknown.push(`${page}: ${name}`);
      }
    }
    expect(unknown).toEqual([]);
  });
});

/** GitHub's anchor for a heading: lower case, punctuation dropped, spaces as hyphens. */
function slug(heading: string): string {
  return heading
    .replace(/\[([^\]]*)\]\([^)]*\)/g, '$1')
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{N}\s_-]/gu, '')
    .replace(/\s/g, '-');
}

function anchors(file: string): Set<string> {
  const seen = new Map<string, number>();
  const result = new Set<string>();
  for (const [, heading] of prose(read(file)).matchAll(/^#{1,6} (.+)$/gm)) {
    const base = slug(heading!);
    const count = seen.get(base) ?? 0;
    seen.set(base, count + 1);
    result.add(count === 0 ? base : `${base}-${count}`);
  }
  return result;
}

describe('relative links', () => {
  it.each(LINKED_PAGES)('in %s lead to a file that exists, and to a heading of it', (page) => {
    const broken: string[] = [];
    for (const [, target] of prose(read(page)).matchAll(/\]\(([^)\s]+)(?:\s+"[^"]*")?\)/g)) {
      if (/^[a-z][a-z0-9+.-]*:/i.test(target!)) continue; // https:, mailto:
      const [file, anchor] = target!.split('#') as [string, string | undefined];
      const resolved = file === '' ? page : path.normalize(path.join(path.dirname(page), decodeURIComponent(file)));
      if (!fs.existsSync(path.join(ROOT, resolved))) broken.push(`${target}: no file ${resolved}`);
      else if (anchor !== undefined && resolved.endsWith('.md') && !anchors(resolved).has(anchor)) broken.push(`${target}: no heading #${anchor} in ${resolved}`);
    }
    expect(broken).toEqual([]);
  });
});

/**
 * A figure is a number with a unit of time, size or share, or a ratio (×1.3), in the README's
 * prose: values in code (`10`, a variable's default) are settings, not measurements.
 */
const FIGURE = /×\s?\d[\d,.]*|\d[\d,.]*(?:\s?[-–]\s?\d[\d,.]*)?\s?(?:ms|µs|ns|s|min|minutes|h|hours|KiB|KB|MiB|MB|GiB|GB|%)(?![\p{L}\p{N}])/gu;
const normalise = (text: string) => text.replace(/[\s\u00a0]+/g, ' ').replaceAll('–', '-');

describe("the README's figures", () => {
  it('are all in bench/RESULTS.md', () => {
    const readme = prose(read('README.md')).replace(/`[^`\n]*`/g, '');
    const figures = [...readme.matchAll(FIGURE)].map((match) => normalise(match[0]));
    expect(figures.length, 'the README quotes some figures').toBeGreaterThan(0);
    const results = normalise(read('bench/RESULTS.md'));
    expect(figures.filter((figure) => !results.includes(figure)), 'figures that bench/RESULTS.md does not hold').toEqual([]);
  });
});

describe('the README', () => {
  it("stays a newcomer's first hour: at most 400 lines, the rest in docs/", () => {
    const lines = fs.readFileSync(path.join(ROOT, 'README.md'), 'utf8').split('\n').length;
    expect(lines).toBeLessThanOrEqual(400);
  });

  it('links every page of docs/', () => {
    const readme = fs.readFileSync(path.join(ROOT, 'README.md'), 'utf8');
    const unlinked = PAGES.filter((page) => page.startsWith('docs/') && !readme.includes(`](${page}`));
    expect(unlinked).toEqual([]);
  });
});
