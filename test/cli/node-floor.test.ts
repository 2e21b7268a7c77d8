/**
 * Issue 12, item 3: running from source on the oldest Node that package.json's `engines` names
 * (Node 20) prints no EBADENGINE warning, and the single executable's runtime suits every
 * dependency too. Each locked package's own `engines.node` must accept both.
 */
import fs from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { NODE_RUNTIME_VERSION } from '../../scripts/binary-runtime.mjs';

// semver is npm's own range parser; every toolchain here installs it (vitest, typescript-eslint…).
const semver = createRequire(import.meta.url)('semver') as {
  minVersion(range: string): { version: string } | null;
  satisfies(version: string, range: string): boolean;
};
const ROOT = path.resolve(import.meta.dirname, '../..');
const manifest = JSON.parse(fs.readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as { engines: { node: string } };
const lock = JSON.parse(fs.readFileSync(path.join(ROOT, 'package-lock.json'), 'utf8')) as {
  packages: Record<string, { engines?: { node?: string } | string[]; dev?: boolean }>;
};

function refusing(version: string): string[] {
  return Object.entries(lock.packages)
    .filter(([name, entry]) => name !== '' && entry.engines && !Array.isArray(entry.engines) && entry.engines.node)
    .filter(([, entry]) => !semver.satisfies(version, (entry.engines as { node: string }).node))
    .map(([name, entry]) => `${name} wants node ${(entry.engines as { node: string }).node}`);
}

describe("the supported Node versions (package.json's engines)", () => {
  const floor = semver.minVersion(manifest.engines.node)!.version;

  it('the floor is Node 20, the lock file agrees, and the node running the tests is supported', () => {
    expect(floor).toMatch(/^20\./);
    expect((lock.packages[''] as { engines?: { node?: string } }).engines?.node).toBe(manifest.engines.node);
    expect(semver.satisfies(process.versions.node, manifest.engines.node)).toBe(true);
  });

  it('every locked package accepts the floor: npm ci and npm start on it print no EBADENGINE', () => {
    expect(refusing(floor)).toEqual([]);
  });

  it(`every locked package accepts the binary's runtime (node ${NODE_RUNTIME_VERSION})`, () => {
    expect(refusing(NODE_RUNTIME_VERSION)).toEqual([]);
  });

  it("the Docker image's every stage is on the binary's LTS line, not the build machine's Node 20", () => {
    const stages = [...fs.readFileSync(path.join(ROOT, 'Dockerfile'), 'utf8').matchAll(/^FROM\s+node:(\d+)[-\w.]*/gm)].map((match) => match[1]);
    expect(stages.length).toBeGreaterThan(0);
    expect(new Set(stages)).toEqual(new Set([NODE_RUNTIME_VERSION.split('.')[0]]));
  });
});
