import { Pool } from 'undici';
import { summarize, type Summary } from './stats.js';

/**
 * Sequential GETs over one kept-alive connection, taking the paths in turn (a, b, a, b…) so that
 * drift and bursts of load elsewhere hit each alike; the latency of each path, after a warm-up.
 */
export async function timeInterleaved(options: { origin: string; paths: string[]; headers?: Record<string, string>; samples: number; warmup?: number }): Promise<Summary[]> {
  const pool = new Pool(options.origin, { connections: 1 });
  const samples = options.paths.map(() => [] as number[]);
  try {
    for (let i = -(options.warmup ?? 10); i < options.samples; i++) {
      for (const [index, path] of options.paths.entries()) {
        const started = performance.now();
        const response = await pool.request({ method: 'GET', path, ...(options.headers ? { headers: options.headers } : {}) });
        const body = await response.body.arrayBuffer();
        if (response.statusCode !== 200) throw new Error(`GET ${path}: ${response.statusCode} ${Buffer.from(body).toString()}`);
        if (i >= 0) samples[index]!.push(performance.now() - started);
      }
    }
  } finally {
    await pool.close();
  }
  return samples.map((list) => summarize(list));
}
