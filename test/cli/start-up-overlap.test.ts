// Start-up waits for child processes beside the records' load rather than after it: grep's look
// for ripgrep (`rg --version`) is spawned before the records are read. Here the load cannot end
// (a record file is a FIFO nobody writes yet) and `rg` on PATH is the test's own, which leaves a
// mark when it runs: the mark appears while the load waits.
import fs from 'node:fs';
import path from 'node:path';
import { randomUUID } from 'node:crypto';
import { execFileSync } from 'node:child_process';
import { afterEach, describe, expect, it } from 'vitest';
import { startServer, tempDir } from '../support/agentd.js';

const pathBefore = process.env.PATH;
afterEach(() => {
  process.env.PATH = pathBefore;
});

describe('start-up', () => {
  it("spawns grep's look for ripgrep before the records load, and waits for it beside them", { timeout: 60_000 }, async () => {
    const root = tempDir('agentd-overlap-');
    const dataDir = path.join(root, 'data');
    const id = randomUUID();
    const recordDir = path.join(dataDir, 'conversations', id);
    fs.mkdirSync(recordDir, { recursive: true });
    const record = path.join(recordDir, 'conversation.json');
    execFileSync('mkfifo', [record]);
    const bin = path.join(root, 'bin');
    const mark = path.join(root, 'rg-ran');
    fs.mkdirSync(bin);
    fs.writeFileSync(path.join(bin, 'rg'), `#!/bin/sh\n: > '${mark}'\necho 'ripgrep 14.1.0 (the test'"'"'s)'\n`, { mode: 0o755 });
    process.env.PATH = `${bin}:${pathBefore}`;

    const starting = startServer({ dataDir, listen: false });
    // Without the early spawn, `rg` runs only once the load has ended: never, until the FIFO is written.
    const deadline = Date.now() + 20_000;
    while (!fs.existsSync(mark) && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 10));
    const ranDuringLoad = fs.existsSync(mark);
    // The load goes on (the record is damaged: quarantined, the server starts), whatever was seen.
    const writer = await fs.promises.open(record, 'w');
    await writer.write('not a record');
    await writer.close();
    const server = await starting;
    try {
      expect(ranDuringLoad, 'rg ran while the records were loading').toBe(true);
      const health = await server.app.inject({ method: 'GET', url: '/health' });
      expect(health.json().checks.quarantined.conversations).toEqual([id]);
    } finally {
      await server.close();
      fs.rmSync(root, { recursive: true, force: true });
    }
  });
});
