import { execFileSync } from 'node:child_process';

/** Whether any process's command line matches the pattern (pgrep -f). */
export function processAlive(pattern: string): boolean {
  try {
    execFileSync('pgrep', ['-f', pattern]);
    return true;
  } catch {
    return false;
  }
}
