import { afterEach, describe, expect, it } from 'vitest';
import { startAgentHarness, type AgentHarness } from '../support/agent-harness.js';
import { expectError } from '../support/expect-error.js';

let harness: AgentHarness | undefined;
afterEach(async () => {
  await harness?.close();
  harness = undefined;
});

const SCHEMA = {
  $schema: 'https://json-schema.org/draft/2020-12/schema',
  type: 'object',
  properties: { summary: { type: 'string', minLength: 3 }, failing: { type: 'integer', minimum: 0 } },
  required: ['summary', 'failing'],
  additionalProperties: false,
};

async function lastRun(h: AgentHarness, id: string): Promise<any> {
  const runs = await h.get(`/conversations/${id}/runs?order=desc&limit=1`);
  return runs.body.items[0];
}

describe('structured output', () => {
  it('json_schema: the response format carries the schema; an invalid answer is retried once with the errors; the value is the run output', async () => {
    harness = await startAgentHarness([{ text: '{"summary": "ok"}' }, { text: '```json\n{"summary": "all green", "failing": 0}\n```' }]);
    const id = await harness.createConversation({ llm: { model: 'fake-model', base_url: harness.llm.url, api_key: 'k', structured_output: 'json_schema' } });
    const sent = await harness.post(`/conversations/${id}/messages`, { content: 'Run the tests and report', output_schema: SCHEMA });
    expect(sent.status).toBe(202);
    expect(sent.body.event.output_schema).toEqual(SCHEMA);
    await harness.waitForStatus(id, ['idle']);

    const [first, second] = harness.llm.requests;
    expect(first!.body.response_format).toEqual({ type: 'json_schema', json_schema: { name: 'final_output', schema: { type: 'object', properties: SCHEMA.properties, required: SCHEMA.required, additionalProperties: false }, strict: false } });
    expect((first!.body.tools ?? []).map((tool) => tool.function.name)).not.toContain('final_output');
    const note = second!.body.messages!.at(-1)!;
    expect(note.role).toBe('user');
    expect(String(note.content)).toContain('Your answer does not match the required output schema');
    expect(String(note.content)).toContain("must have required property 'failing'");
    expect(harness.llm.requests).toHaveLength(2);

    const run = await lastRun(harness, id);
    expect(run).toMatchObject({ status: 'completed', output: { summary: 'all green', failing: 0 } });
    expect((await harness.get(`/conversations/${id}/runs/${run.id}`)).body.output).toEqual({ summary: 'all green', failing: 0 });
    expect(harness.llm.violations).toEqual([]);

    // The next message without a schema owes nothing: its run has no output.
    harness.llm.push({ text: 'plain words' });
    await harness.post(`/conversations/${id}/messages`, { content: 'thanks' });
    await harness.waitForStatus(id, ['idle']);
    expect(harness.llm.requests.at(-1)!.body.response_format).toBeUndefined();
    expect((await lastRun(harness, id)).output).toBeUndefined();
  });

  it('tool: a final_output tool takes the schema as parameters; finish is refused, an invalid call is answered with the errors', async () => {
    harness = await startAgentHarness([
      { toolCalls: [{ name: 'finish', arguments: { message: 'done' } }] },
      { toolCalls: [{ id: 'call_out1', name: 'final_output', arguments: { summary: 'x', failing: -1 } }] },
      { toolCalls: [{ id: 'call_out2', name: 'final_output', arguments: { summary: 'two failing', failing: 2 } }] },
    ]);
    const id = await harness.createConversation();
    await harness.post(`/conversations/${id}/messages`, { content: 'Report', output_schema: SCHEMA });
    await harness.waitForStatus(id, ['idle']);
    const first = harness.llm.requests[0]!.body;
    expect(first.response_format).toBeUndefined();
    const tool = first.tools!.find((candidate) => candidate.function.name === 'final_output');
    expect(tool!.function.parameters).toEqual({ type: 'object', properties: SCHEMA.properties, required: SCHEMA.required, additionalProperties: false });

    const observations = (await harness.events(id)).filter((event) => event.kind === 'observation');
    expect(observations[0]).toMatchObject({ tool_name: 'finish', is_error: true, data: { error: 'output_required' } });
    expect(observations[1]).toMatchObject({ tool_call_id: 'call_out1', is_error: true, data: { error: 'output_invalid' } });
    expect(observations[1].content).toContain('/summary must NOT have fewer than 3 characters');
    expect(observations[1].content).toContain('/failing must be >= 0');
    expect(observations[2]).toMatchObject({ tool_call_id: 'call_out2', is_error: false });
    expect(await lastRun(harness, id)).toMatchObject({ status: 'completed', output: { summary: 'two failing', failing: 2 } });
    expect(harness.llm.violations).toEqual([]);
  });

  it('a schema that is not an object is wrapped in {value} for the tool; answers past the bound end the run in error', async () => {
    harness = await startAgentHarness([
      { toolCalls: [{ name: 'final_output', arguments: { value: 'seven' } }] },
      { text: 'seven' },
      { toolCalls: [{ name: 'final_output', arguments: { value: 'still not' } }] },
    ]);
    const id = await harness.createConversation();
    await harness.post(`/conversations/${id}/messages`, { content: 'How many?', output_schema: { type: 'integer' } });
    const failed = await harness.waitForStatus(id, ['error', 'idle']);
    expect(failed.status).toBe('error');
    expect(harness.llm.requests[0]!.body.tools!.find((tool) => tool.function.name === 'final_output')!.function.parameters).toEqual({ type: 'object', properties: { value: { type: 'integer' } }, required: ['value'], additionalProperties: false });
    const events = await harness.events(id);
    expect(events.find((event) => event.kind === 'agent_error')).toMatchObject({ error: 'llm_output_invalid' });
    expect(await lastRun(harness, id)).toMatchObject({ status: 'failed', error: { code: 'llm_output_invalid' } });
  });

  it('refuses a schema that does not compile with a 400', async () => {
    harness = await startAgentHarness([]);
    const id = await harness.createConversation();
    expectError(await harness.post(`/conversations/${id}/messages`, { content: 'x', output_schema: { type: 'no-such-type' } }), { status: 400, error: 'invalid_output_schema', message: /^output_schema is not a usable JSON Schema: / });
    expectError(await harness.post(`/conversations/${id}/messages`, { content: 'x', output_schema: 'string' }), { status: 400, error: 'validation_error', message: /output_schema/ });
  });
});
