import { describe, expect, it } from 'vitest';
import type { LlmToolSchema } from '../../src/core/agent/llm.js';
import { estimateToolTokens } from '../../src/core/agent/token-estimate.js';

const schema = (name: string, description: string): LlmToolSchema => ({ name, description, parameters: { type: 'object', properties: {} } });

describe('estimateToolTokens', () => {
  it('grows with the schemas offered, about 4 characters a token', () => {
    const small = [schema('a', 'x')];
    const large = [schema('a', 'x'), schema('b', 'y'.repeat(4000))];
    expect(estimateToolTokens([])).toBe(0);
    expect(estimateToolTokens(large) - estimateToolTokens(small)).toBeGreaterThan(1000);
  });

  it('follows a run list changed in place (an MCP server adding tools)', () => {
    const tools = [schema('bash', 'Runs a command')];
    const before = estimateToolTokens(tools);
    tools.splice(0, tools.length, schema('bash', 'Runs a command'), schema('mcp_search', 's'.repeat(400)));
    expect(estimateToolTokens(tools)).toBeGreaterThan(before + 90);
  });
});
