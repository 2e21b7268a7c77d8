import fs from 'node:fs';
import type { BenchReport } from './benchmark.js';
import { loadAverage, type MachineInfo } from './machine.js';
import { reportMarkdown } from './report-format.js';

/**
 * bench/full-run.md: the machine, the date and every report of one full run, replacing the
 * previous run's whole. bench/RESULTS.md, the current figures beside their targets, is a page
 * people write from it: a run never touches it, so its size and wording stay what people made them.
 */
export function writeFullRun(options: { file: string; machine: MachineInfo; reports: BenchReport[]; loadsAfter: string[]; seconds: number }): void {
  const { machine, reports } = options;
  const header = [
    '# The newest full benchmark run',
    '',
    'Written by `npm run bench` (a full run of every benchmark), which replaces this whole file. The',
    'current figures beside their targets are in [RESULTS.md](RESULTS.md), brought up to date from',
    'this file by hand. Ratios compare with a baseline measured in the same run, on the same machine:',
    'compare ratios, not absolute figures, across runs. Other work on the machine raises the load',
    'average below, and single figures carry noise of ±20% or so.',
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
  fs.writeFileSync(options.file, `${header}\n${reports.map(reportMarkdown).join('\n')}`);
}
