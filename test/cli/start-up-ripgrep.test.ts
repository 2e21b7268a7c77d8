// Start-up spawns no look for ripgrep: grep chooses its searcher at its first search (the warm-up
// of `agentd serve` makes that look early, after listening). Here `rg` on PATH is the test's own,
// which leaves a mark when it runs and then never ends: a start-up that waited for it would never
// finish, and one that spawned it would leave the mark.
import fs from 'node:fs';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { startServer, tempDir } from '../support/agentd.js';

const pathBefore = process.env.PATH;
afterEach(() => {
  process.env.PATH = pathBefore;
});

describe('start-up', () => {
  it("neither spawns nor waits for grep's look for ripgrep", { timeout: 60_000 }, async () => {
    const root = tempDir('agentd-start-rg-');
    const bin = path.join(root, 'bin');
    const mark = path.join(root, 'rg-ran');
    fs.mkdirSync(bin);
    fs.writeFileSync(path.join(bin, 'rg'), `#!/bin/sh\n: > '${mark}'\nexec sleep 60\n`, { mode: 0o755 });
    process.env.PATH = `${bin}:${pathBefore}`;

    const server = await startServer({ dataDir: path.join(root, 'data'), listen: false });
    try {
      const health = await server.app.inject({ method: 'GET', url: '/health' });
      expect(health.statusCode).toBe(200);
      expect(fs.existsSync(mark), 'rg ran during start-up').toBe(false);
    } finally {
      await server.close();
      fs.rmSync(root, { recursive: true, force: true });
    }
  });
});
