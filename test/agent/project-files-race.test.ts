/**
 * Issue 71, finding 1: the agent links CLAUDE.md to `d/secret.key` and, from a background job in
 * its sandbox, swaps `d` with a symlink to the data dir (a decoy here) in a tight loop with
 * renameat2(RENAME_EXCHANGE). Every run start reads the project's instructions into the system
 * prompt; whatever the timing, the decoy's secret never reaches the LLM, and nothing outside
 * the workdir changes.
 */
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startAgentHarness, type AgentHarness } from '../support/agent-harness.js';
import { tempDir } from '../support/agentd.js';
import { ownedSnapshot, PYTHON, RACER } from '../support/rename-race.js';

const available = fs.existsSync(PYTHON);
if (!available) console.warn('test/agent/project-files-race.test.ts: skipped (/usr/bin/python3, which performs the renameat2 swaps in the sandbox, is not installed)');

const DECOY_SECRET = 'DECOY-DATA-DIR-SECRET-KEY';
const INSIDE_TEXT = 'Inside instructions: use tabs.';
const RUNS = 40;

let harness: AgentHarness;
let base: string;
let workdir: string;
let decoy: string;

beforeAll(async () => {
  base = fs.realpathSync(tempDir());
  workdir = path.join(base, 'work');
  decoy = path.join(base, 'decoy-data-dir');
  fs.mkdirSync(path.join(workdir, 'd'), { recursive: true });
  fs.mkdirSync(decoy);
  fs.writeFileSync(path.join(decoy, 'secret.key'), DECOY_SECRET);
  fs.writeFileSync(path.join(workdir, 'd', 'secret.key'), INSIDE_TEXT);
  fs.symlinkSync('d/secret.key', path.join(workdir, 'CLAUDE.md'));
  fs.symlinkSync(decoy, path.join(workdir, 'swap'));
  fs.writeFileSync(path.join(workdir, 'racer.py'), RACER);
  harness = await startAgentHarness();
});

afterAll(async () => {
  await harness?.close();
});

describe.skipIf(!available)('project instructions read while the agent swaps a directory for a link to the data dir', () => {
  it('never puts a file from outside the workdir into the system prompt', { timeout: 180_000 }, async () => {
    const decoyBefore = ownedSnapshot(decoy);
    const outsideBefore = fs.readdirSync(base).sort();
    // The agent starts the swapper as a background job of its shell: it keeps running between runs.
    harness.llm.push({ toolCalls: [{ name: 'bash', arguments: { command: `${PYTHON} racer.py d swap 120 >/dev/null 2>&1 &` } }] });
    harness.llm.push({ text: 'racing' });
    const id = await harness.createConversation({ workdir, initial_message: 'start' });
    await harness.waitForStatus(id, ['idle', 'error'], 60_000);
    const first = harness.llm.requests.length;
    for (let run = 0; run < RUNS; run++) {
      harness.llm.push({ text: `run ${run}` });
      expect((await harness.post(`/conversations/${id}/messages`, { content: `run ${run}` })).status).toBe(202);
      await harness.waitForStatus(id, ['idle', 'error'], 30_000);
    }
    const systemPrompts = harness.llm.requests.slice(first).map((request) => JSON.stringify(request.body.messages?.[0]));
    expect(systemPrompts).toHaveLength(RUNS);
    expect(systemPrompts.filter((prompt) => prompt.includes(DECOY_SECRET))).toEqual([]);
    // The race ran: the file was read while `d` was the workdir's own directory in some runs.
    expect(systemPrompts.some((prompt) => prompt.includes(INSIDE_TEXT))).toBe(true);
    expect(ownedSnapshot(decoy)).toBe(decoyBefore);
    expect(fs.readdirSync(base).sort()).toEqual(outsideBefore);
  });
});
