import type { ProjectFiles } from '../workspace/project-files.js';
import type { PermissionsConfig } from './permission-policy.js';

const SETTINGS_FILES = ['.claude/settings.json', '.claude/settings.local.json'];
const MAX_SETTINGS_BYTES = 256 * 1024;

/**
 * The `permissions.ask` and `permissions.deny` rules of the workdir's `.claude/settings.json`
 * (and `settings.local.json`). A missing, unreadable or malformed file adds nothing: project
 * settings can only tighten, so ignoring them never loosens anything the client set.
 */
export async function readProjectPermissions(projectFiles: ProjectFiles, workdir: string): Promise<PermissionsConfig> {
  const out: { ask: string[]; deny: string[] } = { ask: [], deny: [] };
  for (const name of SETTINGS_FILES) {
    const parsed = await readJson(projectFiles, workdir, name);
    const permissions = parsed && typeof parsed === 'object' ? (parsed as { permissions?: unknown }).permissions : undefined;
    if (!permissions || typeof permissions !== 'object') continue;
    for (const key of ['ask', 'deny'] as const) {
      const rules = (permissions as Record<string, unknown>)[key];
      if (Array.isArray(rules)) out[key].push(...rules.filter((rule): rule is string => typeof rule === 'string'));
    }
  }
  return out;
}

async function readJson(projectFiles: ProjectFiles, dir: string, name: string): Promise<unknown> {
  const read = await projectFiles.read({ dir, name, maxBytes: MAX_SETTINGS_BYTES, oversize: 'refuse', symlinks: 'never' });
  if (read.kind !== 'text') return null;
  try {
    return JSON.parse(read.text);
  } catch {
    return null;
  }
}
