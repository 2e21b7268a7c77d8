import { readFileSync } from 'node:fs';

/**
 * Reads a tool's description from a sibling file at module load:
 * `loadDescription(import.meta.url, 'glob.md')`. The build copies `.md` files next to the
 * compiled `.js`, so this works from `src/` (vitest) and from `dist/`.
 */
export function loadDescription(moduleUrl: string, fileName: string): string {
  return readFileSync(new URL(fileName, moduleUrl), 'utf8').trim();
}
