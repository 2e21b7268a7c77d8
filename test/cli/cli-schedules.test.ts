// `agentd schedules …` against a real server, run in this process (the commands' own code, argv in, lines out).
import { afterAll, afterEach, beforeAll, expect, it, vi } from 'vitest';
import { runClientCommand } from '../../src/cli/program.js';
import { startServer, TEST_KEY, type TestServer } from '../support/agentd.js';
import { okJson } from '../support/json-api.js';

let server: TestServer;
beforeAll(async () => {
  server = await startServer();
});
afterAll(async () => server?.close());
afterEach(() => vi.restoreAllMocks());

async function cli(...args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  let stdout = '';
  let stderr = '';
  vi.spyOn(process.stdout, 'write').mockImplementation((chunk) => ((stdout += String(chunk)), true));
  vi.spyOn(process.stderr, 'write').mockImplementation((chunk) => ((stderr += String(chunk)), true));
  try {
    const code = await runClientCommand([...args, '--url', server.url, '--key', TEST_KEY]);
    return { code, stdout, stderr };
  } finally {
    vi.restoreAllMocks();
  }
}

it('lists, creates, pauses, resumes, triggers and deletes schedules', async () => {
  const conversation = await okJson(server, 'POST', '/conversations', { title: 'cli' });
  const created = await cli('schedules', 'create', '--cron', '@hourly', '--conversation', conversation.id, '--message', 'hourly check', '--json');
  expect(created.code).toBe(0);
  const schedule = JSON.parse(created.stdout);
  expect(schedule).toMatchObject({ cron: '@hourly', conversation_id: conversation.id, message: { content: 'hourly check' } });

  const listed = await cli('schedules', 'list', '--conversation', conversation.id);
  expect(listed.stdout).toContain(schedule.id);
  expect(listed.stdout).toContain('@hourly');
  expect(listed.stdout).toContain('active');

  expect(JSON.parse((await cli('schedules', 'pause', schedule.id, '--note', 'break', '--json')).stdout)).toMatchObject({ status: 'paused', status_reason: 'break' });
  expect(JSON.parse((await cli('schedules', 'resume', schedule.id, '--json')).stdout).status).toBe('active');
  const triggered = await cli('schedules', 'trigger', schedule.id);
  expect(triggered.stdout).toMatch(/failed/);
  expect((await cli('schedules', 'delete', schedule.id)).code).toBe(0);
  expect((await cli('schedules', 'list', '--conversation', conversation.id)).stderr).toContain('no schedules');
  const usage = await cli('schedules', 'create', '--cron', '@hourly', '--message', 'x');
  expect(usage.code).toBe(2);
  expect(usage.stderr).toContain('--conversation ID or --new');
});
