/**
 * tickPipe (sandbox/entry-script.ts): the pipes the sandbox's scripts wait on, made in bash itself.
 * bash 5.1 and later give a here-string's text through a pipe, which becomes the pipe without a
 * process; an older bash's temporary file is not a pipe, and a process substitution makes it then.
 * Both ways must give the same thing: an empty pipe, open read-write once, that a reader waits on
 * until its last writer is gone.
 */
import { execFileSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { tickPipe } from '../../src/adapters/sandbox/entry-script.js';

/** Runs `statement` in a plain bash, then reports what it opened and how reads on it end. */
function tryPipe(statement: string): { made: boolean; kind: string; fdsAdded: number; emptyRead: number; afterLastWriter: number } {
  const script = [
    'before=(/proc/$$/fd/*)',
    `if ${statement}; then made=1; else made=0; fi`,
    'after=(/proc/$$/fd/*)',
    'kind=$(readlink "/proc/$$/fd/$t")',
    // Nothing in it and a writer left (its own read-write end): a read waits out its time.
    'read -r -t 0.05 -u "$t" _; empty=$?',
    // A read-only end of its own, the read-write one closed: no writer left, end of file at once.
    'exec {r}</dev/fd/"$t" {t}>&-',
    'read -r -t 5 -u "$r" _; last=$?',
    'echo "$made ${kind%%:*} $(( ${#after[@]} - ${#before[@]} )) $empty $last"',
  ].join('\n');
  const [made, kind, fdsAdded, emptyRead, afterLastWriter] = execFileSync('bash', ['--norc', '--noprofile', '-p', '-c', script], { encoding: 'utf8', env: { PATH: process.env.PATH ?? '/usr/bin:/bin' } }).trim().split(' ');
  return { made: made === '1', kind: kind!, fdsAdded: Number(fdsAdded), emptyRead: Number(emptyRead), afterLastWriter: Number(afterLastWriter) };
}

describe('tickPipe', () => {
  const expected = { made: true, kind: 'pipe', fdsAdded: 1, afterLastWriter: 1 };

  it('gives an empty pipe, open once, that waits until its last writer is gone', () => {
    const result = tryPipe(tickPipe('t'));
    expect(result).toMatchObject(expected);
    expect(result.emptyRead).toBeGreaterThan(128);
  });

  it('gives the same through a process substitution where the here-string is not a pipe (an older bash)', () => {
    // The statement as an older bash takes it: its `-p` test of the here-string's descriptor fails.
    const statement = tickPipe('t');
    expect(statement).toContain('[[ -p /dev/fd/');
    const result = tryPipe(statement.replace('[[ -p /dev/fd/', '[[ ! -p /dev/fd/'));
    expect(result).toMatchObject(expected);
    expect(result.emptyRead).toBeGreaterThan(128);
  });
});
