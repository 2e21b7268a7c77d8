import fs from 'node:fs';

/** The package version: injected at bundle time for the single binary, read from package.json otherwise. */
declare const AGENTD_VERSION: string | undefined;

function readVersion(): string {
  if (typeof AGENTD_VERSION === 'string') return AGENTD_VERSION;
  for (const candidate of ['../package.json', '../../package.json']) {
    try {
      const pkg = JSON.parse(fs.readFileSync(new URL(candidate, import.meta.url), 'utf8')) as { name?: string; version?: string };
      if (pkg.name === 'agentd' && pkg.version) return pkg.version;
    } catch {
      // try the next candidate
    }
  }
  return '0.0.0';
}

export const VERSION = readVersion();
