// `npm start`: installs dependencies and builds when needed, then runs the server.
// Extra arguments pass through: `npm start -- --port 9000`.
import { spawn } from 'node:child_process';
import path from 'node:path';
import { prepare, root } from './prepare.mjs';

prepare();
const server = spawn(process.execPath, [path.join(root, 'dist', 'cli.js'), ...process.argv.slice(2)], { stdio: 'inherit' });
// Ctrl-C reaches the server directly (same process group): only wait for it to stop.
process.on('SIGINT', () => {});
process.on('SIGTERM', () => server.kill('SIGTERM'));
server.on('exit', (code, signal) => process.exit(code ?? (signal ? 1 : 0)));
