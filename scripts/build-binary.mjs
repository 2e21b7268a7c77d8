// `npm run build:binary`: dist/agentd, a Node single executable application (SEA).
//   1. esbuild bundles src/cli.ts into one CommonJS file (dist/agentd.cjs), the version defined in,
//      and the runtime compiles it once to write its V8 code cache.
//   2. The runtime's `node --experimental-sea-config` makes the SEA blob: a small main
//      (src/cli/binary-main.ts: the spawner, or that bundle compiled from its asset) plus, as
//      assets, the bundle (`agentd.cjs`) and its code cache (`agentd.cjs.cache`), and every file
//      the server reads at run time (src/**/*.md|txt under their own name, Swagger UI's static
//      files under `swagger-ui/`, the dashboard's under `ui/`, the bash parser's WebAssembly under
//      `tree-sitter/`, the HTML worker's script as `html-worker.cjs`) and `assets.json` listing
//      them (see src/assets.ts). The runtime is a current LTS Node fetched from the npm registry
//      (scripts/binary-runtime.mjs), not the node running this script: the blob must be made by
//      the same node it is injected into.
//   3. postject injects the blob into a copy of that runtime (Node 24 has no `--build-sea`).
// Work happens in a temp dir beside the output; the results are renamed into place at the end,
// so a concurrent run never sees a half-written binary. `--out <file>` builds elsewhere;
// `--node <path>` builds on another node binary (which must support SEA).
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import { createRequire, isBuiltin } from 'node:module';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { build } from 'esbuild';
import { inject } from 'postject';
import { ensureRuntime } from './binary-runtime.mjs';
import { buildUi } from './build-ui.mjs';
import { BINARY_BUNDLE_OPTIONS } from './perf/binary-bundle.mjs';
import { placeBinary } from './perf/binary-file.mjs';
import { SERVER_NODE_FLAGS } from './perf/server-node-flags.mjs';
import { standIns } from './perf/stand-ins.mjs';
import { root } from './prepare.mjs';

const SEA_FUSE = 'NODE_SEA_FUSE_fce680ab2cc467b6e072b8b5df1996b2';
const TEXT_ASSET = /\.(md|txt)$/;

const { values: flags } = parseArgs({ options: { out: { type: 'string' }, node: { type: 'string' } } });
const output = path.resolve(flags.out ?? path.join(root, 'dist', 'agentd'));
const require = createRequire(path.join(root, 'package.json'));
const { version } = JSON.parse(fs.readFileSync(path.join(root, 'package.json'), 'utf8'));

/**
 * Optional modules that dependencies probe with `require` inside a try: `node:sqlite` (undici;
 * Node 22+) and `supports-color` (debug; not installed). In a SEA, requiring a name that is not
 * built in prints a warning before failing: answer with the error each probe expects instead.
 */
const ABSENT_MODULES = { 'node:sqlite': 'ERR_UNKNOWN_BUILTIN_MODULE', 'supports-color': 'MODULE_NOT_FOUND' };
const absentModules = {
  name: 'absent-modules',
  setup(esbuild) {
    const names = new RegExp(`^(${Object.keys(ABSENT_MODULES).join('|')})$`);
    esbuild.onResolve({ filter: names }, (args) => ({ path: args.path, namespace: 'absent' }));
    esbuild.onLoad({ filter: /.*/, namespace: 'absent' }, (args) => ({
      contents: `throw Object.assign(new Error(${JSON.stringify(`Cannot find module '${args.path}'`)}), { code: '${ABSENT_MODULES[args.path]}' });`,
      loader: 'js',
    }));
  },
};

/**
 * `import()` of Node's own modules (the bash parser's WebAssembly glue, the heap compaction...)
 * through a module of the bundle that requires it: the bundle runs as a function that its main
 * compiles (src/cli/binary-main.ts), which has no module loader for `import()`. Not esbuild's own
 * rewrite into `require()`: the glue declares a `require` of its own in the same function.
 */
const builtinImports = {
  name: 'builtin-imports',
  setup(esbuild) {
    esbuild.onResolve({ filter: /.*/ }, (args) => (args.kind === 'dynamic-import' && isBuiltin(args.path) ? { path: args.path, namespace: 'builtin-import' } : undefined));
    esbuild.onLoad({ filter: /.*/, namespace: 'builtin-import' }, (args) => ({ contents: `module.exports = require(${JSON.stringify(args.path)});`, loader: 'js' }));
  },
};

function filesUnder(dir) {
  return fs.readdirSync(dir, { withFileTypes: true, recursive: true }).filter((entry) => entry.isFile()).map((entry) => path.join(entry.parentPath, entry.name));
}

/** SEA asset key → file on disk; the dashboard's built files (`uiFiles`) under `ui/`. */
function collectAssets(uiFiles) {
  const assets = {};
  for (const file of filesUnder(path.join(root, 'src')).filter((name) => TEXT_ASSET.test(name))) {
    const key = path.basename(file);
    if (assets[key]) throw new Error(`two run-time files are named ${key}: ${path.relative(root, assets[key])} and ${path.relative(root, file)}; readAsset() finds them by name`);
    assets[key] = file;
  }
  const swaggerUiStatic = path.join(path.dirname(require.resolve('@fastify/swagger-ui')), 'static');
  for (const file of filesUnder(swaggerUiStatic)) assets[`swagger-ui/${path.relative(swaggerUiStatic, file)}`] = file;
  for (const file of uiFiles) assets[`ui/${path.basename(file)}`] = file;
  // The bash parser of the permission rules (src/adapters/shell-syntax): its runtime and grammar, read as bytes on first use.
  const treeSitter = path.join(path.dirname(require.resolve('@vscode/tree-sitter-wasm')));
  for (const name of ['tree-sitter.wasm', 'tree-sitter-bash.wasm']) assets[`tree-sitter/${name}`] = path.join(treeSitter, name);
  return assets;
}

/**
 * postject (LIEF) prints "warning: Can't find string offset for section name '.note.100'" (or
 * '.note') for each note section of Node's ELF binary: known and harmless (nodejs/postject#83). Those lines
 * are dropped while it runs; anything else it prints still reaches stderr.
 */
const HARMLESS_POSTJECT_WARNING = /^warning: Can't find string offset for section name '\.note(?:\.\d+)?'$/;

async function withoutHarmlessWarnings(task) {
  const write = process.stderr.write;
  process.stderr.write = function filtered(chunk, ...rest) {
    const text = typeof chunk === 'string' ? chunk : Buffer.from(chunk).toString('utf8');
    const kept = text.split(/(?<=\n)/).filter((line) => !HARMLESS_POSTJECT_WARNING.test(line.trimEnd())).join('');
    if (kept === '') {
      const callback = rest.find((arg) => typeof arg === 'function');
      if (callback) process.nextTick(callback);
      return true;
    }
    return write.call(process.stderr, kept, ...rest);
  };
  try {
    return await task();
  } finally {
    process.stderr.write = write;
  }
}

/**
 * The V8 code cache of the bundle's asset as src/cli/binary-main.ts compiles it (read as Latin-1,
 * into a function of the CommonJS wrapper's parameters), made by the runtime it will run on with
 * the binary's Node options, so that V8 accepts it: the binary then starts without parsing the
 * whole bundle, as it did when the bundle was a SEA main built with `useCodeCache`.
 */
function writeCodeCache(runtime, bundle, output) {
  const program = [
    "const fs = require('node:fs');",
    "const vm = require('node:vm');",
    "const [bundle, output] = process.argv.slice(1);",
    "const compiled = vm.compileFunction(fs.readFileSync(bundle, 'latin1'), ['exports', 'require', 'module', '__filename', '__dirname'], { produceCachedData: true });",
    "if (!compiled.cachedDataProduced) throw new Error('V8 made no code cache');",
    'fs.writeFileSync(output, compiled.cachedData);',
  ].join('\n');
  const made = spawnSync(runtime, [...SERVER_NODE_FLAGS, '-e', program, bundle, output], { encoding: 'utf8' });
  if (made.status !== 0) throw new Error(`the bundle's code cache was not made: ${made.stderr || made.stdout}`);
}

/**
 * The bundle's asset, a byte a character: its main reads it as Latin-1, so that V8 holds its
 * source at one byte a character (Node decodes a large UTF-8 text with any character past ASCII
 * into two bytes a character). Every character is Latin-1 (scripts/perf/binary-bundle.mjs).
 */
function writeLatin1(bundle, output) {
  const source = fs.readFileSync(bundle, 'utf8');
  const wide = /[^\u0000-\u00ff]/u.exec(source);
  if (wide) throw new Error(`the bundle has a character beyond Latin-1 (${JSON.stringify(source.slice(Math.max(0, wide.index - 40), wide.index + 40))}): its asset is one byte a character`);
  fs.writeFileSync(output, Buffer.from(source, 'latin1'));
}

async function main() {
  const started = Date.now();
  const runtime = flags.node ? path.resolve(flags.node) : ensureRuntime({ root });
  const runtimeVersion = spawnSync(runtime, ['--version'], { encoding: 'utf8' }).stdout.trim();
  fs.mkdirSync(path.dirname(output), { recursive: true });
  const work = fs.mkdtempSync(path.join(path.dirname(output), '.agentd-build-'));
  try {
    const bundle = path.join(work, 'agentd.cjs');
    const bundled = await build({
      entryPoints: [path.join(root, 'src', 'cli.ts')],
      outfile: bundle,
      bundle: true,
      platform: 'node',
      target: `node${runtimeVersion.replace(/^v/, '').split('.')[0]}`,
      format: 'cjs',
      // Only our own modules use import.meta.url, to find files beside them: in the binary those
      // are SEA assets (src/assets.ts) and the version is defined here.
      define: { AGENTD_VERSION: JSON.stringify(version), 'import.meta.url': 'undefined' },
      plugins: [absentModules, builtinImports, ...standIns],
      legalComments: 'none',
      logLevel: 'warning',
      metafile: true,
      ...BINARY_BUNDLE_OPTIONS,
    });
    const dynamic = Object.values(bundled.metafile.outputs).flatMap((output) => output.imports).filter((entry) => entry.kind === 'dynamic-import' && entry.external);
    if (dynamic.length > 0) throw new Error(`the bundle imports ${dynamic.map((entry) => entry.path).join(', ')} with import(), which the binary's main cannot load (see builtinImports)`);
    const bundleAsset = path.join(work, 'agentd.latin1.cjs');
    writeLatin1(bundle, bundleAsset);
    const codeCache = path.join(work, 'agentd.cjs.cache');
    writeCodeCache(runtime, bundleAsset, codeCache);
    const seaMain = path.join(work, 'binary-main.cjs');
    await build({
      entryPoints: [path.join(root, 'src', 'cli', 'binary-main.ts')],
      outfile: seaMain,
      bundle: true,
      platform: 'node',
      target: `node${runtimeVersion.replace(/^v/, '').split('.')[0]}`,
      format: 'cjs',
      legalComments: 'none',
      logLevel: 'warning',
      ...BINARY_BUNDLE_OPTIONS,
    });
    // The HTML worker's program with turndown and domino in it (src/adapters/web/html-converter.ts):
    // a worker thread runs a script, and the binary has no node_modules to load them from.
    const htmlWorker = path.join(work, 'html-worker.cjs');
    await build({
      entryPoints: [path.join(root, 'src', 'adapters', 'web', 'html-worker-entry.ts')],
      outfile: htmlWorker,
      bundle: true,
      platform: 'node',
      target: `node${runtimeVersion.replace(/^v/, '').split('.')[0]}`,
      format: 'cjs',
      legalComments: 'none',
      logLevel: 'warning',
    });

    const assets = collectAssets(await buildUi(path.join(work, 'ui')));
    assets['html-worker.cjs'] = htmlWorker;
    assets['agentd.cjs'] = bundleAsset;
    assets['agentd.cjs.cache'] = codeCache;
    const manifest = path.join(work, 'assets.json');
    fs.writeFileSync(manifest, JSON.stringify(Object.keys(assets)));
    assets['assets.json'] = manifest;
    const blob = path.join(work, 'agentd.blob');
    const seaConfig = path.join(work, 'sea-config.json');
    fs.writeFileSync(seaConfig, JSON.stringify({ main: seaMain, output: blob, disableExperimentalSEAWarning: true, useCodeCache: true, execArgv: SERVER_NODE_FLAGS, assets }, null, 2));
    const made = spawnSync(runtime, ['--experimental-sea-config', seaConfig], { cwd: work, encoding: 'utf8' });
    if (made.status !== 0) throw new Error(`node --experimental-sea-config failed: ${made.stderr || made.stdout}`);

    const binary = path.join(work, 'agentd');
    fs.copyFileSync(runtime, binary);
    fs.chmodSync(binary, 0o755);
    await withoutHarmlessWarnings(() => inject(binary, 'NODE_SEA_BLOB', fs.readFileSync(blob), { sentinelFuse: SEA_FUSE }));

    fs.renameSync(bundle, `${output}.cjs`);
    placeBinary(binary, output);
    const megabytes = (fs.statSync(output).size / 1024 / 1024).toFixed(1);
    process.stdout.write(`built ${path.relative(process.cwd(), output)} (agentd ${version} on node ${runtimeVersion}, ${megabytes} MB, ${Object.keys(assets).length} assets) in ${((Date.now() - started) / 1000).toFixed(1)} s\n`);
  } finally {
    fs.rmSync(work, { recursive: true, force: true });
  }
}

main().catch((error) => {
  process.stderr.write(`build-binary: ${error.message}\n`);
  process.exit(1);
});
