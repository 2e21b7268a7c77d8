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

/** In the single executable: an asset's bytes, by its key (`<group>/<name>` for a library's static files). */
export function readAssetBytes(key: string): Buffer {
  return Buffer.from(getAsset(key));
}

/** A group of assets written to a private temp dir when first needed (see assetGroupDir). */
export interface AssetGroupDir {
  /** Made (empty) at once, so that a library given it finds it; removed at exit. */
  dir: string;
  /** One file of the group, read from the executable. */
  read(name: string): Buffer;
  /** Writes the group's files into `dir`, until it once succeeds; throws what the writes threw (ENOSPC: a 507). */
  fill(): void;
}

/**
 * In the single executable: a private temp dir for the assets of a group, for a library that
 * serves files from disk, filled when they are first asked for rather than at every start (Swagger
 * UI's are megabytes that a crash would leave behind). Otherwise null: the library finds its own.
 */
export function assetGroupDir(group: string): AssetGroupDir | null {
  if (!isSea()) return null;
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), `agentd-${group}-`));
  process.once('exit', () => fs.rmSync(dir, { recursive: true, force: true }));
  let filled = false;
  return {
    dir,
    read: (name) => readAssetBytes(`${group}/${name}`),
    fill() {
      if (filled) return;
      // Made again if something cleaned the temp dir since; a write that failed (a full disk) is tried again by the next request.
      fs.mkdirSync(dir, { recursive: true });
      const keys = JSON.parse(getAsset(MANIFEST, 'utf8')) as string[];
      for (const key of keys.filter((name) => name.startsWith(`${group}/`))) {
        fs.writeFileSync(path.join(dir, key.slice(group.length + 1)), readAssetBytes(key));
      }
      filled = true;
    },
  };
}
