import { readAsset } from '../../assets.js';

/**
 * Reads a tool's description from a sibling file at module load:
 * `loadDescription(import.meta.url, 'glob.md')`. The build copies `.md` files next to the
 * compiled `.js`, so this works from `src/` (vitest) and from `dist/`; the single executable
 * carries them as assets (see `readAsset`).
 */
export function loadDescription(moduleUrl: string, fileName: string): string {
  return readAsset(moduleUrl, fileName).trim();
}
