// `npm start`: installs dependencies and builds when needed, then runs the server.
// Extra arguments pass through: `npm start -- --port 9000`.
import { spawn } from 'node:child_process';
import path from 'node:path';
import { SERVER_NODE_FLAGS } from './perf/server-node-flags.mjs';
import { prepare, root } from './prepare.mjs';

/**
 * glibc's malloc returns freed blocks of 128 KiB and more to the system at once (mmap) instead of
 * raising that threshold as it sees them freed and keeping them in its heap: less RSS for a busy
 * server, and less growth over a long soak (docs/operations.md, "Memory"). The Dockerfile
 * sets the same; a GLIBC_TUNABLES of the caller's wins. Ignored where the C library is not glibc.
 */
const GLIBC_TUNABLES = 'glibc.malloc.mmap_threshold=131072';

prepare();
const server = spawn(process.execPath, [...SERVER_NODE_FLAGS, path.join(root, 'dist', 'cli.js'), ...process.argv.slice(2)], { stdio: 'inherit', env: { ...process.env, GLIBC_TUNABLES: process.env.GLIBC_TUNABLES ?? GLIBC_TUNABLES } });
// Ctrl-C reaches the server directly (same process group): only wait for it to stop.
process.on('SIGINT', () => {});
process.on('SIGTERM', () => server.kill('SIGTERM'));
server.on('exit', (code, signal) => process.exit(code ?? (signal ? 1 : 0)));
