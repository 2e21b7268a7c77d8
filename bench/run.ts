/**
 * The benchmark runner (`npm run bench`, see scripts/bench.mjs). Each benchmark runs in a fresh
 * Node process (this file with `--child <id>`), so that one's heap and JIT state do not colour
 * the next; it prints its tables and the ratios to its own baseline, measured in the same run.
 * A full run of every benchmark writes its reports to bench/full-run.md, from which people bring
 * the figures of bench/RESULTS.md up to date.
 *
 *   npm run bench                      all, full sizes, writes bench/full-run.md
 *   npm run bench -- --quick           all, reduced sizes (the aim: under two minutes; its time is in bench/RESULTS.md)
 *   npm run bench -- --only P3,P5      some
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { BENCHMARKS } from './benchmarks.js';
import type { BenchReport } from './support/benchmark.js';
import { loadAverage, machineInfo } from './support/machine.js';
import { reportText } from './support/report-format.js';
import { writeFullRun } from './support/results-file.js';
import { ROOT, runBenchmarkInChild } from './support/processes.js';

const { values: flags } = parseArgs({
  options: {
    quick: { type: 'boolean', default: false },
    only: { type: 'string' },
    child: { type: 'string' },
    help: { type: 'boolean', short: 'h' },
  },
});

/** Loads every benchmark's module (only for --help and a wrong id: the runner itself loads none). */
async function usage(): Promise<string> {
  const benches = await Promise.all(BENCHMARKS.map((entry) => entry.load()));
  return `npm run bench -- [--quick] [--only P1,P3]\n\n${benches.map((bench) => `  ${bench.id}  ${bench.title}: ${bench.measures}`).join('\n')}\n`;
}

async function runChild(id: string): Promise<void> {
  const entry = BENCHMARKS.find((candidate) => candidate.id === id);
  if (!entry) throw new Error(`no benchmark ${id}`);
  const bench = await entry.load();
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), `agentd-bench-${id}-`));
  // Whatever the benchmark's servers and programs make in the temp dir goes into its own, removed at the end
  // (others may traverse it: a PostgreSQL run as its own user reaches its cluster's directory).
  fs.chmodSync(tmp, 0o711);
  process.env.TMPDIR = tmp;
  const started = performance.now();
  try {
    const result = await bench.run({ quick: flags.quick, tmp });
    const report: BenchReport = { id: bench.id, title: bench.title, ...result, seconds: (performance.now() - started) / 1000 };
    process.stdout.write(`${reportText(report)}\n`);
    process.send?.({ report });
  } finally {
    fs.rmSync(tmp, { recursive: true, force: true });
  }
}

async function main(): Promise<void> {
  if (flags.help) return void process.stdout.write(await usage());
  if (flags.child) return runChild(flags.child);
  const wanted = flags.only?.split(',').map((id) => id.trim().toUpperCase()).filter(Boolean);
  const unknown = wanted?.filter((id) => !BENCHMARKS.some((bench) => bench.id === id)) ?? [];
  if (unknown.length) throw new Error(`unknown benchmark(s) ${unknown.join(', ')}\n\n${await usage()}`);
  const selected = BENCHMARKS.filter((bench) => !wanted || wanted.includes(bench.id));
  const machine = machineInfo();
  process.stdout.write(`agentd benchmarks${flags.quick ? ' (quick)' : ''}: ${machine.cpu}, ${machine.cores} cores, ${machine.memoryGiB} GiB, Node ${machine.node}; load average ${loadAverage()}\n\n`);
  const started = performance.now();
  const reports: BenchReport[] = [];
  const loads: string[] = [];
  let failed = 0;
  for (const bench of selected) {
    try {
      reports.push(await runBenchmarkInChild(bench.id, { quick: flags.quick }));
      loads.push(loadAverage());
    } catch (error) {
      failed += 1;
      process.stderr.write(`${bench.id}: ${(error as Error).message}\n\n`);
    }
  }
  const seconds = (performance.now() - started) / 1000;
  process.stdout.write(`${reports.length} benchmark(s) in ${seconds.toFixed(1)} s${failed ? `, ${failed} failed` : ''}\n`);
  if (!flags.quick && !wanted && failed === 0) {
    const file = path.join(ROOT, 'bench', 'full-run.md');
    writeFullRun({ file, machine, reports, loadsAfter: loads, seconds });
    process.stdout.write(`wrote ${path.relative(process.cwd(), file)}; bring the figures of bench/RESULTS.md up to date from it\n`);
  }
  if (failed) process.exitCode = 1;
}

main().catch((error: unknown) => {
  process.stderr.write(`bench: ${(error as Error).stack ?? String(error)}\n`);
  process.exit(1);
});
