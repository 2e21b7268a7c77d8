import fs from 'node:fs';
import path from 'node:path';
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

/**
 * The server's keys: the master keys from the environment, or else one kept in `<dataDir>/master.key`;
 * the secrets' encryption key from the environment, or else `<dataDir>/secret.key`.
 */
export function loadServerKeys(options: { dataDir: string; masterKeys: readonly string[]; secretKey: string | null }): {
  masterKeys: readonly string[];
  masterKeyFile: string | null;
  masterKeyCreated: boolean;
  secretKeyText: string;
} {
  let masterKeys = options.masterKeys;
  let masterKeyFile: string | null = null;
  let masterKeyCreated = false;
  if (masterKeys.length === 0) {
    masterKeyFile = path.join(options.dataDir, 'master.key');
    const { key, created } = loadOrCreateKeyFile(masterKeyFile);
    masterKeys = [key];
    masterKeyCreated = created;
  }
  const secretKeyText = options.secretKey ?? loadOrCreateKeyFile(path.join(options.dataDir, 'secret.key')).key;
  return { masterKeys, masterKeyFile, masterKeyCreated, secretKeyText };
}
