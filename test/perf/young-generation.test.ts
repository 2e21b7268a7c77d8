/**
 * holdingYoungGeneration (around the records' loading at start-up): while it holds, what is kept
 * does not grow V8's young generation; once it returns, V8 grows it as before. Each case runs in a
 * fresh node (the built module), whose young generation has not grown yet: this test process's has.
 */
import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { describe, expect, it } from 'vitest';

const MODULE = path.resolve(import.meta.dirname, '../../dist/perf/young-generation.js');

/** Keeps 400,000 small objects (as a start-up keeps its records), held or not, then as many more after; the young generation's size (KiB) at each point. */
function run(hold: boolean): { before: number; kept: number; after: number } {
  const script = `
    import v8 from 'node:v8';
    import { holdingYoungGeneration } from ${JSON.stringify(MODULE)};
    const young = () => v8.getHeapSpaceStatistics().find((space) => space.space_name === 'new_space').space_size >> 10;
    const kept = [];
    const keep = async (tag) => { for (let i = 0; i < 400_000; i++) kept.push({ i, text: tag + i }); };
    const before = young();
    await (${hold} ? holdingYoungGeneration(() => keep('a')) : keep('a'));
    const held = young();
    await keep('b');
    process.stdout.write(JSON.stringify({ before, kept: held, after: young() }));
  `;
  const result = spawnSync(process.execPath, ['--input-type=module', '-e', script], { encoding: 'utf8' });
  expect(result.stderr).toBe('');
  return JSON.parse(result.stdout) as { before: number; kept: number; after: number };
}

describe('holdingYoungGeneration', () => {
  it('keeps the young generation at its size while what is allocated survives, and lets V8 grow it afterwards', () => {
    const free = run(false);
    // Without the hold, keeping this much grows it (from 1 MiB to V8's maximum).
    expect(free.kept).toBeGreaterThanOrEqual(8 * free.before);

    const held = run(true);
    expect(held.kept).toBeLessThan(4 * held.before);
    expect(held.after).toBeGreaterThanOrEqual(4 * held.kept);
  });
});
