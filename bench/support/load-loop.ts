import { Pool } from 'undici';
import { summarize, type Summary } from './stats.js';

export interface LoadResult {
  requests: number;
  perSecond: number;
  latency: Summary;
  errors: number;
}

/**
 * A closed-loop HTTP load generator: `connections` kept-alive connections, each sending the next
 * request as soon as the previous answer is read, for `durationMs` after `warmupMs`. Loopback only.
 * `onWindow` is called when the measured window starts and when it ends (e.g. to read the
 * server's CPU time over exactly the requests counted).
 */
export async function loadLoop(options: {
  origin: string;
  path: string;
  headers?: Record<string, string>;
  connections: number;
  durationMs: number;
  warmupMs: number;
  onWindow?: (edge: 'start' | 'end') => void;
}): Promise<LoadResult> {
  const pool = new Pool(options.origin, { connections: options.connections, pipelining: 1 });
  const latencies: number[] = [];
  let errors = 0;
  let measuring = false;
  let stopping = false;
  const worker = async () => {
    while (!stopping) {
      const started = performance.now();
      try {
        const response = await pool.request({ method: 'GET', path: options.path, ...(options.headers ? { headers: options.headers } : {}) });
        await response.body.dump();
        if (response.statusCode !== 200) errors += 1;
      } catch {
        errors += 1;
      }
      if (measuring) latencies.push(performance.now() - started);
    }
  };
  const workers = Array.from({ length: options.connections }, worker);
  await new Promise((resolve) => setTimeout(resolve, options.warmupMs));
  options.onWindow?.('start');
  measuring = true;
  errors = 0;
  const started = performance.now();
  await new Promise((resolve) => setTimeout(resolve, options.durationMs));
  measuring = false;
  const elapsedMs = performance.now() - started;
  options.onWindow?.('end');
  const requests = latencies.length;
  stopping = true;
  await Promise.all(workers);
  await pool.close();
  return { requests, perSecond: requests / (elapsedMs / 1000), latency: summarize(latencies), errors };
}
