import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startServer, type TestServer } from '../support/agentd.js';
import { expectError } from '../support/expect-error.js';

let server: TestServer;
let id: string;
let workdir: string;

async function run(body: Record<string, unknown>, conversation = id): Promise<{ status: number; body: any }> {
  const response = await fetch(`${server.url}/conversations/${conversation}/commands`, {
    method: 'POST',
    headers: { ...server.auth, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  return { status: response.status, body: await response.json() };
}

beforeAll(async () => {
  process.env.AGENTD_TEST_LEAK = 'leaked-server-variable';
  server = await startServer();
  const created = await fetch(`${server.url}/conversations`, {
    method: 'POST',
    headers: { ...server.auth, 'content-type': 'application/json' },
    body: JSON.stringify({ secrets: { DEPLOY_KEY: 'deploy-key-value-42', GITHUB_TOKEN: 'ghp_testtokenvalue123' } }),
  });
  ({ id, workdir } = (await created.json()) as { id: string; workdir: string });
  fs.mkdirSync(path.join(workdir, 'sub'));
});

afterAll(async () => {
  delete process.env.AGENTD_TEST_LEAK;
  await server.close();
});

describe('POST /conversations/{id}/commands', () => {
  it('returns exit code, stdout, stderr and duration', async () => {
    const { status, body } = await run({ command: 'echo out; echo err >&2; exit 3' });
    expect(status).toBe(200);
    expect(body).toMatchObject({ exit_code: 3, stdout: 'out\n', stderr: 'err\n', timed_out: false, truncated: false });
    expect(body.execution_time_s).toBeGreaterThanOrEqual(0);
  });

  it('runs in the workdir or a cwd inside it; a cwd outside is refused', async () => {
    expect((await run({ command: 'pwd' })).body.stdout.trim()).toBe(workdir);
    expect((await run({ command: 'pwd', cwd: 'sub' })).body.stdout.trim()).toBe(path.join(workdir, 'sub'));
    // Outside means a decoy beside the workdir, never a system directory: the command would write there.
    const decoy = `${workdir}-evil`;
    fs.mkdirSync(decoy);
    const marker = 'touch cwd-was-used; pwd';
    for (const cwd of ['..', '../..', decoy, `${workdir}-evil`, '../' + path.basename(decoy), 'sub/../../x', '%2e%2e']) {
      const { status, body } = await run({ command: marker, cwd });
      expect([400, 403, 404], cwd).toContain(status);
      expect(Object.keys(body).sort(), cwd).toEqual(['details', 'error', 'message']);
    }
    fs.symlinkSync(decoy, path.join(workdir, 'escape'));
    expectError(await run({ command: marker, cwd: 'escape' }), { status: 403, error: 'path_outside_workdir', message: /^Path "escape" is not allowed: it goes through a / });
    expect(fs.readdirSync(decoy)).toEqual([]);
    expect(fs.existsSync(path.join(path.dirname(workdir), 'cwd-was-used'))).toBe(false);
    fs.rmSync(decoy, { recursive: true });
  });

  it('has the secrets in the environment, masks them, and inherits nothing of the server', async () => {
    const { body } = await run({ command: 'echo ${#DEPLOY_KEY} $DEPLOY_KEY; env' });
    expect(body.stdout).toContain('19 <secret:DEPLOY_KEY>');
    expect(body.stdout).not.toContain('deploy-key-value-42');
    expect(body.stdout).not.toContain('AGENTD_');
    expect(body.stdout).not.toContain('leaked-server-variable');
  });

  it('configures git credentials from GITHUB_TOKEN without writing the token anywhere', async () => {
    const { body } = await run({ command: "printf 'protocol=https\\nhost=github.com\\n\\n' | git credential fill" });
    expect(body.stdout).toContain('username=x-access-token');
    expect(body.stdout).toContain('password=<secret:GITHUB_TOKEN>');
    const other = await run({ command: "printf 'protocol=https\\nhost=example.com\\n\\n' | git credential fill; echo rc=$?" });
    expect(other.body.stdout).not.toContain('<secret:GITHUB_TOKEN>');
  });

  it('runs the command as written: no startup file of the workdir, no BASH_ENV, nothing open but stdin, stdout and stderr', async () => {
    // A BASH_ENV in the conversation's environment, and files the agent could have written, each ending the shell with success.
    const created = await fetch(`${server.url}/conversations`, { method: 'POST', headers: { ...server.auth, 'content-type': 'application/json' }, body: JSON.stringify({ secrets: { BASH_ENV: './.bash_env' } }) });
    const other = (await created.json()) as { id: string; workdir: string };
    for (const name of ['.bashrc', '.bash_profile', '.profile', '.bash_env']) fs.writeFileSync(path.join(other.workdir, name), `echo "ran ${name}"; exit 0\n`);
    // The listing by a child, written to a file: a command substitution would hold a pipe open in the shell listed.
    const { status, body } = await run({ command: 'bash -c "echo nested bash ran"; ls /proc/$$/fd > open-fds.txt; exit 3' }, other.id);
    expect(status).toBe(200);
    expect(body).toMatchObject({ exit_code: 3, stdout: 'nested bash ran\n', stderr: '' });
    expect(fs.readFileSync(path.join(other.workdir, 'open-fds.txt'), 'utf8').split('\n').filter(Boolean)).toEqual(['0', '1', '2']);
  });

  it('caps huge output with a truncation flag', async () => {
    const { body } = await run({ command: 'yes abcdefghij | head -c 2000000' });
    expect(body.truncated).toBe(true);
    expect(body.stdout.length).toBeLessThan(150_000);
    expect(body.stdout).toContain('characters truncated');
  });

  it('validates input and 404s an unknown conversation', async () => {
    expectError(await run({}), { status: 400, error: 'validation_error', message: /^Invalid body at command: Invalid input: expected/ });
    expectError(await run({ command: 'true', timeout_s: -1 }), { status: 400, error: 'validation_error', message: /^Invalid body at timeout_s: Too small: expected n/ });
    expectError(await run({ command: 'true' }, '00000000-0000-4000-8000-000000000000'), { status: 404, error: 'conversation_not_found', message: /^No conversation with id [0-9a-f-]+\./ });
  });
});

/**
 * The timeout's process-tree kill, with the sandbox off and on: with bubblewrap, the pid
 * namespace's end would hide a kill that reached only the direct child, so `none` is the case
 * that proves the tree kill itself. A grandchild that ignores SIGTERM appends a heartbeat to a
 * file in the workdir: the file growing proves it ran; the file no longer growing after the
 * timeout proves it is gone (not a process search that could fail silently).
 */
describe.each(['none', 'auto'] as const)('a command timeout kills the whole tree (AGENTD_SANDBOX=%s)', (sandbox) => {
  let treeServer: TestServer;
  let treeId: string;
  let treeWorkdir: string;

  beforeAll(async () => {
    treeServer = await startServer({ env: { AGENTD_SANDBOX: sandbox } });
    const created = await fetch(`${treeServer.url}/conversations`, { method: 'POST', headers: { ...treeServer.auth, 'content-type': 'application/json' }, body: '{}' });
    ({ id: treeId, workdir: treeWorkdir } = (await created.json()) as { id: string; workdir: string });
  });
  afterAll(async () => {
    await treeServer.close();
  });

  it('even a grandchild that ignores SIGTERM', { timeout: 30_000 }, async () => {
    const beats = path.join(treeWorkdir, 'beats');
    const command = `bash -c 'trap "" TERM; while :; do echo beat >> beats; sleep 0.05; done' & wait`;
    const response = await fetch(`${treeServer.url}/conversations/${treeId}/commands`, {
      method: 'POST',
      headers: { ...treeServer.auth, 'content-type': 'application/json' },
      body: JSON.stringify({ command, timeout_s: 1 }),
    });
    const body = (await response.json()) as { timed_out: boolean; exit_code: number | null };
    expect(body).toMatchObject({ timed_out: true, exit_code: null });
    // It existed: a second of heartbeats.
    expect(fs.readFileSync(beats, 'utf8').split('\n').length).toBeGreaterThan(3);
    // It is gone: after a moment to settle, no heartbeat for 20 of its periods.
    await new Promise((resolve) => setTimeout(resolve, 300));
    const sizeAfter = fs.statSync(beats).size;
    await new Promise((resolve) => setTimeout(resolve, 1000));
    expect(fs.statSync(beats).size).toBe(sizeAfter);
  });
});
