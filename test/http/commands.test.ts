import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startServer, tempDir, type TestServer } from '../support/agentd.js';
import { expectError } from '../support/expect-error.js';
import { killMatching } from '../support/processes.js';
import { NO_LIMITS } from '../../src/adapters/sandbox/resource-limits.js';
import { selectProcessLauncher } from '../../src/adapters/sandbox/select-process-launcher.js';
import { requestJson } from '../support/json-api.js';

let server: TestServer;
let id: string;
let workdir: string;

const run = (body: Record<string, unknown>, conversation = id) => requestJson(server, 'POST', `/conversations/${conversation}/commands`, body);

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

/** Whether bubblewrap runs here: the `bwrap` variant below needs it (`auto` falls back to none without it). */
const probeDir = tempDir('agentd-commands-probe-');
const { fallbackReason } = await selectProcessLauncher({ requested: 'auto', limits: NO_LIMITS, searchPath: process.env.PATH ?? '', hiddenPaths: [], extraReadOnlyPaths: [], stateDir: probeDir });
fs.rmSync(probeDir, { recursive: true, force: true });
if (fallbackReason) console.warn(`test/http/commands.test.ts: the AGENTD_SANDBOX=bwrap timeout variant skipped (${fallbackReason})`);

/** How long a command with a 1 s timeout may take to answer, and its tree to be gone after: generous, for a loaded machine. */
const ANSWER_BOUND_MS = 15_000;
const GONE_BOUND_MS = 10_000;
/** Heartbeats every 50 ms: this long without one means the writer is gone. */
const QUIET_MS = 1_000;

/**
 * The timeout's process-tree kill in every sandbox mode: with bubblewrap, the pid namespace's end
 * would hide a kill that reached only the direct child, so `none` is the case that proves the
 * tree kill itself. A grandchild that ignores SIGTERM appends a heartbeat to a file in the
 * workdir: the file growing proves it ran; the file no longer growing proves it is gone (not a
 * process search that could fail silently). Each wait has a bound, so a tree that outlives its
 * command fails an assertion naming it rather than the test's own time limit.
 */
describe.each(['none', 'auto', 'bwrap'] as const)('a command timeout kills the whole tree (AGENTD_SANDBOX=%s)', (sandbox) => {
  let treeServer: TestServer;
  let treeId: string;
  let treeWorkdir: string;
  const marker = `agentd-tree-${sandbox}-${process.pid}-${Date.now()}`;

  beforeAll(async () => {
    if (sandbox === 'bwrap' && fallbackReason) return;
    treeServer = await startServer({ env: { AGENTD_SANDBOX: sandbox } });
    const created = await fetch(`${treeServer.url}/conversations`, { method: 'POST', headers: { ...treeServer.auth, 'content-type': 'application/json' }, body: '{}' });
    ({ id: treeId, workdir: treeWorkdir } = (await created.json()) as { id: string; workdir: string });
  });
  afterAll(async () => {
    // A tree kill that failed leaves the heartbeat loops running: they carry this test's marker.
    killMatching(marker);
    await treeServer?.close();
  });

  /** Runs `command` with a 1 s timeout; fails if no answer comes within the bound. */
  async function runTimingOut(command: string): Promise<{ timed_out: boolean; exit_code: number | null }> {
    const response = await fetch(`${treeServer.url}/conversations/${treeId}/commands`, {
      method: 'POST',
      headers: { ...treeServer.auth, 'content-type': 'application/json' },
      body: JSON.stringify({ command, timeout_s: 1 }),
      signal: AbortSignal.timeout(ANSWER_BOUND_MS),
    }).catch((error: unknown) => error as Error);
    if (response instanceof Error) expect.fail(`no answer within ${ANSWER_BOUND_MS / 1000} s of a 1 s timeout: a process of the tree still holds the output open (${response.message})`);
    return (await response.json()) as { timed_out: boolean; exit_code: number | null };
  }

  /** Waits until `file` stops growing for QUIET_MS; fails if it still grows GONE_BOUND_MS after the answer. */
  async function expectHeartbeatsStop(file: string): Promise<void> {
    // It existed: at least a few heartbeats during the second before the timeout.
    expect(fs.readFileSync(file, 'utf8').split('\n').length).toBeGreaterThan(3);
    const deadline = Date.now() + GONE_BOUND_MS;
    let size = fs.statSync(file).size;
    let quietSince = Date.now();
    while (Date.now() - quietSince < QUIET_MS) {
      if (Date.now() > deadline) expect.fail(`${path.basename(file)} still grows ${GONE_BOUND_MS / 1000} s after the timeout: a grandchild outlived its command`);
      await new Promise((resolve) => setTimeout(resolve, 50));
      const now = fs.statSync(file).size;
      if (now !== size) [size, quietSince] = [now, Date.now()];
    }
  }

  it.skipIf(sandbox === 'bwrap' && fallbackReason !== null)('even a grandchild that ignores SIGTERM and holds the output open', { timeout: 60_000 }, async () => {
    const command = `bash -c 'trap "" TERM; while :; do echo beat >> beats; sleep 0.05; done; : ${marker}' & wait`;
    expect(await runTimingOut(command)).toMatchObject({ timed_out: true, exit_code: null });
    await expectHeartbeatsStop(path.join(treeWorkdir, 'beats'));
  });

  it.skipIf(sandbox === 'bwrap' && fallbackReason !== null)('even a grandchild that ignores SIGTERM with its output elsewhere (the answer does not wait for it)', { timeout: 60_000 }, async () => {
    const command = `bash -c 'trap "" TERM; while :; do echo beat >> quiet-beats; sleep 0.05; done; : ${marker}' >/dev/null 2>&1 & wait`;
    expect(await runTimingOut(command)).toMatchObject({ timed_out: true, exit_code: null });
    await expectHeartbeatsStop(path.join(treeWorkdir, 'quiet-beats'));
  });
});
