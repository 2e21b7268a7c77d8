/**
 * Issue 71 #10: a secret value used as a file name came back unmasked in `/changes` paths,
 * `/checkpoints` and the runs' `files_changed`, while events showed it as `<secret:NAME>`. The
 * agent names its files from the secret in its environment, as any agent with a shell can.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { startAgentHarness, type AgentHarness } from '../support/agent-harness.js';

let harness: AgentHarness | undefined;
afterEach(async () => {
  await harness?.close();
  harness = undefined;
});

const VALUE = 'tok-file-name-5d21c9e7';
const MASKED = ['<secret:API_TOKEN>.txt', 'd-<secret:API_TOKEN>/inner.txt'];
const sorted = (paths: string[]) => [...paths].sort();

describe('a secret in a file name', () => {
  it('is masked in /changes, /checkpoints and the run records, as in the events', { timeout: 60_000 }, async () => {
    harness = await startAgentHarness([
      { toolCalls: [{ name: 'bash', arguments: { command: 'mkdir -p "d-$API_TOKEN" && echo leaked > "$API_TOKEN.txt" && echo more > "d-$API_TOKEN/inner.txt"' } }] },
      { text: 'done' },
    ]);
    const id = await harness.createConversation({ secrets: { API_TOKEN: VALUE }, initial_message: 'name files after the token' });
    await harness.waitForStatus(id, ['idle'], 45_000);
    const observation = (await harness.events(id)).find((event) => event.kind === 'observation');
    expect(observation, 'the bash call ran').toMatchObject({ is_error: false });

    const changes = (await harness.get(`/conversations/${id}/changes`)).body;
    expect(changes.items.map((change: any) => [change.path, change.status]).sort()).toEqual([
      ['<secret:API_TOKEN>.txt', 'added'],
      ['d-<secret:API_TOKEN>/inner.txt', 'added'],
    ]);
    const checkpoints = (await harness.get(`/conversations/${id}/checkpoints`)).body;
    expect(sorted(checkpoints.items.at(-1).files_changed)).toEqual(MASKED);
    const runs = (await harness.get(`/conversations/${id}/runs`)).body;
    expect(sorted(runs.items[0].files_changed)).toEqual(MASKED);
    const run = (await harness.get(`/conversations/${id}/runs/${runs.items[0].id}`)).body;
    expect(sorted(run.files_changed)).toEqual(MASKED);
    // Nowhere in any of these answers, diffs included.
    for (const body of [changes, checkpoints, runs, run]) expect(JSON.stringify(body)).not.toContain(VALUE);
  });
});
