/**
 * Issue: masking ran after truncation, so a secret cut at the truncation boundary leaked its
 * prefix (the head of the output ended with its first characters) or its suffix (the tail began
 * with its last ones): in the commands API and in the bash tool's observation.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { startAgentHarness, type AgentHarness } from '../support/agent-harness.js';

const TOKEN = 'Tk9-secret-value-0123456789-zz';
let harness: AgentHarness | undefined;

afterEach(async () => {
  await harness?.close();
  harness = undefined;
});

/** `before` filler characters, the secret, then `after` filler: the cut falls inside the secret. */
const straddling = (before: number, after: number) => `printf '%*s' ${before} '' | tr ' ' a; printf '%s' "$TOKEN"; printf '%*s' ${after} '' | tr ' ' b`;

function expectNoPiece(text: string, marker: RegExp): void {
  expect(text).toMatch(marker);
  for (let length = 4; length < TOKEN.length; length++) {
    expect(text, `first ${length} characters`).not.toContain(TOKEN.slice(0, length));
    expect(text, `last ${length} characters`).not.toContain(TOKEN.slice(TOKEN.length - length));
  }
  expect(text).toContain('<secret:TOKEN>');
}

describe('a secret cut by truncation leaks no piece of itself', () => {
  it('in the commands API: cut at the end of the head and at the start of the tail', async () => {
    harness = await startAgentHarness();
    const id = await harness.createConversation({ secrets: { TOKEN } });
    // The commands API keeps 50,000 characters at each end of 100,000.
    for (const command of [straddling(50_000 - 7, 80_000), straddling(80_000, 50_000 - 7)]) {
      const { status, body } = await harness.post(`/conversations/${id}/commands`, { command });
      expect(status).toBe(200);
      expect(body.truncated).toBe(true);
      expectNoPiece(body.stdout, /\[\.\.\. \d+ characters truncated \.\.\.\]/);
    }
  });

  it("in the bash tool's observation, as stored and as the LLM saw it", async () => {
    harness = await startAgentHarness([
      { toolCalls: [{ name: 'bash', arguments: { command: straddling(15_000 - 7, 40_000) } }] },
      { toolCalls: [{ name: 'bash', arguments: { command: straddling(40_000, 15_000 - 7) } }] },
      { text: 'done' },
    ]);
    const id = await harness.createConversation({ secrets: { TOKEN }, initial_message: 'print it' });
    await harness.waitForStatus(id, ['idle', 'finished']);
    const observations = (await harness.get(`/conversations/${id}/events?kind=observation`)).body.items;
    expect(observations).toHaveLength(2);
    for (const observation of observations) expectNoPiece(observation.content, /\n\[characters [\d,]+-[\d,]+ of line 1 \(of 1\) cut: /);
    const seen = JSON.stringify(harness.llm.requests.map((request) => request.body));
    for (let length = 4; length < TOKEN.length; length++) expect(seen).not.toContain(TOKEN.slice(0, length));
  });

  it('in malformed arguments shown back to the model, cut at either end of what is shown', async () => {
    // The first and last 1,000 characters of the raw text are shown: the value straddles each cut.
    const opening = '{"command": "';
    harness = await startAgentHarness([
      { toolCalls: [{ name: 'bash', arguments: `${opening}${'a'.repeat(1000 - opening.length - 7)}${TOKEN}${'b'.repeat(3000)}` }] },
      { toolCalls: [{ name: 'bash', arguments: `${opening}${'a'.repeat(3000)}${TOKEN}${'b'.repeat(1000 - 7)}` }] },
      { text: 'done' },
    ]);
    const id = await harness.createConversation({ secrets: { TOKEN }, initial_message: 'send it' });
    await harness.waitForStatus(id, ['idle', 'finished']);
    const observations = (await harness.get(`/conversations/${id}/events?kind=observation`)).body.items;
    expect(observations).toHaveLength(2);
    for (const observation of observations) expectNoPiece(observation.content, /\n\[characters 1,001-[\d,]+ of line 1 \(of 1\) cut: /);
    const seen = JSON.stringify(harness.llm.requests.slice(1).map((request) => request.body));
    for (let length = 4; length < TOKEN.length; length++) expect(seen).not.toContain(TOKEN.slice(0, length));
  });
});
