import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { spawnSync } from 'node:child_process';
import { afterEach, describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../../src/config.js';
import { helpText, parseCli } from '../../src/cli/command-line.js';
import { configVariables, envSchema } from '../../src/config-variables.js';
import { freePort, spawnServer, tempDir, TEST_KEY, type SpawnedServer } from '../support/agentd.js';

const CLI = path.resolve(import.meta.dirname, '../../dist/cli.js');
const VERSION = (JSON.parse(fs.readFileSync(path.resolve(import.meta.dirname, '../../package.json'), 'utf8')) as { version: string }).version;
const running: SpawnedServer[] = [];

function runCli(args: string[], env: Record<string, string> = {}, cwd?: string) {
  const result = spawnSync(process.execPath, [CLI, ...args], {
    ...(cwd ? { cwd } : {}),
    env: { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: os.homedir(), AGENTD_MASTER_KEY: TEST_KEY, AGENTD_DATA_DIR: tempDir(), ...env },
    encoding: 'utf8',
    timeout: 15_000,
  });
  return { status: result.status, stdout: result.stdout, stderr: result.stderr };
}

async function stopAll(): Promise<void> {
  for (const server of running.splice(0)) {
    server.child.kill('SIGKILL');
    await server.exited;
  }
}
afterEach(stopAll);

describe('the command line', () => {
  it('--help prints usage and exits 0', () => {
    const result = runCli(['--help']);
    expect(result.status).toBe(0);
    expect(result.stdout).toContain('Usage: agentd');
    for (const option of ['--host', '--port', '--data-dir', '--env-file', '--version']) expect(result.stdout).toContain(option);
    expect(result.stdout).toBe(helpText());
    expect(result.stdout).not.toMatch(/README/);
  });

  it('--version prints the package version and exits 0', () => {
    const result = runCli(['--version']);
    expect(result.status).toBe(0);
    expect(result.stdout).toBe(`${VERSION}\n`);
  });

  it.each([
    [[], { AGENTD_PORT: 'abc' }, 'AGENTD_PORT'],
    [['--frobnicate'], {}, 'frobnicate'],
  ])('a bad value (%j %j) stops start-up with one clear line and a non-zero exit', (args, env, named) => {
    const result = runCli(args, env);
    expect(result.status).not.toBe(0);
    expect(result.status).not.toBeNull();
    const lines = result.stderr.split('\n').filter((line) => line.trim() !== '');
    expect(lines, result.stderr).toHaveLength(1);
    expect(lines[0]).toMatch(/^agentd: /);
    expect(lines[0]).toContain(named);
    expect(result.stderr).not.toMatch(/\n\s+at /);
    expect(result.stdout).toBe('');
  });
});

describe('every variable the server reads is documented', () => {
  const ROOT = path.resolve(import.meta.dirname, '../..');
  const names = Object.keys(envSchema().shape);
  const variables = configVariables();

  it('the variable data is the schema, and every entry has a default and a one-line meaning', () => {
    expect(names).toEqual(Object.keys(variables));
    expect(names.length).toBeGreaterThanOrEqual(30);
    for (const [name, variable] of Object.entries(variables)) {
      expect(name, 'every variable starts with AGENTD_ (OPENAI_* are the documented fallbacks)').toMatch(/^(AGENTD_|OPENAI_(BASE_URL|API_KEY)$)/);
      expect(variable.default.trim(), `${name} has no default text`).not.toBe('');
      expect(variable.meaning.trim(), `${name} has no meaning`).not.toBe('');
      expect(variable.meaning, `${name}: one line`).not.toContain('\n');
    }
  });

  it('.env.example has a line for each', () => {
    const example = fs.readFileSync(path.join(ROOT, '.env.example'), 'utf8');
    const listed = new Set([...example.matchAll(/^#?\s*([A-Z][A-Z0-9_]*)=/gm)].map((match) => match[1]!));
    expect(names.filter((name) => !listed.has(name)), '.env.example misses these').toEqual([]);
    expect([...listed].filter((name) => !names.includes(name)), '.env.example lists variables the server does not read').toEqual([]);
  });

  it('--help prints each with its default and meaning', () => {
    const help = helpText();
    for (const [name, variable] of Object.entries(variables)) {
      const at = help.indexOf(`  ${name} `);
      expect(at, `--help misses ${name}`).toBeGreaterThan(0);
      const block = help.slice(at, at + 400);
      expect(block).toContain(variable.meaning);
      expect(block).toContain(`default: ${variable.default}`);
    }
  });
});

describe('the default LLM from AGENTD_LLM_*', () => {
  it('every request-shape variable reaches the default llm; none without a model; bad values name the variable', () => {
    const config = loadConfig({
      AGENTD_LLM_MODEL: 'gpt-4o-prod',
      AGENTD_LLM_BASE_URL: 'https://my-resource.openai.azure.com',
      OPENAI_API_KEY: 'sk-fallback',
      AGENTD_LLM_API_VERSION: '2024-06-01',
      AGENTD_LLM_MAX_TOKENS_PARAM: 'max_tokens',
      AGENTD_LLM_STREAM_USAGE: 'false',
      AGENTD_LLM_DROP_PARAMS: 'temperature, top_p',
      AGENTD_LLM_EXTRA_BODY: '{"provider": {"sort": "throughput"}}',
      AGENTD_LLM_EXTRA_HEADERS: '{"X-Title": "agentd"}',
      AGENTD_LLM_PROMPT_CACHE: 'true',
      AGENTD_LLM_API: 'responses',
    });
    expect(config.defaultLlm).toEqual({
      model: 'gpt-4o-prod',
      base_url: 'https://my-resource.openai.azure.com',
      api_key: 'sk-fallback',
      api_version: '2024-06-01',
      max_tokens_param: 'max_tokens',
      stream_usage: false,
      drop_params: ['temperature', 'top_p'],
      extra_body: { provider: { sort: 'throughput' } },
      extra_headers: { 'X-Title': 'agentd' },
      prompt_cache: true,
      api: 'responses',
    });
    expect(loadConfig({ AGENTD_LLM_MODEL: 'claude-sonnet-4-5' }).defaultLlm?.api).toBeNull();
    expect(() => loadConfig({ AGENTD_LLM_API: 'grpc' })).toThrow(/invalid AGENTD_LLM_API/);
    expect(loadConfig({ AGENTD_LLM_API_VERSION: '2024-06-01' }).defaultLlm).toBeNull();
    expect(() => loadConfig({ AGENTD_LLM_EXTRA_BODY: '{not json' })).toThrow(/invalid AGENTD_LLM_EXTRA_BODY: must be a JSON object/);
    expect(() => loadConfig({ AGENTD_LLM_MAX_TOKENS_PARAM: 'tokens' })).toThrow(/invalid AGENTD_LLM_MAX_TOKENS_PARAM/);
    expect(() => loadConfig({ AGENTD_LLM_PROMPT_CACHE: 'maybe' })).toThrow(/invalid AGENTD_LLM_PROMPT_CACHE/);
  });
});

describe('.env files', () => {
  const serveIn = (cwd: string, argv: string[], env: Record<string, string>) => {
    const parsed = parseCli(argv, env, { cwd });
    if (parsed.action !== 'serve') throw new Error('expected serve');
    return parsed.config;
  };

  it('a malformed line is reported with its line number; comments, blanks, export and multi-line quoted values are not', () => {
    const dir = tempDir('agentd-dotenv-bad-');
    const file = path.join(dir, '.env');
    fs.writeFileSync(file, '# fine\n\nexport AGENTD_PORT=9100\nAGENTD_HOST 10.0.0.1\nAGENTD_MASTER_KEY="multi\nline = not a variable\nvalue"\n  = oops\nAGENTD_LOG_LEVEL=warn\n');
    const parsed = parseCli([], { AGENTD_DATA_DIR: dir }, { cwd: dir });
    if (parsed.action !== 'serve') throw new Error('expected serve');
    expect(parsed.warnings).toEqual([`${file}, line 4: not NAME=value, ignored`, `${file}, line 8: not NAME=value, ignored`]);
    expect(parsed.config).toMatchObject({ port: 9100, host: '127.0.0.1', logLevel: 'warn' });
  });

  it("envFile 'user' reads ~/.agentd/.env (HOME) and never the working directory's .env", () => {
    const home = tempDir('agentd-dotenv-home-');
    const project = tempDir('agentd-dotenv-project-');
    fs.mkdirSync(path.join(home, '.agentd'));
    fs.writeFileSync(path.join(home, '.agentd', '.env'), 'AGENTD_LOG_LEVEL=debug\n');
    fs.writeFileSync(path.join(project, '.env'), 'AGENTD_SANDBOX=none\nAGENTD_LLM_MODEL=m\nAGENTD_LLM_BASE_URL=http://127.0.0.1:9/v1\n');
    const parsed = parseCli([], { HOME: home, AGENTD_DATA_DIR: home }, { cwd: project, envFile: 'user' });
    if (parsed.action !== 'serve') throw new Error('expected serve');
    expect(parsed.config).toMatchObject({ logLevel: 'debug', defaultLlm: null, sandbox: { mode: 'auto' } });
    // The same directory read as the operator's (agentd serve): its .env applies.
    expect(serveIn(project, [], { AGENTD_DATA_DIR: home }).sandbox.mode).toBe('none');
  });

  it('./.env is read; the environment wins over it, flags win over both', () => {
    const dir = tempDir('agentd-dotenv-');
    fs.writeFileSync(path.join(dir, '.env'), '# a comment\nAGENTD_PORT=9100\nAGENTD_HOST=10.1.1.1\nAGENTD_LOG_LEVEL="warn"\nexport AGENTD_MASTER_KEY=from-file\n');
    const config = serveIn(dir, ['--host', '127.0.0.2'], { AGENTD_DATA_DIR: dir, AGENTD_PORT: '9200' });
    expect(config).toMatchObject({ port: 9200, host: '127.0.0.2', logLevel: 'warn', masterKeys: ['from-file'] });
    expect(serveIn(tempDir(), [], { AGENTD_DATA_DIR: dir }).port).toBe(8000);
  });

  it('--env-file PATH is read instead; a missing one stops start-up, a bad value names the variable', () => {
    const dir = tempDir('agentd-envfile-');
    fs.writeFileSync(path.join(dir, '.env'), 'AGENTD_PORT=9100\n');
    fs.writeFileSync(path.join(dir, 'prod.env'), 'AGENTD_PORT=9300\n');
    expect(serveIn(dir, ['--env-file', 'prod.env'], { AGENTD_DATA_DIR: dir }).port).toBe(9300);
    expect(() => serveIn(dir, ['--env-file', 'missing.env'], { AGENTD_DATA_DIR: dir })).toThrow(/cannot read the env file .*missing\.env: ENOENT/);
    fs.writeFileSync(path.join(dir, 'bad.env'), 'AGENTD_PORT=eighty\n');
    expect(() => serveIn(dir, ['--env-file', 'bad.env'], { AGENTD_DATA_DIR: dir })).toThrow(/^invalid AGENTD_PORT: /);
  });

  it('the server started in a directory with a .env uses it', async () => {
    const dir = tempDir('agentd-dotenv-server-');
    fs.writeFileSync(path.join(dir, '.env'), 'AGENTD_MASTER_KEY=key-from-dotenv\n');
    const server = await spawnServer({ cwd: dir, dataDir: path.join(dir, 'data'), env: { AGENTD_MASTER_KEY: '' } });
    running.push(server);
    expect((await fetch(`${server.url}/info`, { headers: { authorization: 'Bearer key-from-dotenv' } })).status).toBe(200);
    await stopAll();
    // `--env-file` also reaches the server started as `node dist/cli.js --env-file F`.
    fs.writeFileSync(path.join(dir, 'other.env'), 'AGENTD_MASTER_KEY=key-from-other\n');
    const other = await spawnServer({ cwd: dir, dataDir: path.join(dir, 'data'), env: { AGENTD_MASTER_KEY: '' }, args: ['--env-file', 'other.env'] });
    running.push(other);
    expect((await fetch(`${other.url}/info`, { headers: { authorization: 'Bearer key-from-other' } })).status).toBe(200);
  });
});

describe('parseCli', () => {
  const base = { AGENTD_DATA_DIR: '/tmp/agentd-parse' };
  const serve = (argv: string[], env: Record<string, string>) => {
    const parsed = parseCli(argv, { ...base, ...env });
    if (parsed.action !== 'serve') throw new Error('expected serve');
    return parsed.config;
  };

  it.each([
    ['AGENTD_PORT', '70000'],
    ['AGENTD_PORT', '-1'],
    ['AGENTD_PORT', '80.5'],
    ['AGENTD_LOG_LEVEL', 'loud'],
    ['AGENTD_LOG_FLUSH_MS', '-1'],
    ['AGENTD_LOG_FLUSH_MS', '2.5'],
    ['AGENTD_LOG_FLUSH_MS', '5000'],
    ['AGENTD_HISTORY_CACHE_MB', '-1'],
    ['AGENTD_HISTORY_CACHE_MB', 'lots'],
    ['AGENTD_LLM_BASE_URL', 'not a url'],
    ['OPENAI_BASE_URL', 'nope'],
    ['AGENTD_SSE_HEARTBEAT_S', '0'],
    ['AGENTD_SSE_HEARTBEAT_S', '60'],
    ['AGENTD_FSYNC', 'maybe'],
    ['AGENTD_MAX_BODY_BYTES', 'ten'],
    ['AGENTD_SECRET_KEY', 'short'],
  ])('%s=%s is refused, naming the variable', (name, value) => {
    expect(() => serve([], { [name]: value })).toThrow(ConfigError);
    expect(() => serve([], { [name]: value })).toThrow(new RegExp(`^invalid ${name}: `));
  });

  it('answers -h and -v, and refuses a bad flag value or an unknown flag', () => {
    expect(parseCli(['-h'], base)).toEqual({ action: 'help' });
    expect(parseCli(['-v'], base)).toEqual({ action: 'version' });
    expect(() => serve(['--port', 'abc'], {})).toThrow(/^invalid AGENTD_PORT: /);
    expect(() => serve(['--port'], {})).toThrow(ConfigError);
    expect(() => serve(['extra'], {})).toThrow(ConfigError);
  });

  it('applies defaults, and flags override the environment', () => {
    const defaults = serve([], {});
    expect(defaults).toMatchObject({ host: '127.0.0.1', port: 8000, dataDir: '/tmp/agentd-parse', workdirBase: '/tmp/agentd-parse/workspaces', logLevel: 'info', logFlushMs: 5, masterKeys: [], historyCacheBytes: 4 * 2 ** 20 });
    expect(serve([], { AGENTD_HISTORY_CACHE_MB: '0.5' })).toMatchObject({ historyCacheBytes: 2 ** 19 });
    const flagged = serve(['--host', '0.0.0.0', '--port', '9001', '--data-dir', '/tmp/agentd-flag'], { AGENTD_HOST: '10.0.0.1', AGENTD_PORT: '9000', AGENTD_DATA_DIR: '/tmp/agentd-env' });
    expect(flagged).toMatchObject({ host: '0.0.0.0', port: 9001, dataDir: '/tmp/agentd-flag', workdirBase: '/tmp/agentd-flag/workspaces' });
    expect(serve([], { AGENTD_WORKDIR_BASE: '/tmp/agentd-work', AGENTD_MASTER_KEY: ' a , b,' })).toMatchObject({ workdirBase: '/tmp/agentd-work', masterKeys: ['a', 'b'] });
    expect(Object.isFrozen(defaults)).toBe(true);
  });
});

describe('start-up', () => {
  it('flags override env: the server listens on --port and keeps state in --data-dir', async () => {
    const envDir = tempDir('agentd-env-dir-');
    const flagDir = tempDir('agentd-flag-dir-');
    const envPort = await freePort();
    const server = await spawnServer({ dataDir: flagDir, args: ['--host', '127.0.0.1'], env: { AGENTD_PORT: String(envPort), AGENTD_DATA_DIR: envDir, AGENTD_HOST: '192.0.2.1' } });
    running.push(server);
    expect(server.port).not.toBe(envPort);
    const created = await fetch(`${server.url}/conversations`, { method: 'POST', headers: { authorization: `Bearer ${TEST_KEY}`, 'content-type': 'application/json' }, body: '{}' });
    expect(created.status).toBe(201);
    const { id } = (await created.json()) as { id: string };
    expect(fs.existsSync(path.join(flagDir, 'conversations', id, 'conversation.json'))).toBe(true);
    expect(fs.readdirSync(envDir)).toEqual([]);
    await expect(fetch(`http://127.0.0.1:${envPort}/alive`)).rejects.toThrow();
  });

  it('without AGENTD_MASTER_KEY, says where the generated key is, and the key works', async () => {
    const dataDir = tempDir('agentd-keyfile-');
    const server = await spawnServer({ dataDir, env: { AGENTD_MASTER_KEY: '' } });
    running.push(server);
    const keyFile = path.join(dataDir, 'master.key');
    expect(server.output()).toContain(keyFile);
    const key = fs.readFileSync(keyFile, 'utf8').trim();
    expect(server.output()).not.toContain(key);
    expect((await fetch(`${server.url}/info`, { headers: { authorization: `Bearer ${key}` } })).status).toBe(200);
    expect((await fetch(`${server.url}/info`, { headers: { authorization: `Bearer ${TEST_KEY}` } })).status).toBe(401);
  });
});
