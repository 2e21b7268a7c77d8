import type { FakeTurn } from '../fake-llm/fake-llm-server.js';

/** mulberry32: the same sizes on every run. */
function seeded(seed: number): () => number {
  let state = seed;
  return () => {
    state = (state + 0x6d2b79f5) | 0;
    let t = Math.imul(state ^ (state >>> 15), 1 | state);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/**
 * A long scripted conversation (the condensation test and bench P21 share it): a task list
 * first, then `turns - 2` bash calls whose outputs have random (seeded) sizes, then an answer.
 */
export function longScript(options: { seed: number; turns: number }): FakeTurn[] {
  const random = seeded(options.seed);
  const plan: FakeTurn = {
    toolCalls: [{ name: 'task_tracker', arguments: { command: 'plan', tasks: [{ id: 'collect', title: 'Collect the numbers', status: 'in_progress' }, { id: 'report', title: 'Write the report', status: 'todo' }] } }],
  };
  const steps: FakeTurn[] = [];
  for (let turn = 1; turn < options.turns - 1; turn += 1) {
    // Between 100 and 12,000 characters of output, most of them small.
    const chars = Math.floor(100 + 11_900 * random() ** 3);
    steps.push({ toolCalls: [{ name: 'bash', arguments: { command: `head -c ${chars} /dev/zero | tr '\\0' 'x' | fold -w 100; echo step-${turn}` } }] });
  }
  return [plan, ...steps, { text: 'The numbers are collected.' }];
}
