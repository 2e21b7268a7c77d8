// `npm run bench [-- --quick] [-- --only P3,P5]`: the benchmarks in bench/ (docs/benchmarks.md says what each
// measures). Builds dist/ when it is older than src/ (scripts/prepare.mjs), compiles
// bench/*.ts with esbuild into dist/bench/ (split: each benchmark's module is loaded only by the
// process that runs it; again only when one of its inputs changed) and runs dist/bench/run.mjs.
//
// The benchmarks measure the server as it is built: `node dist/cli.js` is esbuild's bundle of
// src/ and its packages (build-server.mjs), and the modules of src/ that a benchmark drives in its
// own process are bundled by the same esbuild with the same options (bundleOptions). The test
// helpers it shares (the fake LLM, the in-process server) are bundled in too.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { build } from 'esbuild';
import { bundleOptions } from './build-server.mjs';
import { prepare, root } from './prepare.mjs';

const DIST = path.join(root, 'dist');
const OUT = path.join(DIST, 'bench');
/** The runner and the programs it starts as child processes (load generators, a bare server). */
const CHILDREN = path.join(root, 'bench', 'children');
const ENTRIES = [path.join(root, 'bench', 'run.ts'), ...fs.readdirSync(CHILDREN).filter((name) => name.endsWith('.ts')).map((name) => path.join(CHILDREN, name))];

prepare();
// The bundle is made again only when one of its inputs changed (the last build's list of them, with
// their sizes and times, is kept beside it): making it takes 4-6 s on a 2-core machine, a few per
// cent of a --quick run, and as long as a benchmark run with --only.
const INPUTS = path.join(OUT, 'inputs.json');
const BUILD_SCRIPTS = ['scripts/bench.mjs', 'scripts/build-server.mjs'].map((file) => path.join(root, file));
if (!upToDate()) {
  fs.rmSync(OUT, { recursive: true, force: true });
  // Each benchmark's process loads a few files, not every module one at a time (a slow load that
  // each process would pay). A module's import.meta.url is its compiled file's in dist/, where the prompts it reads are.
  const { metafile } = await build({
    ...(await bundleOptions(ENTRIES, (compiled) => JSON.stringify(pathToFileURL(path.join(DIST, compiled)).href))),
    outdir: OUT,
    outbase: path.join(root, 'bench'),
    outExtension: { '.js': '.mjs' },
    // Split: each benchmark in a module of its own, shared code in chunks, so that a benchmark's
    // process loads what it uses (P4's child does not load the server) and the runner none of them;
    // the chunks beside run.mjs: the bundled code finds the repository and bench/children from its own directory.
    chunkNames: '[name]-[hash]',
    sourcemap: true,
    metafile: true,
  });
  // The metafile's paths are relative to esbuild's working directory, this process's.
  const files = [...BUILD_SCRIPTS, ...Object.keys(metafile.inputs).map((file) => path.resolve(file))];
  fs.writeFileSync(INPUTS, JSON.stringify({ entries: ENTRIES, files: Object.fromEntries(files.map((file) => [file, stamp(file)])) }));
}

/** Whether dist/bench was built from these entries and every file it was built from is as it was then. */
function upToDate() {
  let last;
  try {
    last = JSON.parse(fs.readFileSync(INPUTS, 'utf8'));
  } catch {
    return false;
  }
  if (JSON.stringify(last.entries) !== JSON.stringify(ENTRIES)) return false;
  return Object.entries(last.files).every(([file, was]) => stamp(file) === was);
}

function stamp(file) {
  try {
    const stat = fs.statSync(file);
    return `${stat.size}:${stat.mtimeMs}`;
  } catch {
    return 'missing';
  }
}

const child = spawn(process.execPath, [path.join(OUT, 'run.mjs'), ...process.argv.slice(2)], { stdio: 'inherit' });
process.on('SIGINT', () => {});
child.on('exit', (code, signal) => process.exit(code ?? (signal ? 1 : 0)));
