/**
 * A full `npm run bench` writes its reports to bench/full-run.md, replacing the previous run's,
 * and leaves bench/RESULTS.md alone: that page holds the current figures beside their targets,
 * kept short by hand, with a section for every benchmark.
 */
import fs from 'node:fs';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { BENCHMARKS } from '../../bench/benchmarks.js';
import { writeFullRun } from '../../bench/support/results-file.js';
import { tempDir } from '../support/agentd.js';

const ROOT = path.resolve(import.meta.dirname, '../..');

let dir: string | undefined;
afterEach(() => {
  if (dir) fs.rmSync(dir, { recursive: true, force: true });
  dir = undefined;
});

const machine = { cpu: 'test cpu', cores: 2, memoryGiB: 1, node: 'v20', os: 'test os' };
const report = (id: string, figure: string) => ({ id, title: `bench ${id}`, sizes: 'small', seconds: 1, tables: [{ columns: ['', 'ms'], rows: [['case', figure]] }], notes: ['a note'] });

describe('bench/full-run.md written by a full run', () => {
  it('holds the machine and every report, and a second run replaces the first', () => {
    dir = tempDir('agentd-results-');
    const file = path.join(dir, 'full-run.md');
    writeFullRun({ file, machine, reports: [report('P1', '12'), report('P2', '7')], loadsAfter: ['1 / 1 / 1', '2 / 2 / 2'], seconds: 5 });
    const first = fs.readFileSync(file, 'utf8');
    expect(first).toContain('| cpu | test cpu |');
    expect(first).toContain('P1 1 / 1 / 1; P2 2 / 2 / 2');
    expect(first).toContain('## P1 bench P1');
    expect(first).toContain('| case | 12 |');
    expect(first).toContain('## P2 bench P2');
    expect(first).toContain('- a note');

    writeFullRun({ file, machine, reports: [report('P1', '13')], loadsAfter: ['1 / 1 / 1'], seconds: 5 });
    const second = fs.readFileSync(file, 'utf8');
    expect(second).toContain('| case | 13 |');
    expect(second).not.toContain('| case | 12 |');
    expect(second).not.toContain('## P2');
    expect(second.split('# The newest full benchmark run')).toHaveLength(2);
  });
});

describe('bench/RESULTS.md', () => {
  const results = fs.readFileSync(path.join(ROOT, 'bench', 'RESULTS.md'), 'utf8');

  it('stays short: at most 300 lines', () => {
    expect(results.split('\n').length).toBeLessThanOrEqual(300);
  });

  it('has a section for every benchmark, and the targets with whether each is met', () => {
    const sections = [...results.matchAll(/^### (P\d+) /gm)].map((match) => match[1]);
    expect(sections).toEqual(BENCHMARKS.map((bench) => bench.id));
    const targets = results.slice(results.indexOf('## Targets'), results.indexOf('\n## ', results.indexOf('## Targets') + 3));
    const rows = targets.split('\n').filter((line) => line.startsWith('| ') && !line.startsWith('| target') && !line.startsWith('| ---'));
    expect(rows.length).toBeGreaterThan(0);
    for (const row of rows) expect(row, 'the last column says whether the target is met').toMatch(/\| (yes|no)\b[^|]*\|$/);
  });
});
