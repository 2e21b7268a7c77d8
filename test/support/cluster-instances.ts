/**
 * What the multi-instance tests share: agentd processes on one PostgreSQL database (NATS when the
 * test has one), each announcing its own loopback URL, all with one secret key and one workdir
 * base standing in for the shared volume; a JSON request with a bounded wait; and a probe that
 * retries until it yields a value.
 */
import { freePort, spawnServer, TEST_KEY, type SpawnedServer } from './agentd.js';

export interface ClusterOptions {
  databaseUrl: string;
  natsUrl?: string | undefined;
  workdirs: string;
  leaseTtlS: number;
}

export interface InstanceOptions {
  dataDir: string;
  port?: number;
  env?: Record<string, string>;
  healthyWithinMs?: number;
}

/** Starts one instance of the cluster (on `port` when a restart must keep its address). */
export async function startInstance(cluster: ClusterOptions, options: InstanceOptions): Promise<SpawnedServer> {
  const port = options.port ?? (await freePort());
  return spawnServer({
    dataDir: options.dataDir,
    port,
    ...(options.healthyWithinMs !== undefined && { healthyWithinMs: options.healthyWithinMs }),
    env: {
      AGENTD_DATABASE_URL: cluster.databaseUrl,
      ...(cluster.natsUrl && { AGENTD_NATS_URL: cluster.natsUrl }),
      AGENTD_SECRET_KEY: 'one-key-for-every-instance',
      AGENTD_WORKDIR_BASE: cluster.workdirs,
      AGENTD_INSTANCE_URL: `http://127.0.0.1:${port}`,
      AGENTD_LEASE_TTL_S: String(cluster.leaseTtlS),
      ...options.env,
    },
  });
}

export const clusterHeaders = { authorization: `Bearer ${TEST_KEY}`, 'content-type': 'application/json' };

export interface ClusterAnswer {
  status: number;
  text: string;
  /** The parsed JSON, or null for an empty or non-JSON body (a file's bytes). */
  body: any;
  headers: Headers;
  ms: number;
}

/** One request with the test key, abandoned after `timeoutMs` (a stopped instance never answers). */
export async function clusterRequest(base: string, path: string, init: RequestInit = {}, timeoutMs = 30_000): Promise<ClusterAnswer> {
  const started = Date.now();
  const response = await fetch(`${base}${path}`, { ...init, headers: clusterHeaders, signal: AbortSignal.timeout(timeoutMs) });
  const text = await response.text();
  let body: unknown = null;
  try {
    body = text ? JSON.parse(text) : null;
  } catch {
    // not JSON: a file's bytes
  }
  return { status: response.status, text, body, headers: response.headers, ms: Date.now() - started };
}

/** Calls `probe` every 50 ms (a throw counts as not yet) until it yields a value. */
export async function eventually<T>(what: string, timeoutMs: number, probe: () => Promise<T | undefined | false>): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe().catch(() => undefined);
    if (value) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}
