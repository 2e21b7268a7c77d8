import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startFakeLlm, type FakeLlm } from '../fake-llm/fake-llm-server.js';
import { spawnServer, tempDir, TEST_KEY, type SpawnedServer } from '../support/agentd.js';
import { WebhookReceiver } from '../support/webhook-receiver.js';

/**
 * The examples a new user pastes, run by bash against a real server: the API tour's
 * (docs/api-tour.md, once the README's "Using the API"), in order, and the README's quick start.
 * Only what would leave this machine is swapped: the LLM (a scripted fake on 127.0.0.1), the
 * webhook URL (a receiver on 127.0.0.1), and streams get a time limit.
 */
const ROOT = path.resolve(import.meta.dirname, '../..');
const tools = ['bash', 'curl', 'jq'].filter((tool) => spawnSync('sh', ['-c', `command -v ${tool}`]).status !== 0);
/** The tour's `sh` blocks: a block removed from the page must be removed here too, never dropped unnoticed. */
const TOUR_BLOCKS = 13;
/** Answers an example may get by design: nothing to approve or answer, a run already over or still going, a history too short to condense. */
const EXPECTED_CONFLICTS = new Set(['no_pending_actions', 'run_not_active', 'run_in_progress', 'no_open_question', 'nothing_to_condense']);

let llm: FakeLlm;
let receiver: WebhookReceiver;
let server: SpawnedServer;
let cwd: string;
beforeAll(async () => {
  if (tools.length > 0) return;
  cwd = tempDir('agentd-readme-');
  llm = await startFakeLlm([]);
  receiver = await WebhookReceiver.start();
  // The MCP example's server comes from this repository's node_modules instead of the registry.
  server = await spawnServer({ dataDir: path.join(cwd, 'data'), cwd, env: { AGENTD_SANDBOX_RO_PATHS: path.join(ROOT, 'node_modules') } });
}, 30_000);
afterAll(async () => {
  server?.child.kill('SIGTERM');
  await server?.exited;
  await llm?.close();
  await receiver?.close();
});

function tourScript(): string {
  const tour = fs.readFileSync(path.join(ROOT, 'docs', 'api-tour.md'), 'utf8');
  const blocks = [...tour.matchAll(/```sh\n([\s\S]*?)```/g)].map((match) => match[1]!);
  expect(blocks).toHaveLength(TOUR_BLOCKS);
  const replaced = blocks
    .join('\n')
    .replaceAll('"api_key": "sk-..."', `"base_url": "${llm.url}", "api_key": "sk-readme"`)
    .replaceAll('https://ci.example.com/agentd', receiver.url)
    .replaceAll('"command": "npx", "args": ["-y", "@modelcontextprotocol/server-everything"]', `"command": "node", "args": ["${path.join(ROOT, 'node_modules/@modelcontextprotocol/server-everything/dist/index.js')}"]`)
    .replaceAll('curl -N ', 'curl -s -N --max-time 2 ')
    .replaceAll('S=http://localhost:8000', `S=${server.url}`);
  expect(replaced).not.toMatch(/<[a-z_]+>/); // no placeholder left for the user to fill in
  return `set -u\n${replaced}\n`;
}

describe.skipIf(tools.length > 0)("the API tour's examples", () => {
  it('run in order, verbatim but for the LLM and webhook URLs, with no unexpected error', () => {
    const result = spawnSync('bash', ['-c', tourScript()], { cwd, env: { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: cwd, AGENTD_KEY: TEST_KEY }, encoding: 'utf8', timeout: 120_000 });
    expect(result.status, result.stderr).toBe(0);
    expect(result.stderr).toBe('');
    const codes = [...result.stdout.matchAll(/"error":"([a-z_]+)"/g)].map((match) => match[1]!);
    expect(codes.filter((code) => !EXPECTED_CONFLICTS.has(code)), result.stdout.slice(0, 4000)).toEqual([]);
    // What the examples claim: the command ran in the directory they made, the file came back.
    expect(result.stdout).toMatch(/"exit_code":0,"stdout":"[^"]*\/app\\napp\\nsrc\\n"/);
    expect(fs.readFileSync(path.join(cwd, 'main-copy.py'), 'utf8')).toBe('print("hello")\n');
    expect(result.stdout).toContain('{"names":["GITHUB_TOKEN","NPM_TOKEN"]}');
    expect(llm.violations).toEqual([]);
  }, 150_000);
});

function runBash(script: string, options: { cwd: string; env: Record<string, string> }): Promise<{ status: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn('bash', ['-c', script], { ...options, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk) => (stdout += chunk));
    child.stderr.on('data', (chunk) => (stderr += chunk));
    child.on('error', reject);
    child.on('close', (status) => resolve({ status, stdout, stderr }));
  });
}

/**
 * The README's quick start once `npm start` runs with a model: the key generated into ~/.agentd,
 * `/info`, and a first conversation on the server's default LLM whose events stream in.
 */
describe.skipIf(tools.length > 0)("the README's quick start", () => {
  it('reads the generated key, and a first conversation runs on the default LLM while its events stream', async () => {
    const home = tempDir('agentd-readme-home-');
    const quick = await spawnServer({ dataDir: path.join(home, '.agentd'), cwd: home, env: { AGENTD_MASTER_KEY: '', AGENTD_LLM_MODEL: 'gpt-5-mini', OPENAI_API_KEY: 'sk-readme', AGENTD_LLM_BASE_URL: llm.url } });
    try {
      llm.setScript([{ toolCalls: [{ name: 'file_editor', arguments: { command: 'create', path: 'haiku.txt', file_text: 'servers hum at night\n' } }] }, { text: 'The haiku is in haiku.txt.' }]);
      const readme = fs.readFileSync(path.join(ROOT, 'README.md'), 'utf8');
      const start = readme.indexOf('## Quick start');
      const section = readme.slice(start, readme.indexOf('\n## ', start + 5));
      // The blocks that talk to the running server (the others start it: `npm start`, `npm test`).
      const blocks = [...section.matchAll(/```sh\n([\s\S]*?)```/g)].map((match) => match[1]!).filter((block) => block.includes('curl'));
      expect(blocks).toHaveLength(2);
      const script = blocks.join('\n').replaceAll('localhost:8000', quick.url.replace('http://', '')).replaceAll('curl -N ', 'curl -s -N --max-time 5 ');
      // Asynchronously: the fake LLM answers from this process, which spawnSync would block.
      const result = await runBash(`set -u\n${script}`, { cwd: home, env: { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: home } });
      expect(result.stderr).toBe('');
      expect(result.status, 'the stream is cut by its time limit, nothing else fails').toBe(28);
      expect(result.stdout).toMatch(/^\{"name":"agentd","version":/);
      expect(result.stdout).toContain('event: action');
      expect(result.stdout).toContain('The haiku is in haiku.txt.');
      const workspaces = path.join(home, '.agentd', 'workspaces');
      expect(fs.readdirSync(workspaces).filter((name) => fs.existsSync(path.join(workspaces, name, 'haiku.txt')))).toHaveLength(1);
      expect(llm.violations).toEqual([]);
    } finally {
      quick.child.kill('SIGTERM');
      await quick.exited;
      fs.rmSync(home, { recursive: true, force: true });
    }
  }, 90_000);
});
