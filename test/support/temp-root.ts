// A setup file (vitest.config.ts): each test file's temporary files go into a directory of its
// own, made under the system's temp dir before the file's tests and removed after them, with
// whatever the servers, shells and tools it started left there. Everything that asks os.tmpdir()
// or $TMPDIR (tempDir(), mkdtemp in the tests, the programs they start) lands in it. Without it,
// each `npm test` left some 260 directories (about 300 MB) in /tmp.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll } from 'vitest';

const system = os.tmpdir();
const own = fs.mkdtempSync(path.join(system, 'agentd-vitest-'));
// Others may traverse it (a PostgreSQL run as its own user reaches its cluster's directory), not list it.
fs.chmodSync(own, 0o711);
process.env.TMPDIR = own;

afterAll(() => {
  process.env.TMPDIR = system;
  removeTree(own);
});

/** Removes the directory; a subdirectory a test made unreadable is opened up first (inside it only). */
function removeTree(dir: string): void {
  try {
    fs.rmSync(dir, { recursive: true, force: true, maxRetries: 3 });
  } catch {
    openUp(dir);
    fs.rmSync(dir, { recursive: true, force: true, maxRetries: 3 });
  }
}

function openUp(dir: string): void {
  for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
    if (!entry.isDirectory()) continue;
    const child = path.join(dir, entry.name);
    fs.chmodSync(child, 0o700);
    openUp(child);
  }
}
