import type { Config } from '../../config.js';
import type { Metrics } from '../metrics/prometheus-metrics.js';
import { Ownership, type OwnershipDeps } from './ownership.js';
export type { Ownership } from './ownership.js';
export { registerForwarding } from './forwarding.js';

/**
 * Several instances: who serves each conversation (leases on the shared database), with its
 * figures on /metrics; the caller starts it (once it holds it: webhooks ask it whose each
 * conversation is while it starts). A run cut off by a dead instance (this one's previous process
 * included) is recovered by whichever takes its lease. Loaded by compose.ts only for a cluster,
 * with the cluster layer and its HTTP client.
 */
export function createOwnership(options: {
  cluster: NonNullable<Config['cluster']>;
  metrics: Metrics;
  deps: Omit<OwnershipDeps, 'instanceUrl' | 'ttlMs' | 'resumeOnFailover'>;
}): Ownership {
  const { cluster, metrics, deps } = options;
  const ownership = new Ownership({ ...deps, instanceUrl: cluster.instanceUrl, ttlMs: cluster.leaseTtlMs, resumeOnFailover: cluster.resumeOnFailover });
  const { log: pgLog, writes } = deps.pg;
  metrics.addCluster({
    leasesHeld: () => ownership.heldCount,
    instancesLive: () => ownership.instances.live(cluster.leaseTtlMs),
    takeovers: () => ownership.stats.takeovers,
    failovers: () => ownership.stats.failovers,
    leasesLost: () => ownership.stats.lost,
    forwarded: () => ownership.stats.forwarded,
    deadInstances: () => ownership.stats.deadInstances,
    barrierTimeouts: () => ownership.replica.stats.barrierTimeouts,
    resyncs: () => ownership.replica.stats.resyncs,
    tailPosition: () => pgLog.tail.position,
    tailLag: async () => Math.max(0, (await pgLog.globalHead()) - pgLog.tail.position),
    deliveredInline: () => pgLog.tail.stats.inline,
    deliveredRead: () => pgLog.tail.stats.read,
    publishFailures: () => pgLog.stats.publishFailures,
    pendingWrites: () => writes.pending,
  });
  return ownership;
}
