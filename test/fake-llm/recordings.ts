/**
 * Real answers recorded from real providers (test/fake-llm/recordings/, each file citing the
 * public SDK fixture it comes from), replayed by the fake LLM as they were streamed.
 *
 *   await startFakeLlm({ provider: 'deepseek', script: [replay('deepseek-tool-call', { toolCall: { name: 'bash', arguments: { command: 'ls' } } })] });
 */
import { readFileSync } from 'node:fs';
import type { FakeReplayTurn } from './fake-llm-types.js';

const DIR = new URL('./recordings/', import.meta.url);

/** The chunks of a `<name>.chunks.txt` recording: one JSON chunk a line, `#` lines are its header. */
export function recordedChunks(name: string): unknown[] {
  const text = readFileSync(new URL(`${name}.chunks.txt`, DIR), 'utf8');
  return text
    .split('\n')
    .filter((line) => line.trim() !== '' && !line.startsWith('#'))
    .map((line) => JSON.parse(line) as unknown);
}

/** The `body` of a `<name>.json` recording (an error answer). */
export function recordedBody(name: string): unknown {
  return (JSON.parse(readFileSync(new URL(`${name}.json`, DIR), 'utf8')) as { body: unknown }).body;
}

/**
 * A turn that streams a recording. `toolCall`: the recorded call made with this tool and these
 * arguments instead (the recordings call a `weather` tool agentd does not have); its id and the
 * way its pieces arrive stay as recorded.
 */
export function replay(name: string, options: { toolCall?: { name: string; arguments: Record<string, unknown> } } = {}): FakeReplayTurn {
  const chunks = recordedChunks(name);
  return { chunks: options.toolCall ? withToolCall(chunks, options.toolCall) : chunks };
}

function withToolCall(chunks: unknown[], call: { name: string; arguments: Record<string, unknown> }): unknown[] {
  let first = true;
  return chunks.map((chunk) => {
    const copy = structuredClone(chunk) as { choices?: { delta?: { tool_calls?: { id?: string; function?: { name?: string; arguments?: string } }[] } }[] };
    for (const choice of copy.choices ?? []) {
      for (const piece of choice.delta?.tool_calls ?? []) {
        if (!piece.function) continue;
        if (first && piece.id) {
          piece.function.name = call.name;
          piece.function.arguments = JSON.stringify(call.arguments);
          first = false;
        } else if (piece.function.arguments !== undefined) piece.function.arguments = '';
      }
    }
    return copy;
  });
}
