import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { NODE_RUNTIME_VERSION } from '../../scripts/binary-runtime.mjs';
import { readProcess } from '../../src/adapters/process/process-tree.js';
import { ShellLedger } from '../../src/adapters/shell/shell-ledger.js';
import { startFakeLlm, type FakeLlm } from '../fake-llm/fake-llm-server.js';
import { spawnServer, tempDir, TEST_KEY, type SpawnedServer } from '../support/agentd.js';
import { startLocalSite, type LocalSite } from '../support/local-site.js';
import { runCli } from '../support/cli.js';
import { requestJson } from '../support/json-api.js';

/**
 * The single executable (`npm run build:binary`), run from an empty directory with no
 * node_modules around: every file it reads at run time must be inside it.
 */
const ROOT = path.resolve(import.meta.dirname, '../..');
const BINARY = path.join(ROOT, 'dist', 'agentd');
const BUILD_INPUTS = ['src', 'package-lock.json', 'scripts/build-binary.mjs', 'scripts/build-server.mjs', 'scripts/binary-runtime.mjs', 'scripts/build-ui.mjs', 'scripts/perf'].map((name) => path.join(ROOT, name));

function newestChange(file: string): number {
  const stat = fs.statSync(file);
  if (!stat.isDirectory()) return stat.mtimeMs;
  return Math.max(stat.mtimeMs, ...fs.readdirSync(file).map((name) => newestChange(path.join(file, name))));
}

let buildOutput: { stdout: string; stderr: string } | null = null;

/** Builds dist/agentd unless it is newer than everything it is built from. */
function ensureBinary(): void {
  if (fs.existsSync(BINARY) && fs.statSync(BINARY).mtimeMs > Math.max(...BUILD_INPUTS.map(newestChange))) return;
  const built = spawnSync(process.execPath, [path.join(ROOT, 'scripts', 'build-binary.mjs')], { cwd: ROOT, encoding: 'utf8', timeout: 600_000 });
  if (built.status !== 0) throw new Error(`build:binary failed: ${built.stderr}${built.stdout}`);
  buildOutput = { stdout: built.stdout, stderr: built.stderr };
}

/** Above what a Node 24 process that runs next to nothing keeps of its own (its heap, its threads' stacks, the C library's). */
const BARE_NODE_BYTES = 8 * 2 ** 20;

/** A process's anonymous memory, from /proc: what it holds of its own, not the files it maps. */
function anonymousBytes(pid: number): number {
  return Number(/^Anonymous:\s+(\d+) kB/m.exec(fs.readFileSync(`/proc/${pid}/smaps_rollup`, 'utf8'))?.[1]) * 1024;
}

let cwd: string;
let spawnerPid: number | undefined;
let llm: FakeLlm;
let server: SpawnedServer;
let site: LocalSite;

const api = (route: string, body?: unknown) => requestJson(server, body === undefined ? 'GET' : 'POST', route, body);

beforeAll(async () => {
  ensureBinary();
  cwd = tempDir('agentd-binary-');
  site = await startLocalSite((_request, res) => void res.writeHead(200, { 'content-type': 'text/html' }).end(`<html><body><h1>From the worker</h1>${'<div>'.repeat(2_000)}deep${'</div>'.repeat(2_000)}</body></html>`));
  llm = await startFakeLlm([
    { toolCalls: [{ name: 'bash', arguments: { command: '{ rm -fr victim; }' } }] },
    { toolCalls: [{ name: 'bash', arguments: { command: 'echo hi from the binary' } }] },
    { toolCalls: [{ name: 'web_fetch', arguments: { url: `${site.url}/page` } }] },
    { text: 'All done.' },
  ]);
  fs.mkdirSync(path.join(cwd, 'tmp'));
  server = await spawnServer({ command: [BINARY], cwd, dataDir: path.join(cwd, 'data'), env: { HOME: cwd, TMPDIR: path.join(cwd, 'tmp'), AGENTD_WEB_FETCH_ALLOW_PRIVATE: 'true' } });
}, 120_000);

afterAll(async () => {
  server?.child.kill('SIGTERM');
  await server?.exited;
  await llm?.close();
  await site?.close();
  if (cwd) fs.rmSync(cwd, { recursive: true, force: true });
});

describe('the single executable', () => {
  it(`runs on the LTS runtime it was built with (node ${NODE_RUNTIME_VERSION}), not the build machine's node`, async () => {
    const info = await api('/info');
    expect(info.status).toBe(200);
    expect(info.body.runtime).toEqual({ name: 'node', version: NODE_RUNTIME_VERSION });
    // The build prints no known-harmless postject noise (when this run built it).
    if (buildOutput) expect(buildOutput.stderr).not.toMatch(/Can't find string offset/);
    if (buildOutput) expect(buildOutput.stdout).toContain(`on node v${NODE_RUNTIME_VERSION}`);
  });

  it('prints its version and help like dist/cli.js', () => {
    const { version } = JSON.parse(fs.readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as { version: string };
    const shown = spawnSync(BINARY, ['--version'], { cwd, encoding: 'utf8' });
    expect(shown.stdout).toBe(`${version}\n`);
    expect(shown.stderr).toBe('');
    expect(spawnSync(BINARY, ['--help'], { cwd, encoding: 'utf8' }).stdout).toContain('Usage: agentd');
    expect(spawnSync(BINARY, ['--no-such-flag'], { cwd, encoding: 'utf8' }).status).toBe(2);
  });

  it('keeps its bundle at one byte a character (scripts/perf/binary-bundle.mjs)', () => {
    // One character beyond Latin-1 anywhere and V8 holds the whole source, in each of its processes, at two bytes each.
    const source = fs.readFileSync(`${BINARY}.cjs`, 'utf8');
    expect(source.match(/[^\u0000-\u00ff]/gu)?.slice(0, 5) ?? []).toEqual([]);
  });

  it('serves /alive, /openapi.json and Swagger UI from its own assets, written out when first asked for', async () => {
    // Swagger UI's files (2.5 MB) are written to a temp dir of the server's by the first request for them, not at start-up.
    const [uiDir, ...others] = fs.readdirSync(path.join(cwd, 'tmp')).filter((name) => name.startsWith('agentd-swagger-ui-'));
    expect(uiDir).toBeDefined();
    expect(others).toEqual([]);
    expect(fs.readdirSync(path.join(cwd, 'tmp', uiDir!))).toEqual([]);
    // Removed meanwhile (a cleaner of temp dirs): made again by that first request.
    fs.rmdirSync(path.join(cwd, 'tmp', uiDir!));
    expect((await fetch(`${server.url}/alive`)).status).toBe(200);
    const openapi = await fetch(`${server.url}/openapi.json`);
    expect(openapi.status).toBe(200);
    expect(((await openapi.json()) as { openapi: string }).openapi).toBe('3.1.0');
    const asyncapi = await fetch(`${server.url}/asyncapi.json`);
    expect(((await asyncapi.json()) as { asyncapi: string }).asyncapi).toBe('3.0.0');
    const docs = await fetch(`${server.url}/docs`);
    expect(docs.status).toBe(200);
    expect(docs.headers.get('content-type')).toContain('text/html');
    const css = await fetch(`${server.url}/docs/static/swagger-ui.css`);
    expect(css.status).toBe(200);
    expect((await css.text()).length).toBeGreaterThan(10_000);
    expect((await fetch(`${server.url}/docs/static/swagger-ui-bundle.js`)).status).toBe(200);
    expect((await fetch(`${server.url}/docs/static/logo.svg`)).status).toBe(200);
    expect(fs.readdirSync(path.join(cwd, 'tmp', uiDir!))).toContain('swagger-ui.css');
    // The dashboard's files are assets of the binary too.
    const ui = await fetch(`${server.url}/ui`);
    expect(ui.status).toBe(200);
    expect(await ui.text()).toContain('/ui/app.js');
    const script = await fetch(`${server.url}/ui/app.js`);
    expect(script.status).toBe(200);
    expect((await script.text()).length).toBeGreaterThan(20_000);
    expect((await fetch(`${server.url}/ui/app.css`)).status).toBe(200);
  });

  it('runs a conversation: the prompt and tool descriptions come from its assets, bash runs, a page converts in its HTML worker', async () => {
    // A deny rule is checked on a parse of the command: the bash parser's WebAssembly comes from the binary's assets.
    const created = await api('/conversations', { llm: { model: 'fake', base_url: llm.url, api_key: 'k' }, permissions: { deny: ['bash(rm -rf*)'] } });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    const id = created.body.id as string;
    expect((await api(`/conversations/${id}/messages`, { content: 'say hi' })).status).toBe(202);

    const deadline = Date.now() + 20_000;
    let status = '';
    while (!['idle', 'finished', 'error', 'stuck'].includes(status) && Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 50));
      status = (await api(`/conversations/${id}`)).body.status as string;
    }
    expect(status).toBe('idle');

    const events = (await api(`/conversations/${id}/events?limit=1000`)).body.items as any[];
    const systemPrompt = events.find((event) => event.kind === 'system_prompt');
    expect(systemPrompt.content).toContain('You are an autonomous software engineer');
    const bashDescription = fs.readFileSync(path.join(ROOT, 'src', 'core', 'tools', 'bash.md'), 'utf8').trim();
    expect(systemPrompt.tools.find((tool: any) => tool.name === 'bash').description).toBe(bashDescription);
    expect(events.filter((event) => event.kind === 'rejection')).toMatchObject([{ tool_name: 'bash', rule: 'deny: bash(rm -rf*)' }]);
    expect(events.find((event) => event.kind === 'observation')).toMatchObject({ tool_name: 'bash', is_error: false });
    expect(events.find((event) => event.kind === 'observation').content).toContain('hi from the binary');
    // The HTML worker's script is an asset of the binary (no node_modules here to load turndown from).
    const page = events.find((event) => event.kind === 'observation' && event.tool_name === 'web_fetch');
    expect(page).toMatchObject({ is_error: false, data: { format: 'markdown', cut: 'nesting deeper than 512; what lies deeper is left out' } });
    expect(page.content).toContain('# From the worker');
    expect(events.filter((event) => event.kind === 'message').at(-1)).toMatchObject({ source: 'agent', content: 'All done.' });
    expect(llm.violations).toEqual([]);

    // The shell was spawned by the binary's own spawner (`agentd __spawner`, a child of the server).
    const [shell] = ShellLedger.read(path.join(cwd, 'data', 'shells.jsonl'));
    const spawner = readProcess(shell!.pid)!.ppid;
    expect(fs.readFileSync(`/proc/${spawner}/cmdline`, 'utf8').split('\0').filter(Boolean)).toEqual([BINARY, '__spawner']);
    expect(readProcess(spawner)?.ppid).toBe(server.child.pid);
    spawnerPid = spawner;
  });

  it("keeps the server's code out of its spawner (src/cli/binary-main.ts)", () => {
    // The spawner's own memory (anonymous: not the executable's pages it shares with the server)
    // is a bare Node's and its messages' alone; the server's bundle, were it read and compiled
    // there, would add its source and more.
    expect(spawnerPid).toBeDefined();
    const bundleBytes = fs.statSync(`${BINARY}.cjs`).size;
    const own = anonymousBytes(spawnerPid!);
    expect(own, `the spawner holds ${(own / 2 ** 20).toFixed(1)} MiB of its own`).toBeLessThan(BARE_NODE_BYTES + bundleBytes);
  });

  it('is the client too: agentd run with an embedded server over a temp data dir, and against the running server', async () => {
    const project = path.join(cwd, 'project');
    fs.mkdirSync(project, { recursive: true });
    llm.setScript([{ text: 'Embedded in the binary.' }]);
    const env = { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: cwd, NO_COLOR: '1' };
    // Not spawnSync: the fake LLM answers from this process.
    const embedded = await runCli(['run', 'Say where you run'], {
      command: [BINARY],
      cwd: project,
      env: { ...env, AGENTD_DATA_DIR: path.join(cwd, 'embedded-data'), AGENTD_LLM_MODEL: 'fake', AGENTD_LLM_BASE_URL: llm.url, AGENTD_LLM_API_KEY: 'k' },
    });
    expect(embedded.stdout, embedded.stderr).toBe('Embedded in the binary.\n');
    expect(embedded.code).toBe(0);

    const remote = await runCli(['conversations', '--json'], { command: [BINARY], cwd: project, env: { ...env, AGENTD_URL: server.url, AGENTD_KEY: TEST_KEY } });
    expect(remote.code, remote.stderr).toBe(0);
    const listed = remote.stdout.trim().split('\n').map((line) => JSON.parse(line));
    expect(listed.length).toBeGreaterThanOrEqual(1);
    expect(listed[0]).toMatchObject({ status: 'idle' });
  });
});
