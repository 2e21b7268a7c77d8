import fs from 'node:fs/promises';
import path from 'node:path';
import type { PermissionsConfig } from './permission-policy.js';

const SETTINGS_FILES = ['.claude/settings.json', '.claude/settings.local.json'];
const MAX_SETTINGS_BYTES = 256 * 1024;

/**
 * The `permissions.ask` and `permissions.deny` rules of the workdir's `.claude/settings.json`
 * (and `settings.local.json`). A missing, unreadable or malformed file adds nothing: project
 * settings can only tighten, so ignoring them never loosens anything the client set.
 */
export async function readProjectPermissions(workdir: string): Promise<PermissionsConfig> {
  const out: { ask: string[]; deny: string[] } = { ask: [], deny: [] };
  for (const file of SETTINGS_FILES) {
    const parsed = await readJson(path.join(workdir, file));
    const permissions = parsed && typeof parsed === 'object' ? (parsed as { permissions?: unknown }).permissions : undefined;
    if (!permissions || typeof permissions !== 'object') continue;
    for (const key of ['ask', 'deny'] as const) {
      const rules = (permissions as Record<string, unknown>)[key];
      if (Array.isArray(rules)) out[key].push(...rules.filter((rule): rule is string => typeof rule === 'string'));
    }
  }
  return out;
}

async function readJson(file: string): Promise<unknown> {
  try {
    const handle = await fs.open(file, fs.constants.O_RDONLY | fs.constants.O_NOFOLLOW);
    try {
      const stat = await handle.stat();
      if (!stat.isFile() || stat.size > MAX_SETTINGS_BYTES) return null;
      return JSON.parse(await handle.readFile('utf8'));
    } finally {
      await handle.close();
    }
  } catch {
    return null;
  }
}
