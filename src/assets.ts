import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { getAsset, isSea } from 'node:sea';

/**
 * Files the server reads at run time. From src/ (vitest) and dist/ (the build copies them) they
 * are files beside the module that reads them; in the single executable they are SEA assets
 * (scripts/build-binary.mjs): a `.md`/`.txt` file under its own name, a library's static files
 * under `<group>/<name>`, and `assets.json` listing every key.
 */
const MANIFEST = 'assets.json';

/** A text file beside a module: `readAsset(import.meta.url, 'bash.md')`. */
export function readAsset(moduleUrl: string, fileName: string): string {
  if (isSea()) return getAsset(fileName, 'utf8');
  return fs.readFileSync(new URL(fileName, moduleUrl), 'utf8');
}

const extracted = new Map<string, string>();

/**
 * In the single executable: the assets of a group written to a private temp dir (removed at
 * exit), for a library that serves files from disk. Otherwise null: the library finds its own.
 */
export function extractAssetGroup(group: string): string | null {
  if (!isSea()) return null;
  const known = extracted.get(group);
  if (known) return known;
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), `agentd-${group}-`));
  process.once('exit', () => fs.rmSync(dir, { recursive: true, force: true }));
  const keys = JSON.parse(getAsset(MANIFEST, 'utf8')) as string[];
  for (const key of keys.filter((name) => name.startsWith(`${group}/`))) {
    fs.writeFileSync(path.join(dir, key.slice(group.length + 1)), new Uint8Array(getAsset(key)));
  }
  extracted.set(group, dir);
  return dir;
}
