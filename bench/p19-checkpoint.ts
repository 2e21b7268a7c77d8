import fs from 'node:fs';
import path from 'node:path';
import { runGit } from '../src/adapters/git/git-program.js';
import { GitShadowRepository } from '../src/adapters/git/git-shadow-repository.js';
import { ProcessSpawner, type RunProcess } from '../src/adapters/process/process-spawner.js';
import type { ProcessLauncher } from '../src/adapters/process/process-launcher.js';
import { NO_LIMITS } from '../src/adapters/sandbox/resource-limits.js';
import { selectProcessLauncher } from '../src/adapters/sandbox/select-process-launcher.js';
import type { Benchmark } from './support/benchmark.js';
import { fmt, ratio, summarize } from './support/stats.js';

const PER_DIR = 100;

/**
 * P19: the cost of one workdir checkpoint (what the server does before a bash call: snapshot
 * into the shadow repository, diff against the previous checkpoint, keep the tree) on a workdir
 * of 10,000 files of which one changed, against a plain stat walk of the same tree (the least
 * any change detector must do) and `git status` alone, in the same run. Then on a small workdir
 * (an agent's usual), where the git processes it starts are most of the cost: counted, and timed
 * against one `git status`; and the checkpoint after that, seconds later with nothing changed.
 * Where bubblewrap runs, git works on the workdir inside a sandbox, as the server runs it.
 */
export const p19Checkpoint: Benchmark = {
  id: 'P19',
  title: 'checkpoint',
  measures: 'ms per workdir checkpoint (10,000 files, one changed; --quick: 2,000) through the shadow git repository, versus a plain lstat walk of the tree and `git status` alone; on a 20-file workdir, the checkpoint after one change (and its git processes) versus one `git status`.',
  async run({ quick, tmp }) {
    const rounds = quick ? 5 : 30;
    // --quick: a fifth of the tree (writing it and its first checkpoint took 4-14 s of a --quick run).
    const fileCount = quick ? 2_000 : 10_000;
    const workdir = path.join(tmp, 'workdir');
    const gitDir = path.join(tmp, 'data', 'shadow.git');
    for (let dir = 0; dir < fileCount / PER_DIR; dir++) {
      const dirPath = path.join(workdir, `pkg${dir}`, 'src');
      fs.mkdirSync(dirPath, { recursive: true });
      for (let file = 0; file < PER_DIR; file++) fs.writeFileSync(path.join(dirPath, `mod${file}.ts`), `export const value${file} = ${dir * PER_DIR + file};\n`.repeat(4));
    }
    const sandbox = await benchSandbox(tmp);
    const shadow = new GitShadowRepository({ maxFileBytes: 10 * 1024 * 1024, ...(sandbox && { sandbox }) });
    const target = { gitDir, workdir };
    let started = performance.now();
    let previous = await shadow.snapshot(target);
    await shadow.keep(target, previous, 'first');
    const firstMs = performance.now() - started;

    let counter = 0;
    const checkpoint = async (change: boolean) => {
      if (change) fs.writeFileSync(path.join(workdir, `pkg${counter % 100}`, 'src', 'mod7.ts'), `export const changed = ${counter++};\n`);
      const tree = await shadow.snapshot(target);
      const changes = await shadow.changes(target, previous, tree);
      if (change && changes.length !== 1) throw new Error(`expected one changed file, got ${changes.length}`);
      if (tree !== previous) await shadow.keep(target, tree, 'bench');
      previous = tree;
    };
    const statWalk = async () => {
      let seen = 0;
      const walk = (dir: string) => {
        for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
          const full = path.join(dir, entry.name);
          const stat = fs.lstatSync(full);
          if (stat.isDirectory()) walk(full);
          else seen += 1;
        }
      };
      walk(workdir);
      if (seen !== fileCount) throw new Error(`walked ${seen} files`);
    };
    const gitStatus = async () => {
      await runGit({ gitDir, workTree: workdir, args: ['status', '--porcelain=v1', '-z', '--untracked-files=all'] });
    };
    const variants = [
      { name: 'checkpoint, one file changed (status, stage, write-tree; the commit written here)', run: () => checkpoint(true), samples: [] as number[] },
      { name: 'checkpoint, nothing changed', run: () => checkpoint(false), samples: [] as number[] },
      { name: '`git status` alone (the change detection step)', run: gitStatus, samples: [] as number[] },
      { name: 'baseline: lstat walk of the tree (readdir + lstat of every entry)', run: statWalk, samples: [] as number[] },
    ];
    for (const variant of variants) await variant.run();
    for (let round = 0; round < rounds; round++) {
      for (const variant of variants) {
        started = performance.now();
        await variant.run();
        variant.samples.push(performance.now() - started);
      }
    }
    const baseline = summarize(variants[3]!.samples);
    const rows = variants.map((variant) => {
      const s = summarize(variant.samples);
      return [variant.name, fmt(s.p50), fmt(s.p99), fmt(s.mean), ratio(s.mean, baseline.mean)];
    });
    const one = summarize(variants[0]!.samples);
    const small = await smallWorkdir({ tmp: path.join(tmp, 'small'), rounds: quick ? 10 : 30, sandbox });
    return {
      sizes: `${fileCount.toLocaleString('en-US')} files in ${fileCount / PER_DIR} directories; ${rounds} interleaved rounds per variant`,
      tables: [{ columns: ['variant', 'p50 ms', 'p99 ms', 'mean ms', 'mean vs baseline'], rows }, small.table],
      notes: [
        sandbox ? 'git that reads or writes the workdir runs in a bubblewrap sandbox, as the server runs it.' : 'No bubblewrap here: git runs in the process, as the server runs it without a sandbox.',
        ...small.notes,
        `A checkpoint after one change costs ${ratio(one.mean, baseline.mean)} a plain lstat walk of the tree (${fmt(one.mean)} ms vs ${fmt(baseline.mean)} ms): it hashes only the changed file; git's index keeps the stat data of the others.`,
        `The first checkpoint of the workdir (every file hashed) took ${fmt(firstMs)} ms.`,
      ],
    };
  },
};

/** A 20-file workdir through the server's own spawner: the checkpoint after one change, its git processes, against one `git status`. */
async function smallWorkdir(options: { tmp: string; rounds: number; sandbox: ProcessLauncher | null }) {
  const workdir = path.join(options.tmp, 'workdir');
  const gitDir = path.join(options.tmp, 'data', 'shadow.git');
  for (let file = 0; file < 20; file++) {
    fs.mkdirSync(path.join(workdir, `dir${file % 2}`), { recursive: true });
    fs.writeFileSync(path.join(workdir, `dir${file % 2}`, `file${file}.ts`), `export const value = ${file};\n`);
  }
  const spawner = new ProcessSpawner();
  let gitProcesses = 0;
  const run: RunProcess = (request) => {
    gitProcesses++;
    return spawner.run(request);
  };
  try {
    const shadow = new GitShadowRepository({ maxFileBytes: 10 * 1024 * 1024, run, ...(options.sandbox && { sandbox: options.sandbox }) });
    const target = { gitDir, workdir };
    let previous = await shadow.snapshot(target);
    await shadow.keep(target, previous, 'first');
    const checkpoint = async () => {
      const tree = await shadow.snapshot(target);
      await shadow.changes(target, previous, tree);
      if (tree !== previous) await shadow.keep(target, tree, 'bench');
      previous = tree;
    };
    const changed: number[] = [];
    const status: number[] = [];
    let processes = 0;
    for (let round = 0; round < options.rounds + 1; round++) {
      fs.writeFileSync(path.join(workdir, 'dir1', 'file7.ts'), `export const changed = ${round};\n`);
      const before = gitProcesses;
      let started = performance.now();
      await checkpoint();
      const ms = performance.now() - started;
      started = performance.now();
      await runGit({ gitDir, workTree: workdir, args: ['status', '--porcelain=v1', '-z', '--untracked-files=all'], run: spawner.run });
      // The first round warms up.
      if (round === 0) continue;
      changed.push(ms);
      status.push(performance.now() - started);
      processes += gitProcesses - before;
    }
    // An agent's next step comes seconds later: the changed file's stamps are old by then.
    await new Promise((resolve) => setTimeout(resolve, 2_100));
    const before = gitProcesses;
    const started = performance.now();
    await checkpoint();
    const laterMs = performance.now() - started;
    const laterProcesses = gitProcesses - before;
    const changedSummary = summarize(changed);
    const baseline = summarize(status);
    return {
      table: {
        caption: `A small workdir (20 files), one file changed (${options.rounds} rounds), through the server's spawner`,
        columns: ['variant', 'p50 ms', 'mean ms', 'git processes per checkpoint', 'mean vs baseline'],
        rows: [
          ['checkpoint, one file changed', fmt(changedSummary.p50), fmt(changedSummary.mean), fmt(processes / options.rounds), ratio(changedSummary.mean, baseline.mean)],
          ['the next checkpoint, 2.1 s later, nothing changed (once)', fmt(laterMs), fmt(laterMs), String(laterProcesses), ratio(laterMs, baseline.mean)],
          ['baseline: one `git status`', fmt(baseline.p50), fmt(baseline.mean), '1', '×1'],
        ],
      },
      notes: [`On a small workdir a checkpoint costs its git processes (${fmt(processes / options.rounds)} per checkpoint after a change: git add -A and write-tree, as the walk saw no file over the size cap and no nested repository; else status, stage and write-tree; the commit, the branch and the list of changed files are written or told without one).`],
    };
  } finally {
    spawner.close();
  }
}

/** The bubblewrap launcher the server would pick here (no limits, no cgroups), or null without one. */
async function benchSandbox(tmp: string): Promise<ProcessLauncher | null> {
  const stateDir = path.join(tmp, 'sandbox-state');
  fs.mkdirSync(stateDir, { recursive: true });
  const { launcher } = await selectProcessLauncher({ requested: 'auto', limits: NO_LIMITS, searchPath: process.env.PATH ?? '', hiddenPaths: [path.join(tmp, 'data')], extraReadOnlyPaths: [], stateDir, useCgroups: false });
  return launcher.mode === 'bwrap' ? launcher : null;
}
