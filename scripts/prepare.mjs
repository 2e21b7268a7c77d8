// Installs dependencies when they are missing and builds when dist/ is older than src/, so that
// `npm start` and `npm test` work on a fresh clone with nothing else run first.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

function run(command, args) {
  const result = spawnSync(command, args, { cwd: root, stdio: 'inherit' });
  if (result.status !== 0) process.exit(result.status ?? 1);
}

function newest(dir) {
  let latest = 0;
  for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
    const full = path.join(dir, entry.name);
    latest = Math.max(latest, entry.isDirectory() ? newest(full) : fs.statSync(full).mtimeMs);
  }
  return latest;
}

function isLink(file) {
  try {
    return fs.lstatSync(file).isSymbolicLink();
  } catch {
    return false;
  }
}

export function prepare({ forceBuild = false } = {}) {
  const lock = path.join(root, 'package-lock.json');
  const installed = path.join(root, 'node_modules', '.package-lock.json');
  const stale = !fs.existsSync(installed) || fs.statSync(installed).mtimeMs < fs.statSync(lock).mtimeMs;
  // A node_modules that is a link to another checkout's (a git worktree sharing one install) is
  // that checkout's to install: `npm ci` here would empty it for every checkout that shares it.
  if (stale && isLink(path.join(root, 'node_modules'))) {
    console.error('prepare: node_modules is a link to another checkout\'s install; not running npm ci here');
  } else if (stale) {
    run('npm', ['ci', '--no-audit', '--no-fund']);
  }
  const entry = path.join(root, 'dist', 'cli.js');
  if (forceBuild || !fs.existsSync(entry) || newest(path.join(root, 'src')) > fs.statSync(entry).mtimeMs) {
    run('npm', ['run', 'build']);
  }
}

if (process.argv[1] === fileURLToPath(import.meta.url)) prepare({ forceBuild: process.argv.includes('--build') });
