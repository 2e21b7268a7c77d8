import fs from 'node:fs';
import { randomBytes } from 'node:crypto';

/**
 * A key kept in a file of its own with mode 0600: read when it exists, otherwise generated
 * (32 random bytes, base64url) and written exclusively, so two starts never race to different keys.
 */
export function loadOrCreateKeyFile(file: string): { key: string; created: boolean } {
  try {
    const key = fs.readFileSync(file, 'utf8').trim();
    if (key.length > 0) return { key, created: false };
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
  }
  const key = randomBytes(32).toString('base64url');
  try {
    fs.writeFileSync(file, `${key}\n`, { mode: 0o600, flag: 'wx' });
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'EEXIST') return loadOrCreateKeyFile(file);
    throw error;
  }
  return { key, created: true };
}
