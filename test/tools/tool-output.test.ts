import { describe, expect, it } from 'vitest';
import { OutputWindow } from '../../src/adapters/shell/output-window.js';
import { CUT_MARKER, cutMarker, cutOutput, savedText } from '../../src/core/tools/tool-output.js';

const numbered = (count: number) => Array.from({ length: count }, (_, i) => `line ${i + 1}`).join('\n') + '\n';

describe('cutOutput', () => {
  it('leaves an output that fits alone', () => {
    expect(cutOutput('short\n', undefined, 100)).toBeNull();
  });

  it('cuts on line boundaries and counts the lines it cut', () => {
    const text = numbered(20_000);
    const cut = cutOutput(text, undefined, 30_000)!;
    const headLines = cut.head.split('\n').slice(0, -1);
    const tailLines = cut.tail.split('\n').slice(0, -1);
    expect(cut.head.endsWith('\n')).toBe(true);
    expect(headLines.at(-1)).toBe(`line ${headLines.length}`);
    expect(tailLines[0]).toBe(`line ${20_000 - tailLines.length + 1}`);
    expect(cut).toMatchObject({ from: { line: headLines.length + 1, character: null }, to: { line: 20_000 - tailLines.length, character: null }, lines: 20_000 });
    expect(cut.head.length).toBeLessThanOrEqual(15_000);
    expect(cut.tail.length).toBeLessThanOrEqual(15_000);
    expect(cutMarker(cut, 'full output in F')).toBe(`[lines ${(headLines.length + 1).toLocaleString('en-US')}-${(20_000 - tailLines.length).toLocaleString('en-US')} of 20,000 cut; full output in F]`);
  });

  it('cuts a single huge line by characters, and says so', () => {
    const text = 'x'.repeat(1_000_000);
    const cut = cutOutput(text, undefined, 30_000)!;
    expect(cut.head).toBe('x'.repeat(15_000));
    expect(cut.tail).toBe('x'.repeat(15_000));
    expect(cutMarker(cut, 'full output in F')).toBe('[characters 15,001-985,000 of line 1 (of 1) cut: the line is too long to show whole; full output in F]');
  });

  it('cuts inside a long line between short ones, naming where the cut starts and ends', () => {
    const text = `first\n${'y'.repeat(100_000)}\nlast\n`;
    const cut = cutOutput(text, undefined, 1000)!;
    expect(cut.head).toBe(text.slice(0, 500));
    expect(cut.tail).toBe(text.slice(text.length - 500));
    expect(cut.from).toEqual({ line: 2, character: 500 - 6 + 1 });
    expect(cutMarker(cut, 'W')).toBe('[characters 495-99,506 of line 2 (of 3) cut: the line is too long to show whole; W]');
  });

  it('counts the lines and columns of a stretch its producer could not hold', () => {
    const window = new OutputWindow(2000);
    const whole = numbered(5_000);
    for (let at = 0; at < whole.length; at += 777) window.append(whole.slice(at, at + 777));
    const held = window.take();
    expect(held.text.length).toBe(2000);
    expect(held.omitted).toMatchObject({ at: 1000, chars: whole.length - 2000 });
    expect(held.text).toBe(whole.slice(0, 1000) + whole.slice(whole.length - 1000));
    const cut = cutOutput(held.text, held.omitted, 30_000)!;
    const headLines = cut.head.split('\n').length - 1;
    const tailLines = cut.tail.split('\n').length - 1;
    expect(cut).toMatchObject({ from: { line: headLines + 1, character: null }, to: { line: 5_000 - tailLines, character: null }, lines: 5_000 });
    expect(whole.startsWith(cut.head) && whole.endsWith(cut.tail)).toBe(true);
    const saved = savedText(held);
    expect(saved.startsWith(whole.slice(0, 1000))).toBe(true);
    expect(saved).toContain(`[${(whole.length - 2000).toLocaleString('en-US')} characters`);
  });

  it('a held stretch that ends inside a line gives that line and column', () => {
    const window = new OutputWindow(20);
    window.append(`aaaaaaaaaa\n${'b'.repeat(50)}`);
    const held = window.take();
    expect(held.omitted).toEqual({ at: 10, chars: 41, newlines: 1, column: 40 });
    const cut = cutOutput(held.text, held.omitted, 30_000)!;
    expect(cut.to).toEqual({ line: 2, character: 40 });
  });

  it('every marker it writes is one the secret masker finds', () => {
    const markers = [
      cutMarker(cutOutput(numbered(20_000), undefined, 30_000)!, 'full output in .agentd/outputs/bash-1.txt'),
      cutMarker(cutOutput('x'.repeat(100_000), undefined, 1000)!, 'W'),
      cutMarker(cutOutput(`first\n${'y'.repeat(100_000)}\nlast`, undefined, 1000)!, 'W'),
      cutMarker(cutOutput(`${'y'.repeat(100_000)}\nlast\n`, undefined, 1000)!, 'W'),
    ];
    for (const marker of markers) expect(`head\n${marker}\ntail`.split(CUT_MARKER)).toHaveLength(3);
  });
});
