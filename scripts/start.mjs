// `npm start`: installs dependencies and builds when needed, then runs the server.
// Extra arguments pass through: `npm start -- --port 9000`.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';

const root = path.resolve(path.dirname(new URL(import.meta.url).pathname), '..');
const run = (command, args) => {
  const result = spawnSync(command, args, { cwd: root, stdio: 'inherit' });
  if (result.status !== 0) process.exit(result.status ?? 1);
};

const newest = (dir) => {
  let latest = 0;
  for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
    const full = path.join(dir, entry.name);
    latest = Math.max(latest, entry.isDirectory() ? newest(full) : fs.statSync(full).mtimeMs);
  }
  return latest;
};

if (!fs.existsSync(path.join(root, 'node_modules', '.package-lock.json'))) run('npm', ['ci', '--no-audit', '--no-fund']);
const entry = path.join(root, 'dist', 'cli.js');
if (!fs.existsSync(entry) || newest(path.join(root, 'src')) > fs.statSync(entry).mtimeMs) run('npm', ['run', 'build']);

const server = spawnSync(process.execPath, [entry, ...process.argv.slice(2)], { cwd: process.cwd(), stdio: 'inherit' });
process.exit(server.status ?? 0);
