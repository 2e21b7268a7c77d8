import { spawn } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { commandLineOf } from '../support/processes.js';

// The tests' looks at /proc (support/processes.ts) decide whether a shell is there or gone: a look
// that took a process between two programs for one that matches nothing made a CI run fail.
describe('a look at a process command line', () => {
  it('never finds a process that execs through a chain without one', async () => {
    const marker = `agentd-lookup-${process.pid}`;
    let gaps = 0;
    for (let round = 0; round < 10; round++) {
      // Three programs in turn on one pid, each with the marker, then a sleep without it.
      const child = spawn('bash', ['-c', `exec setpriv -- env bash -c "sleep 0.1" ${marker}`, marker], { stdio: 'ignore' });
      const exited = new Promise((resolve) => child.once('exit', resolve));
      const seen: string[] = [];
      const until = Date.now() + 60;
      while (Date.now() < until) {
        const text = commandLineOf(child.pid!);
        if (text === null) break;
        const kind = text.includes(marker) ? 'marker' : text.startsWith('sleep') ? 'sleep' : 'other';
        if (seen.at(-1) !== kind) seen.push(kind);
      }
      // Once the marker is gone it does not come back: no look in between found something else.
      const first = seen.indexOf('marker');
      if (first >= 0 && seen.lastIndexOf('marker') !== first) gaps++;
      await exited;
    }
    expect(gaps).toBe(0);
  });
});
