/**
 * keepTickObjectShapes (called by `agentd serve` first thing): a full collection that runs while
 * no nextTick is queued frees the shapes V8 recorded for nextTick's queue entries, and V8 then
 * marks the sites where their keys are defined megamorphic for good (every later tick calls into
 * its runtime). With one tick object of each kind held, they stay as they were. Read off V8's own
 * feedback (`%DebugPrint`, in a child process started with --allow-natives-syntax).
 */
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';

const TICK_SHAPES = pathToFileURL(path.resolve(import.meta.dirname, '../../dist/perf/tick-shapes.js')).href;
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'agentd-tick-shapes-'));
afterAll(() => fs.rmSync(tmp, { recursive: true, force: true }));

// As `agentd serve` goes: enough ticks for V8 to record their shapes, full collections while none is queued, then ticks again.
const SCRIPT = `
if (process.argv[2] === 'keep') (await import(${JSON.stringify(TICK_SHAPES)})).keepTickObjectShapes();
for (let i = 0; i < 50; i++) await new Promise((resolve) => process.nextTick(resolve, i));
await new Promise((resolve) => setTimeout(resolve, 10));
gc();
gc();
for (let i = 0; i < 2000; i++) await new Promise((resolve) => (i % 2 ? process.nextTick(resolve) : process.nextTick(resolve, i)));
%DebugPrint(process.nextTick);
`;

/** The states of nextTick's feedback slots where the queue entry's keys are defined. */
function definitionSlots(mode: 'keep' | 'control'): string[] {
  const file = path.join(tmp, 'ticks.mjs');
  fs.writeFileSync(file, SCRIPT);
  const printed = execFileSync(process.execPath, ['--allow-natives-syntax', '--expose-gc', file, mode], { encoding: 'utf8' });
  return [...printed.matchAll(/slot #\d+ DefineKeyedOwnPropertyInLiteral (\w+)/g)].map((match) => match[1]!);
}

describe('keepTickObjectShapes', () => {
  it("keeps nextTick's queue entries on V8's fast path across full collections", (context) => {
    const control = definitionSlots('control');
    if (!control.includes('MEGAMORPHIC')) {
      // A V8 that keeps these shapes itself (or prints its feedback otherwise): nothing to compare.
      context.skip(`this Node's V8 (${process.versions.v8}) does not lose nextTick's shapes (slots: ${control.join(', ') || 'none printed'})`);
    }
    const kept = definitionSlots('keep');
    expect(kept.length).toBeGreaterThanOrEqual(2);
    expect(kept.every((state) => state === 'MONOMORPHIC')).toBe(true);
  });
});
