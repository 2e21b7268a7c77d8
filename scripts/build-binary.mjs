// `npm run build:binary`: dist/agentd, a Node single executable application (SEA).
//   1. esbuild bundles src/cli.ts into one CommonJS file (dist/agentd.cjs), the version defined in.
//   2. `node --experimental-sea-config` makes the SEA blob: that bundle plus, as assets, every
//      file the server reads at run time (src/**/*.md|txt under their own name, Swagger UI's
//      static files under `swagger-ui/`) and `assets.json` listing them (see src/assets.ts).
//   3. postject injects the blob into a copy of this node binary (Node 20 has no `--build-sea`).
// Work happens in a temp dir beside the output; the results are renamed into place at the end,
// so a concurrent run never sees a half-written binary. `--out <file>` builds elsewhere.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { build } from 'esbuild';
import { inject } from 'postject';
import { root } from './prepare.mjs';

const SEA_FUSE = 'NODE_SEA_FUSE_fce680ab2cc467b6e072b8b5df1996b2';
const TEXT_ASSET = /\.(md|txt)$/;

const { values: flags } = parseArgs({ options: { out: { type: 'string' } } });
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

function filesUnder(dir) {
  return fs.readdirSync(dir, { withFileTypes: true, recursive: true }).filter((entry) => entry.isFile()).map((entry) => path.join(entry.parentPath, entry.name));
}

/** SEA asset key → file on disk. */
function collectAssets() {
  const assets = {};
  for (const file of filesUnder(path.join(root, 'src')).filter((name) => TEXT_ASSET.test(name))) {
    const key = path.basename(file);
    if (assets[key]) throw new Error(`two run-time files are named ${key}: ${path.relative(root, assets[key])} and ${path.relative(root, file)}; readAsset() finds them by name`);
    assets[key] = file;
  }
  const swaggerUiStatic = path.join(path.dirname(require.resolve('@fastify/swagger-ui')), 'static');
  for (const file of filesUnder(swaggerUiStatic)) assets[`swagger-ui/${path.relative(swaggerUiStatic, file)}`] = file;
  return assets;
}

async function main() {
  const started = Date.now();
  fs.mkdirSync(path.dirname(output), { recursive: true });
  const work = fs.mkdtempSync(path.join(path.dirname(output), '.agentd-build-'));
  try {
    const bundle = path.join(work, 'agentd.cjs');
    await build({
      entryPoints: [path.join(root, 'src', 'cli.ts')],
      outfile: bundle,
      bundle: true,
      platform: 'node',
      target: 'node20',
      format: 'cjs',
      // Only our own modules use import.meta.url, to find files beside them: in the binary those
      // are SEA assets (src/assets.ts) and the version is defined here.
      define: { AGENTD_VERSION: JSON.stringify(version), 'import.meta.url': 'undefined' },
      plugins: [absentModules],
      legalComments: 'none',
      logLevel: 'warning',
    });

    const assets = collectAssets();
    const manifest = path.join(work, 'assets.json');
    fs.writeFileSync(manifest, JSON.stringify(Object.keys(assets)));
    assets['assets.json'] = manifest;
    const blob = path.join(work, 'agentd.blob');
    const seaConfig = path.join(work, 'sea-config.json');
    fs.writeFileSync(seaConfig, JSON.stringify({ main: bundle, output: blob, disableExperimentalSEAWarning: true, useCodeCache: true, assets }, null, 2));
    const made = spawnSync(process.execPath, ['--experimental-sea-config', seaConfig], { cwd: work, encoding: 'utf8' });
    if (made.status !== 0) throw new Error(`node --experimental-sea-config failed: ${made.stderr || made.stdout}`);

    const binary = path.join(work, 'agentd');
    fs.copyFileSync(process.execPath, binary);
    fs.chmodSync(binary, 0o755);
    // postject (LIEF) prints "Can't find string offset for section name '.note.100'" for Node's
    // ELF binary: harmless (nodejs/postject#83).
    await inject(binary, 'NODE_SEA_BLOB', fs.readFileSync(blob), { sentinelFuse: SEA_FUSE });

    fs.renameSync(bundle, `${output}.cjs`);
    fs.renameSync(binary, output);
    const megabytes = (fs.statSync(output).size / 1024 / 1024).toFixed(1);
    process.stdout.write(`built ${path.relative(process.cwd(), output)} (agentd ${version}, ${megabytes} MB, ${Object.keys(assets).length} assets) in ${((Date.now() - started) / 1000).toFixed(1)} s\n`);
  } finally {
    fs.rmSync(work, { recursive: true, force: true });
  }
}

main().catch((error) => {
  process.stderr.write(`build-binary: ${error.message}\n`);
  process.exit(1);
});
