/**
 * Servers a test starts outside its own process tree (pg_ctl daemonizes PostgreSQL; a spawned
 * nats-server outlives a killed parent) must not outlive the test: a tiny detached shell waits
 * for this test process to end, however it ends (kill -9 included), then runs `cleanup`, which
 * stops the server and removes its temp dir. A clean stop cancels the watchdog first.
 */
import { spawn } from 'node:child_process';

export interface Watchdog {
  cancel(): void;
}

export function quote(text: string): string {
  return `'${text.replaceAll("'", "'\\''")}'`;
}

export function watchdog(cleanup: string): Watchdog {
  const child = spawn('sh', ['-c', `while kill -0 ${process.pid} 2>/dev/null; do sleep 0.5; done; ${cleanup}`], { detached: true, stdio: 'ignore' });
  child.unref();
  return {
    cancel() {
      if (child.exitCode === null && child.pid !== undefined) {
        try {
          process.kill(child.pid, 'SIGKILL');
        } catch {
          // already gone
        }
      }
    },
  };
}
