/**
 * `node dist/cli.js` is a bundle (scripts/build-server.mjs): the server starts without Node
 * resolving, reading and compiling its ~800 modules one at a time. What a start loads of dist/ is
 * dist/cli.js and its chunks, never a module tsc compiled beside them; of node_modules, only the
 * packages the bundle leaves to Node. Every package our code loads with `import()` stays Node's
 * to load, wherever it is imported: bundled as a chunk, a CommonJS one would lose its named
 * exports (undici's `Agent`: no webhook would be delivered); bundled beside, it would be loaded twice.
 * Swagger UI and pino are bundled, and the `yaml` they require is loaded only when a YAML document
 * is asked for: through Node's CommonJS loader they cost an empty start ~65 ms. ajv runs at the
 * first output_schema, not at start-up (scripts/perf/stand-ins.mjs, onDemand). zod is bundled with
 * its English messages only (the other ~40 languages were 366 KB of source run at every start), and
 * without packages that bundled ones require for what the server never uses (scripts/perf/stand-ins.mjs, leftOut).
 */
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { build } from 'esbuild';
import { ensureRuntime, NODE_RUNTIME_VERSION } from '../../scripts/binary-runtime.mjs';
import { leftOut, onDemand } from '../../scripts/perf/stand-ins.mjs';
import { startFakeLlm } from '../fake-llm/fake-llm-server.js';
import { spawnServer, TEST_KEY } from '../support/agentd.js';
import { startLocalSite } from '../support/local-site.js';

const ROOT = path.resolve(import.meta.dirname, '../..');
const DIST = path.join(ROOT, 'dist');
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'agentd-server-bundle-'));
afterAll(() => fs.rmSync(tmp, { recursive: true, force: true }));

/** Writes the URL of every module that goes through Node's ES module loader to stderr. */
const HOOK = `
import { register } from 'node:module';
register('data:text/javascript,' + encodeURIComponent('export async function load(url, context, next) { process.stderr.write("LOADED " + url + "\\\\n"); return next(url, context); }'));
`;

/** The file: URLs a `--version` loads (the serve path imports the whole server before it reads its arguments). */
function loadedByVersion(): string[] {
  const hook = path.join(tmp, 'hook.mjs');
  fs.writeFileSync(hook, HOOK);
  const run = spawnSync(process.execPath, ['--import', hook, path.join(DIST, 'cli.js'), '--version'], { cwd: tmp, encoding: 'utf8' });
  expect(run.status, run.stderr).toBe(0);
  expect(run.stdout.trim()).toMatch(/^\d+\.\d+\.\d+/);
  return run.stderr.split('\n').filter((line) => line.startsWith('LOADED file:')).map((line) => decodeURIComponent(line.slice('LOADED file://'.length)));
}

/** A package's name from a file under node_modules, or from an import's specifier. */
function packageOf(file: string): string {
  const at = file.lastIndexOf('node_modules/');
  const parts = (at === -1 ? file : file.slice(at + 'node_modules/'.length)).split('/');
  return parts[0]!.startsWith('@') ? `${parts[0]}/${parts[1]}` : parts[0]!;
}

/** Writes the file of every module in Node's CommonJS cache to stderr as the process exits. */
const REQUIRED_HOOK = `
import { createRequire } from 'node:module';
const cache = createRequire(import.meta.url).cache;
process.on('exit', () => { for (const file of Object.keys(cache)) process.stderr.write('REQUIRED ' + file + '\\n'); });
`;

/** The packages a served-then-stopped server loaded through Node's CommonJS loader, after `visit` asked it what it does. */
async function requiredByServing(visit: (url: string) => Promise<void>): Promise<Set<string>> {
  const hook = path.join(tmp, 'required-hook.mjs');
  fs.writeFileSync(hook, REQUIRED_HOOK);
  const server = await spawnServer({ dataDir: fs.mkdtempSync(path.join(tmp, 'data-')), command: [process.execPath, '--import', hook, path.join(DIST, 'cli.js')] });
  try {
    await visit(server.url);
  } finally {
    server.child.kill('SIGTERM');
  }
  expect(await server.exited).toBe(0);
  return new Set(server.output().split('\n').filter((line) => line.startsWith('REQUIRED ') && line.includes('/node_modules/')).map((line) => packageOf(line.slice('REQUIRED '.length))));
}

/**
 * The names of the bundle's functions that ran in a served-then-stopped server, after `visit` asked
 * it what it does: each bundled CommonJS module is a function named by its path (V8's coverage).
 */
async function bundledFunctionsRun(visit: (url: string) => Promise<void>): Promise<string[]> {
  const coverage = fs.mkdtempSync(path.join(tmp, 'coverage-'));
  const server = await spawnServer({ dataDir: fs.mkdtempSync(path.join(tmp, 'data-')), command: [process.execPath, path.join(DIST, 'cli.js')], env: { NODE_V8_COVERAGE: coverage } });
  try {
    await visit(server.url);
  } finally {
    server.child.kill('SIGTERM');
  }
  expect(await server.exited).toBe(0);
  type Coverage = { result: { url: string; functions: { functionName: string; ranges: { count: number }[] }[] }[] };
  const scripts = fs.readdirSync(coverage).flatMap((name) => (JSON.parse(fs.readFileSync(path.join(coverage, name), 'utf8')) as Coverage).result);
  const bundle = scripts.filter((script) => /\/dist\/cli(\.[^/]+)?\.js$/.test(script.url));
  expect(bundle.length).toBeGreaterThan(1);
  return bundle.flatMap((script) => script.functions.filter((fn) => fn.ranges[0]!.count > 0).map((fn) => fn.functionName));
}

/** Writes the Node built-in modules the process loaded to stderr as it exits. */
const BUILTINS_HOOK = `
process.on('exit', () => { for (const name of process.moduleLoadList) process.stderr.write('BUILTIN ' + name + '\\n'); });
`;

/** Every file bundled into dist/cli.js and its chunks, as their source maps name them. */
function bundledSources(): string[] {
  const names = fs.readdirSync(DIST).filter((name) => /^cli(\.[^/]+)?\.js$/.test(name));
  return names.flatMap((name) => (JSON.parse(fs.readFileSync(path.join(DIST, `${name}.map`), 'utf8')) as { sources: string[] }).sources);
}

/** Writes `files` into a temp dir, bundles its entry.js with the build's stand-ins (as the server's bundle is made), runs it, and returns its lines. */
async function bundleAndRun(files: Record<string, string>): Promise<string[]> {
  const dir = fs.mkdtempSync(path.join(tmp, 'stand-ins-'));
  for (const [file, text] of Object.entries(files)) {
    fs.mkdirSync(path.dirname(path.join(dir, file)), { recursive: true });
    fs.writeFileSync(path.join(dir, file), text);
  }
  await build({ entryPoints: [path.join(dir, 'entry.js')], outfile: path.join(dir, 'out.cjs'), bundle: true, platform: 'node', format: 'cjs', plugins: [onDemand, leftOut], logLevel: 'silent' });
  const run = spawnSync(process.execPath, [path.join(dir, 'out.cjs')], { encoding: 'utf8' });
  expect(run.status, run.stderr).toBe(0);
  return run.stdout.trim().split('\n');
}

describe('node dist/cli.js', () => {
  it('loads the server from its bundle: no module tsc compiled, and neither Fastify nor zod from node_modules', () => {
    const loaded = loadedByVersion();
    const ours = loaded.filter((file) => file.startsWith(`${DIST}/`)).map((file) => path.relative(DIST, file));
    expect(ours).toContain('cli.js');
    expect(ours.length).toBeGreaterThan(1);
    expect(ours.filter((file) => !/^cli(\.[^/]+)?\.js$/.test(file))).toEqual([]);
    const packages = new Set(loaded.filter((file) => file.includes('/node_modules/')).map(packageOf));
    for (const bundled of ['fastify', 'zod', 'fastify-type-provider-zod', 'prom-client', 'ajv']) expect(packages.has(bundled), bundled).toBe(false);
  });

  it('starts without loading Swagger UI, pino or yaml through Node\'s CommonJS loader; yaml only once a YAML document is asked for', { timeout: 120_000 }, async () => {
    const started = await requiredByServing(async (url) => {
      expect((await fetch(`${url}/alive`)).status).toBe(200);
      expect((await fetch(`${url}/docs/json`)).status).toBe(200);
    });
    for (const bundled of ['@fastify/swagger-ui', '@fastify/static', 'pino', 'yaml']) expect(started.has(bundled), bundled).toBe(false);
    const asked = await requiredByServing(async (url) => {
      const document = await fetch(`${url}/docs/yaml`);
      expect(document.status).toBe(200);
      expect(await document.text()).toMatch(/^openapi: 3\.1\.0$/m);
    });
    expect(asked.has('yaml')).toBe(true);
  });

  it("leaves out what the server never uses (zod's other locales, @fastify/static's glob, prom-client's OpenTelemetry), and still answers in English, serves Swagger UI's files and its metrics", { timeout: 60_000 }, async () => {
    const sources = bundledSources();
    // zod's locales' index is the build's own (a module that exports `en` alone).
    const locales = sources.filter((source) => /node_modules\/zod\/v4\/locales\/[^/]+\.js$/.test(source)).map((source) => path.basename(source));
    expect(locales.filter((name) => name !== 'index.js')).toEqual(['en.js']);
    expect(sources.filter((source) => source.includes('node_modules/') && ['glob', '@opentelemetry/api'].includes(packageOf(source)))).toEqual([]);
    const server = await spawnServer({ dataDir: fs.mkdtempSync(path.join(tmp, 'data-')), command: [process.execPath, path.join(DIST, 'cli.js')] });
    try {
      const refused = await fetch(`${server.url}/conversations`, { method: 'POST', headers: { authorization: `Bearer ${TEST_KEY}`, 'content-type': 'application/json' }, body: JSON.stringify({ llm: { model: 3 } }) });
      expect(refused.status).toBe(400);
      expect(((await refused.json()) as { message: string }).message).toBe('Invalid body at llm.model: Invalid input: expected string, received number.');
      const css = await fetch(`${server.url}/docs/static/swagger-ui.css`);
      expect(css.status).toBe(200);
      expect(css.headers.get('content-type')).toMatch(/^text\/css/);
      // A file @fastify/send cannot find: its http-errors, loaded on demand (scripts/perf/stand-ins.mjs, onDemand).
      expect((await fetch(`${server.url}/docs/static/no-such-file.css`)).status).toBe(404);
      const metrics = await fetch(`${server.url}/metrics`, { headers: { authorization: `Bearer ${TEST_KEY}` } });
      expect(metrics.status).toBe(200);
      expect(await metrics.text()).toMatch(/^agentd_process_process_cpu_seconds_total \d/m);
    } finally {
      server.child.kill('SIGTERM');
    }
    expect(await server.exited).toBe(0);
  });

  it("starts without running ajv, Fastify's own compilers, busboy, thread-stream or json-schema-resolver; each runs when first needed", { timeout: 120_000 }, async () => {
    const started = await bundledFunctionsRun(async (url) => {
      const health = await fetch(`${url}/health`);
      expect(health.status).toBe(200);
      expect(await health.json()).toMatchObject({ status: 'ok' });
    });
    const asked = await bundledFunctionsRun(async (url) => {
      const headers = { authorization: `Bearer ${TEST_KEY}`, 'content-type': 'application/json' };
      const { id } = (await (await fetch(`${url}/conversations`, { method: 'POST', headers, body: '{}' })).json()) as { id: string };
      const post = (outputSchema: unknown) => fetch(`${url}/conversations/${id}/messages`, { method: 'POST', headers, body: JSON.stringify({ content: 'report', run: false, output_schema: outputSchema }) });
      const refused = await post({ type: 'no-such-type' });
      expect(refused.status).toBe(400);
      expect(((await refused.json()) as { message: string }).message).toMatch(/^output_schema is not a usable JSON Schema: /);
      // draft-07 with ajv-formats' formats, then each dialect's own instance.
      expect((await post({ type: 'object', properties: { mail: { type: 'string', format: 'email' } } })).status).toBe(202);
      expect((await post({ $schema: 'https://json-schema.org/draft/2020-12/schema', type: 'array', prefixItems: [{ type: 'string' }] })).status).toBe(202);
      expect((await post({ $schema: 'https://json-schema.org/draft/2019-09/schema', type: 'string' })).status).toBe(202);
      // busboy for an upload, json-schema-resolver for the OpenAPI document.
      const form = new FormData();
      form.append('file', new Blob(['uploaded']), 'note.txt');
      expect((await fetch(`${url}/conversations/${id}/files/upload`, { method: 'POST', headers: { authorization: `Bearer ${TEST_KEY}` }, body: form })).status).toBe(201);
      const document = await fetch(`${url}/docs/json`);
      expect(document.status).toBe(200);
      expect(((await document.json()) as { paths: Record<string, unknown> }).paths['/conversations/{id}/files/upload']).toBeDefined();
    });
    // fast-json-stringify's validator: for a response schema with a union its serializer must pick a branch of.
    const ajv = /node_modules\/(ajv\/dist\/ajv|fast-json-stringify\/lib\/validator)\.js$/;
    const compilers = /node_modules\/@fastify\/(ajv-compiler|fast-json-stringify-compiler)\/index\.js$/;
    const onFirstUse = [ajv, /node_modules\/@fastify\/busboy\/index\.js$/, /node_modules\/json-schema-resolver\/ref-resolver\.js$/];
    const transport = /node_modules\/thread-stream\/index\.js$/;
    expect(started.filter((name) => [...onFirstUse, compilers, transport].some((module) => module.test(name)))).toEqual([]);
    for (const module of onFirstUse) expect(asked.some((name) => module.test(name)), String(module)).toBe(true);
    expect(asked.filter((name) => compilers.test(name) || transport.test(name))).toEqual([]);
    // Fastify's plugin checks run semver's satisfies from its own module, without the package's index.
    expect(started.filter((name) => /node_modules\/semver\/(index|functions\/satisfies)\.js$/.test(name)).map((name) => name.replace(/^.*node_modules\//, ''))).toEqual(['semver/functions/satisfies.js']);
  });

  it('stands in for a left-out package with something that throws, saying what needed it, when that is reached', async () => {
    const output = await bundleAndRun({
      'node_modules/@fastify/static/index.js': "const { glob } = require('glob');\nmodule.exports = glob;\n",
      'node_modules/prom-client/lib/cpu.js': "module.exports = require('@opentelemetry/api');\n",
      'entry.js':
        "const glob = require('./node_modules/@fastify/static/index.js');\nconst otel = require('./node_modules/prom-client/lib/cpu.js');\n" +
        "for (const reach of [() => glob('**'), () => otel.trace.getSpan(otel.context.active())]) { try { reach(); console.log('reached'); } catch (error) { console.log(error.message); } }\n",
    });
    expect(output).toEqual([
      "@fastify/static's wildcard: false needs the glob package, which agentd's bundle leaves out (scripts/perf/stand-ins.mjs)",
      "prom-client's exemplars needs the @opentelemetry/api package, which agentd's bundle leaves out (scripts/perf/stand-ins.mjs)",
    ]);
  });

  it('runs a package loaded on demand at its first use, not where it is required', async () => {
    const output = await bundleAndRun({
      'node_modules/http-errors/index.js': "console.log('http-errors runs');\nmodule.exports = (status) => Object.assign(new Error('status ' + status), { status });\n",
      'node_modules/@fastify/send/lib/error.js': "const createError = require('http-errors');\nmodule.exports = (status) => createError(status);\n",
      'entry.js': "const error = require('./node_modules/@fastify/send/lib/error.js');\nconsole.log('required');\nconsole.log(error(404).message);\nconsole.log(error(403).message);\n",
    });
    expect(output).toEqual(['required', 'http-errors runs', 'status 404', 'status 403']);
  });

  // Since Node 22, an ES module import of `node:http` (any name from it) reads every export of the
  // module for its namespace, among them the getters of its WebSocket, CloseEvent and MessageEvent,
  // which load Node's own copy of undici (760 KB of source, ~2 MiB of an empty server's RSS on the
  // Node the Docker image runs). The server's own HTTP client is the undici package, loaded when
  // first needed: built-in modules whose namespace costs more than the module are reached through
  // process.getBuiltinModule.
  it(`starts on the Node agentd ships (${NODE_RUNTIME_VERSION}, the Docker image's) without loading Node's own undici, TLS or zlib`, { timeout: 300_000 }, async () => {
    const runtime = ensureRuntime({ root: ROOT });
    const hook = path.join(tmp, 'builtins-hook.mjs');
    fs.writeFileSync(hook, BUILTINS_HOOK);
    const server = await spawnServer({ dataDir: fs.mkdtempSync(path.join(tmp, 'data-')), command: [runtime, '--import', hook, path.join(DIST, 'cli.js')] });
    try {
      expect((await fetch(`${server.url}/alive`)).status).toBe(200);
    } finally {
      server.child.kill('SIGTERM');
    }
    expect(await server.exited).toBe(0);
    const builtins = server.output().split('\n').filter((line) => line.startsWith('BUILTIN NativeModule ')).map((line) => line.slice('BUILTIN NativeModule '.length));
    expect(builtins).toContain('http');
    expect(builtins.filter((name) => name.includes('undici'))).toEqual([]);
    // Nor TLS (Fastify's HTTPS and HTTP/2 servers, prom-client's push gateway: scripts/perf/stand-ins.mjs), nor zlib (a checkpoint's).
    for (const name of ['tls', 'https', 'http2', 'zlib']) expect(builtins, name).not.toContain(name);
  });

  it('checks bash permission rules with the parser it loads on first use (its WebAssembly found beside the bundle)', { timeout: 60_000 }, async () => {
    const llm = await startFakeLlm([{ toolCalls: [{ name: 'bash', arguments: { command: "bash -c 'cd . && (rm -fr victim)'" } }] }, { text: 'refused' }]);
    const server = await spawnServer({ dataDir: fs.mkdtempSync(path.join(tmp, 'data-')), command: [process.execPath, path.join(DIST, 'cli.js')] });
    const headers = { authorization: `Bearer ${TEST_KEY}`, 'content-type': 'application/json' };
    try {
      const created = await fetch(`${server.url}/conversations`, { method: 'POST', headers, body: JSON.stringify({ llm: { model: 'fake', base_url: llm.url, api_key: 'k' }, permissions: { deny: ['bash(rm -rf*)'] } }) });
      const { id, workdir } = (await created.json()) as { id: string; workdir: string };
      fs.mkdirSync(path.join(workdir, 'victim'));
      fs.writeFileSync(path.join(workdir, 'victim', 'keep.txt'), 'still here');
      expect((await fetch(`${server.url}/conversations/${id}/messages`, { method: 'POST', headers, body: JSON.stringify({ content: 'clean up' }) })).status).toBe(202);
      let events: { kind: string; rule?: string }[] = [];
      for (let tries = 0; tries < 400 && !events.some((event) => event.kind === 'message' && (event as { source?: string }).source === 'agent'); tries += 1) {
        await new Promise((resolve) => setTimeout(resolve, 50));
        events = ((await (await fetch(`${server.url}/conversations/${id}/events?limit=1000`, { headers })).json()) as { items: typeof events }).items;
      }
      expect(events.filter((event) => event.kind === 'rejection')).toMatchObject([{ rule: 'deny: bash(rm -rf*)' }]);
      expect(fs.readFileSync(path.join(workdir, 'victim', 'keep.txt'), 'utf8')).toBe('still here');
    } finally {
      server.child.kill('SIGTERM');
      await llm.close();
    }
    expect(await server.exited).toBe(0);
  });

  it('converts a fetched page in its HTML worker: the worker runs from the bundle, turndown from node_modules', { timeout: 120_000 }, async () => {
    const site = await startLocalSite((_request, res) => void res.writeHead(200, { 'content-type': 'text/html' }).end(`<html><head><title>Bundled</title></head><body><h1>From the worker</h1>${'<div>'.repeat(20_000)}deep${'</div>'.repeat(20_000)}</body></html>`));
    const llm = await startFakeLlm([{ toolCalls: [{ name: 'web_fetch', arguments: { url: `${site.url}/page` } }] }, { text: 'read' }]);
    const server = await spawnServer({ dataDir: fs.mkdtempSync(path.join(tmp, 'data-')), env: { AGENTD_WEB_FETCH_ALLOW_PRIVATE: 'true' } });
    const api = async (route: string, init: RequestInit = {}) => (await fetch(`${server.url}${route}`, { ...init, headers: { authorization: `Bearer ${TEST_KEY}`, 'content-type': 'application/json' } })).json() as Promise<any>;
    try {
      const { id } = await api('/conversations', { method: 'POST', body: JSON.stringify({ llm: { model: 'fake', base_url: llm.url, api_key: 'k' }, initial_message: 'read it' }) });
      let status = '';
      for (let look = 0; look < 1_200 && !['idle', 'error', 'stuck'].includes(status); look++) {
        await new Promise((resolve) => setTimeout(resolve, 50));
        status = (await api(`/conversations/${id}`)).status;
      }
      expect(status).toBe('idle');
      const page = ((await api(`/conversations/${id}/events?limit=1000`)).items as any[]).find((event) => event.kind === 'observation');
      expect(page).toMatchObject({ tool_name: 'web_fetch', is_error: false, data: { format: 'markdown', cut: 'nesting deeper than 512; what lies deeper is left out' } });
      expect(page.content).toContain('Title: Bundled');
      expect(page.content).toContain('# From the worker');
      expect(llm.violations).toEqual([]);
    } finally {
      server.child.kill('SIGTERM');
      await server.exited;
      await llm.close();
      await site.close();
    }
  });

  it("leaves every package our code loads with import() to Node's loader", () => {
    const dynamic = new Set<string>();
    for (const entry of fs.readdirSync(path.join(ROOT, 'src'), { recursive: true, withFileTypes: true })) {
      if (!entry.isFile() || !entry.name.endsWith('.ts') || entry.parentPath.includes(`${path.sep}ui`)) continue;
      const text = fs.readFileSync(path.join(entry.parentPath, entry.name), 'utf8');
      // Not a type's `typeof import('x')`, `<import('x').T>` or `import('x').T`.
      for (const match of text.matchAll(/(?<!typeof |<)\bimport\('([^.'][^']*)'\)(?!\.[A-Za-z])/g)) if (!match[1]!.startsWith('node:')) dynamic.add(match[1]!);
    }
    expect(dynamic.has('undici')).toBe(true);
    const names = fs.readdirSync(DIST).filter((name) => /^cli(\.[^/]+)?\.js$/.test(name));
    const bundle = names.map((name) => fs.readFileSync(path.join(DIST, name), 'utf8')).join('\n');
    for (const name of dynamic) expect(bundle.includes(`import(${JSON.stringify(name)})`), name).toBe(true);
    // Nor is any of them in the bundle besides (imported statically by a module loaded on demand:
    // undici by the LLM client's fetch), where it would be loaded and held twice. The source maps
    // name every file bundled.
    const bundled = new Set(bundledSources().filter((source) => source.includes('node_modules/')).map(packageOf));
    expect(bundled.has('fastify')).toBe(true);
    expect([...dynamic].map(packageOf).filter((name) => bundled.has(name))).toEqual([]);
  });
});
