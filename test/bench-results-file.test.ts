/**
 * A full `npm run bench` rewrites bench/RESULTS.md with its reports and keeps the hand-written
 * sections after them (the "Round 2" narrative), whether the file has the marker or only the heading.
 */
import fs from 'node:fs';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { NARRATIVE_MARKER, writeResults } from '../bench/support/results-file.js';
import { tempDir } from './support/agentd.js';

let dir: string | undefined;
afterEach(() => {
  if (dir) fs.rmSync(dir, { recursive: true, force: true });
  dir = undefined;
});

const machine = { cpu: 'test cpu', cores: 2, memoryGiB: '1', node: 'v20', os: 'test os' };
const report = (id: string, figure: string) => ({ id, title: `bench ${id}`, sizes: 'small', seconds: 1, tables: [{ columns: ['', 'ms'], rows: [['case', figure]] }], notes: [] });

describe('bench/RESULTS.md written by a full run', () => {
  it.each([
    ['with the marker', `${NARRATIVE_MARKER}\n\n## Round 2 (issue 19)\n\nold narrative\n\n### Round 2, fourth session\n\nmore\n`],
    ['with only the heading', '## Round 2 (issue 19)\n\nold narrative\n\n### Round 2, fourth session\n\nmore\n'],
  ])('replaces the reports and keeps the hand-written sections (%s)', (_, narrative) => {
    dir = tempDir('agentd-results-');
    const file = path.join(dir, 'RESULTS.md');
    fs.writeFileSync(file, `# agentd benchmark results\n\n## P1 old\n\n| | ms |\n| --- | ---: |\n| case | 99 |\n\n${narrative}`);
    writeResults({ file, machine: machine as never, reports: [report('P1', '12')] as never, loadsAfter: ['1 / 1 / 1'], seconds: 5 });
    const first = fs.readFileSync(file, 'utf8');
    expect(first).toContain('| case | 12 |');
    expect(first).not.toContain('| case | 99 |');
    expect(first).toContain('old narrative');
    expect(first.indexOf('| case | 12 |')).toBeLessThan(first.indexOf('## Round 2 (issue 19)'));
    expect(first.trimEnd().endsWith('more')).toBe(true);
    // A second full run keeps it once, not twice.
    writeResults({ file, machine: machine as never, reports: [report('P1', '13')] as never, loadsAfter: ['1 / 1 / 1'], seconds: 5 });
    const second = fs.readFileSync(file, 'utf8');
    expect(second.split('old narrative')).toHaveLength(2);
    expect(second.split(NARRATIVE_MARKER)).toHaveLength(2);
    expect(second).toContain('| case | 13 |');
  });

  it('writes only the reports when there is no earlier file', () => {
    dir = tempDir('agentd-results-');
    const file = path.join(dir, 'RESULTS.md');
    writeResults({ file, machine: machine as never, reports: [report('P1', '12')] as never, loadsAfter: ['1 / 1 / 1'], seconds: 5 });
    expect(fs.readFileSync(file, 'utf8')).not.toContain(NARRATIVE_MARKER);
  });
});
