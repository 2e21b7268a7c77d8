import fs from 'node:fs';
import type { BenchReport } from './benchmark.js';
import { loadAverage, type MachineInfo } from './machine.js';
import { reportMarkdown } from './report-format.js';

/** bench/RESULTS.md: the machine, the date and every report of one full run. */
export function writeResults(options: { file: string; machine: MachineInfo; reports: BenchReport[]; loadsAfter: string[]; seconds: number }): void {
  const { machine, reports } = options;
  const header = [
    '# agentd benchmark results',
    '',
    'Written by `npm run bench` (a full run of every benchmark). Ratios compare with a baseline measured',
    'in the same run, on the same machine: compare ratios, not absolute figures, across runs. The machine',
    'is shared (other work raises the load average below), so single figures carry noise of ±20% or so.',
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
