// `npm run bench [-- --quick] [-- --only P3,P5]`: the benchmarks in bench/ (see bench/README text
// in the main README). Builds dist/ when it is older than src/ (scripts/prepare.mjs), compiles
// bench/*.ts with esbuild into dist/bench/ (split: each benchmark's module is loaded only by the
// process that runs it) and runs dist/bench/run.mjs.
//
// The benchmarks measure the built server, not a second compilation of it: every import of a
// module under src/ is rewritten to the same module in dist/ (kept external), so a benchmark
// drives exactly what `node dist/cli.js` runs. The test helpers it shares (the fake LLM, the
// in-process server) and npm packages are resolved as usual.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { build } from 'esbuild';
import { prepare, root } from './prepare.mjs';

const SRC = path.join(root, 'src');
const DIST = path.join(root, 'dist');
const OUT = path.join(DIST, 'bench');
/** The runner and the programs it starts as child processes (load generators, a bare server). */
const CHILDREN = path.join(root, 'bench', 'children');
const ENTRIES = [path.join(root, 'bench', 'run.ts'), ...fs.readdirSync(CHILDREN).filter((name) => name.endsWith('.ts')).map((name) => path.join(CHILDREN, name))];

/** Imports of src/ modules become imports of the built modules in dist/. */
const srcToDist = {
  name: 'src-to-dist',
  setup(esbuild) {
    esbuild.onResolve({ filter: /^\.\.?\// }, (args) => {
      const target = path.resolve(args.resolveDir, args.path);
      if (target !== SRC && !target.startsWith(`${SRC}${path.sep}`)) return undefined;
      return { path: path.join(DIST, path.relative(SRC, target)), external: true };
    });
  },
};

prepare();
fs.rmSync(OUT, { recursive: true, force: true });
await build({
  entryPoints: ENTRIES,
  outdir: OUT,
  outbase: path.join(root, 'bench'),
  outExtension: { '.js': '.mjs' },
  bundle: true,
  platform: 'node',
  target: 'node20',
  format: 'esm',
  // Each benchmark in a module of its own, shared code in chunks: a benchmark's process loads what
  // it uses (P4's child does not load the server), and the runner loads none of them.
  splitting: true,
  // Beside run.mjs: the bundled code finds the repository and bench/children from its own directory.
  chunkNames: '[name]-[hash]',
  packages: 'external',
  plugins: [srcToDist],
  sourcemap: 'inline',
  logLevel: 'warning',
});

const child = spawn(process.execPath, [path.join(OUT, 'run.mjs'), ...process.argv.slice(2)], { stdio: 'inherit' });
process.on('SIGINT', () => {});
child.on('exit', (code, signal) => process.exit(code ?? (signal ? 1 : 0)));
