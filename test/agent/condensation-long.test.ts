// A 200-turn conversation with tool outputs of random (seeded) sizes: condensation keeps every
// request under the window, happens seldom (one buys many turns), and the task list and a
// requirement stated in the first message are in every request after each condensation.
import { afterEach, describe, expect, it } from 'vitest';
import { startAgentHarness, type AgentHarness } from '../support/agent-harness.js';
import { longScript } from '../support/long-conversation.js';

let harness: AgentHarness;
afterEach(async () => harness?.close());

const TURNS = 200;
const THRESHOLD = 30_000;
/** The window the threshold stands for (condensation starts at 75 % of it). */
const WINDOW = THRESHOLD / 0.75;
const REQUIREMENT = 'Requirement: never modify the file LEGACY.txt';

describe('condensation over a long conversation', () => {
  it('keeps 200 turns under the window with few condensations, carrying the task list and the first requirement', async () => {
    harness = await startAgentHarness(longScript({ seed: 73, turns: TURNS }), { fake: { summarizer: true } });
    const id = await harness.createConversation({
      condenser: { max_tokens: THRESHOLD, keep_first: 0, keep_last: 50 },
      max_iterations_per_run: 500,
      initial_message: `Collect the numbers step by step. ${REQUIREMENT}.`,
    });
    const done = await harness.waitForStatus(id, ['idle', 'error'], 60_000);
    expect(done.status).toBe('idle');
    const events = await harness.events(id);
    expect(events.filter((event) => event.kind === 'action')).toHaveLength(TURNS - 1);
    const condensations = events.filter((event) => event.kind === 'condensation');
    // About 200 × 1,500 tokens of output: several condensations, each buying many turns.
    expect(condensations.length).toBeGreaterThanOrEqual(4);
    expect(condensations.length).toBeLessThanOrEqual(TURNS / 8);
    const agentRequests = harness.llm.requests.filter((request) => !harness.llm.summaryRequests.includes(request));
    expect(agentRequests).toHaveLength(TURNS);
    let afterFirst = 0;
    for (const request of agentRequests) {
      const text = JSON.stringify([request.body.messages, request.body.tools]);
      expect(text.length / 4).toBeLessThan(WINDOW);
      if (!text.includes('[The conversation went on for a while')) continue;
      afterFirst += 1;
      expect(text).toContain(REQUIREMENT);
      expect(text).toContain('Collect the numbers (id: collect, in_progress)');
    }
    expect(afterFirst).toBeGreaterThan(TURNS / 2);
    for (const event of condensations) expect(event.tokens_after).toBeLessThan(THRESHOLD * 0.75);
    expect(harness.llm.violations).toEqual([]);
  }, 60_000);
});
