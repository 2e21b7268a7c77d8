/**
 * A throwaway `nats-server -js` for one test file, on a free loopback port, its JetStream store
 * in the test's own temp dir. Debian's `nats-server` package provides it (`.ci/run` installs
 * it); where it is missing, `findNatsServer()` says why and the tests skip with that one line.
 * It dies with the test process, even a killed one (see watchdog.ts).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { freePort } from './free-port.js';
import { quote, watchdog } from './watchdog.js';

export interface NatsServer {
  url: string;
  port: number;
  /** SIGKILL, as a crash would. */
  kill(): void;
  stop(): Promise<void>;
}

/** Credentials the server requires (written to a config file in its own temp dir); none: anyone may connect. */
export type NatsAuth = { user: string; password: string } | { token: string };

export function findNatsServer(): { path: string } | { missing: string } {
  for (const dir of (process.env.PATH ?? '').split(':').concat(['/usr/sbin', '/usr/bin'])) {
    const candidate = path.join(dir, 'nats-server');
    if (fs.existsSync(candidate)) return { path: candidate };
  }
  return { missing: 'nats-server is not installed (`apt-get install nats-server`)' };
}

export async function startNatsServer(binary: string, options: { auth?: NatsAuth } = {}): Promise<NatsServer> {
  const root = fs.mkdtempSync(path.join(os.tmpdir(), 'agentd-nats-'));
  const port = await freePort();
  const args = ['-js', '-a', '127.0.0.1', '-p', String(port), '-sd', root];
  if (options.auth) {
    const config = path.join(root, 'auth.conf');
    const block = 'token' in options.auth ? `token: ${JSON.stringify(options.auth.token)}` : `user: ${JSON.stringify(options.auth.user)}\n  password: ${JSON.stringify(options.auth.password)}`;
    fs.writeFileSync(config, `authorization {\n  ${block}\n}\n`, { mode: 0o600 });
    args.push('-c', config);
  }
  const child: ChildProcess = spawn(binary, args, { stdio: ['ignore', 'ignore', 'pipe'] });
  const guard = watchdog(`kill -9 ${child.pid} 2>/dev/null; rm -rf ${quote(root)}`);
  let output = '';
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`nats-server did not start within 20 s:\n${output}`)), 20_000);
    child.stderr!.on('data', (chunk: Buffer) => {
      output += chunk.toString();
      if (output.includes('Server is ready')) {
        clearTimeout(timer);
        resolve();
      }
    });
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`nats-server exited with ${code}:\n${output}`));
    });
  });
  child.stderr!.resume();
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  return {
    url: `nats://127.0.0.1:${port}`,
    port,
    kill: () => child.kill('SIGKILL'),
    async stop() {
      guard.cancel();
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
      await exited;
      fs.rmSync(root, { recursive: true, force: true });
    },
  };
}
