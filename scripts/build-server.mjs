// `node dist/cli.js` as a bundle: esbuild bundles src/cli.ts, with its dependencies, into
// dist/cli.js and the chunks it loads on demand (dist/cli.*.js: the client commands, the
// PostgreSQL and NATS adapters, the LLM client...), over the cli.js that tsc wrote.
//
// Why: Node 20 loads each module on its own (resolve, read, compile, link): the server's ~780 at
// start-up (300 of ours) took about half a second before it did anything else on this project's
// machines. One file and a few chunks take a fraction of that (bench P7; docs/development.md, "What the build makes").
// The rest of dist/ is tsc's output as before: the client SDK (`agentd/client`), its types, the
// modules the tests and benchmarks import, and the prompts and tool descriptions that
// copy-assets.mjs put beside them, which the bundle reads from there.
//
// Kept out of the bundle, loaded from node_modules: every package that is loaded with `import()`
// (the OpenAI and MCP SDKs, undici, execa, yaml, pino-pretty...), wherever it is imported: they
// load on first use, not at start-up, and a CommonJS one bundled as a chunk would have only a
// default export where Node's own loader gives its named exports too. No bundled package is
// asked for a file beside its own modules (`__dirname`, which an ES module lacks): Swagger UI is
// given the directory of its static files (src/http/plugins/openapi.ts), and pino's transports
// (worker threads started from its files), the one part of pino that would, are not used: the
// server's log goes to a stream in its own thread. Swagger UI and pino are bundled rather than
// loaded by Node's CommonJS loader at every start, which made an empty start shorter (P7).
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';
import { exactly, standIns } from './perf/stand-ins.mjs';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const src = path.join(root, 'src');
const dist = path.join(root, 'dist');
const CHUNK = /^cli\..+\.js(\.map)?$/;

const commonOptions = {
  bundle: true,
  splitting: true,
  format: 'esm',
  platform: 'node',
  target: 'node20',
  logLevel: 'warning',
};

/**
 * Our modules find the files beside them through `import.meta.url` (src/assets.ts, version.ts,
 * the dashboard's route). In a bundle that is the bundle's own URL: each module's is written as
 * `urlOf(compiled)`, an expression for the URL of its compiled file in dist/ (`compiled`: its
 * path there, such as `core/tools/bash.js`), where those files are.
 */
function moduleUrls(urlOf) {
  return {
    name: 'module-urls',
    setup(esbuild) {
      esbuild.onLoad({ filter: /\.ts$/ }, async (args) => {
        if (!args.path.startsWith(`${src}${path.sep}`)) return undefined;
        const text = await fs.promises.readFile(args.path, 'utf8');
        // Those would name the bundle's directory, not the module's: say so rather than build it.
        const other = /import\.meta\.(dirname|filename|resolve)\b/.exec(text);
        if (other) return { errors: [{ text: `${path.relative(root, args.path)} uses ${other[0]}: only import.meta.url is rewritten for the bundle (build-server.mjs)` }] };
        // Given back as read, so that esbuild does not read it again.
        if (!text.includes('import.meta.url')) return { contents: text, loader: 'ts' };
        const compiled = path.relative(src, args.path).split(path.sep).join('/').replace(/\.ts$/, '.js');
        return { contents: text.replaceAll('import.meta.url', urlOf(compiled)), loader: 'ts' };
      });
    },
  };
}


/** `a-package` of `a-package/sub/path.js`, `@scope/a-package` of `@scope/a-package/sub`. */
function packageOf(specifier) {
  const parts = specifier.split('/');
  return parts[0].startsWith('@') ? `${parts[0]}/${parts[1]}` : parts[0];
}

/**
 * Left to Node: every import of a package that is loaded with `import()` somewhere (`lazy`), the
 * static ones too (undici, which the LLM client's module, itself loaded on demand, imports
 * statically, would otherwise be in the bundle as well and in memory twice).
 */
function lazyPackages(lazy) {
  return {
    name: 'lazy-packages',
    setup(esbuild) {
      esbuild.onResolve({ filter: /^[^./]/ }, (args) => (lazy.has(packageOf(args.path)) ? { path: args.path, external: true } : undefined));
    },
  };
}

/** The packages that our modules, from `entryPoints` on, load with `import()`: a first pass that writes nothing. */
async function lazilyImportedPackages(entryPoints) {
  const found = new Set();
  const collect = {
    name: 'collect-lazy-packages',
    setup(esbuild) {
      esbuild.onResolve({ filter: /^[^./]/ }, (args) => {
        if (args.kind !== 'dynamic-import') return undefined;
        if (!args.path.startsWith('node:')) found.add(packageOf(args.path));
        return { path: args.path, external: true };
      });
    },
  };
  await build({ ...commonOptions, entryPoints, outdir: dist, write: false, plugins: [collect] });
  return found;
}

/**
 * esbuild's options for a bundle of our modules (from `entryPoints` on) and their packages, as ES
 * modules split into chunks, with `urlOf` as in moduleUrls. The benchmarks' bundle
 * (scripts/bench.mjs) is made the same way.
 */
export async function bundleOptions(entryPoints, urlOf) {
  return {
    ...commonOptions,
    entryPoints,
    // The CommonJS packages inside call require() for Node's own modules: an ES module has none.
    banner: { js: "import { createRequire as __agentdCreateRequire } from 'node:module';\nconst require = __agentdCreateRequire(import.meta.url);" },
    plugins: [moduleUrls(urlOf), ...standIns, lazyPackages(await lazilyImportedPackages(entryPoints))],
    legalComments: 'none',
  };
}

/**
 * dist/cli.js: the bundle's entry (dist/cli.main.js) loaded after V8's compile cache is turned on
 * (Node 22.1 and later; the Node agentd ships on has it, Node 20 goes on without). Its modules, and
 * the packages loaded from node_modules at the first LLM request, are compiled from the cache a
 * start before wrote (in the system's temp dir, or NODE_COMPILE_CACHE): a restarted server and its
 * first turn skip compiling them again (bench/RESULTS.md, P20). An entry that imports the bundle
 * statically would have it compiled before any of its code could turn the cache on.
 */
const COMPILE_CACHE_ENTRY = `#!/usr/bin/env node
import module from 'node:module';
module.enableCompileCache?.();
await import('./cli.main.js');
`;

export async function buildServer() {
  const { metafile } = await build({
    ...(await bundleOptions({ 'cli.main': path.join(src, 'cli.ts') }, (compiled) => `new URL(${JSON.stringify(`./${compiled}`)}, import.meta.url).href`)),
    // Every output file lies in dist/ itself: the same relative URL holds in the entry and in any chunk.
    outdir: dist,
    chunkNames: 'cli.[name]-[hash]',
    sourcemap: true,
    metafile: true,
  });

  // Then the previous builds' chunks (named by a hash of their contents): a build that fails leaves the last one whole.
  const written = new Set(Object.keys(metafile.outputs).map((file) => path.basename(file)));
  fs.writeFileSync(path.join(dist, 'cli.js'), COMPILE_CACHE_ENTRY, { mode: 0o755 });
  fs.chmodSync(path.join(dist, 'cli.js'), 0o755);
  written.add('cli.js');
  for (const name of fs.readdirSync(dist)) if (CHUNK.test(name) && !written.has(name)) fs.rmSync(path.join(dist, name));
}

if (process.argv[1] === fileURLToPath(import.meta.url)) await buildServer();
