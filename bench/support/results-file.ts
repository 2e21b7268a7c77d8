import fs from 'node:fs';
import type { BenchReport } from './benchmark.js';
import { loadAverage, type MachineInfo } from './machine.js';
import { reportMarkdown } from './report-format.js';

/**
 * Where the narrative part of bench/RESULTS.md starts: the sections written by hand after runs
 * ("## Round 2 ..." and later), which a full run keeps as they are, after its own reports.
 */
export const NARRATIVE_MARKER = '<!-- Written by hand below this line: `npm run bench` keeps it. -->';

/** The hand-written part of an existing results file (from the marker, else from the first "## Round " heading), or ''. */
export function narrativeOf(text: string): string {
  const marker = text.indexOf(NARRATIVE_MARKER);
  if (marker >= 0) return text.slice(marker);
  const heading = text.search(/^## Round /m);
  return heading >= 0 ? `${NARRATIVE_MARKER}\n\n${text.slice(heading)}` : '';
}

/** bench/RESULTS.md: the machine, the date and every report of one full run, then the hand-written part of the file it replaces. */
export function writeResults(options: { file: string; machine: MachineInfo; reports: BenchReport[]; loadsAfter: string[]; seconds: number }): void {
  const { machine, reports } = options;
  const header = [
    '# agentd benchmark results',
    '',
    'Written by `npm run bench` (a full run of every benchmark). Ratios compare with a baseline measured',
    'in the same run, on the same machine: compare ratios, not absolute figures, across runs. The machine',
    'is shared (other work raises the load average below), so single figures carry noise of ±20% or so.',
    'The sections after the reports (from "Round 2" on) are written by hand after targeted runs, and kept by a full run.',
    '',
    '| | |',
    '| --- | --- |',
    `| date | ${new Date().toISOString()} |`,
    `| cpu | ${machine.cpu} |`,
    `| cores | ${machine.cores} |`,
    `| memory | ${machine.memoryGiB} GiB |`,
    `| node | ${machine.node} |`,
    `| os | ${machine.os} |`,
    `| load average (1 / 5 / 15 min) after each benchmark | ${reports.map((report, i) => `${report.id} ${options.loadsAfter[i] ?? '?'}`).join('; ')} |`,
    `| load average at the end | ${loadAverage()} |`,
    `| total time | ${options.seconds.toFixed(0)} s |`,
    '',
  ].join('\n');
  let kept = '';
  try {
    kept = narrativeOf(fs.readFileSync(options.file, 'utf8'));
  } catch {
    // no earlier file
  }
  fs.writeFileSync(options.file, `${header}\n${reports.map(reportMarkdown).join('\n')}${kept ? `\n${kept}` : ''}`);
}
