/**
 * NATS that requires credentials: an instance's feed connects with those in AGENTD_NATS_URL
 * (user and password, or a token); a client without them, or with wrong ones, is refused and so
 * can neither publish to the events' stream nor read it back; two built servers whose
 * AGENTD_NATS_URL carries the credentials run a conversation whose events reach the other
 * instance's SSE stream, and neither writes the password to its output.
 */
import { connect } from '@nats-io/transport-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { JetStreamEventFeed } from '../../src/adapters/cluster/jetstream-event-feed.js';
import { NoticeSeal } from '../../src/adapters/cluster/notice-seal.js';
import type { FeedNotice } from '../../src/adapters/cluster/event-feed.js';
import { startFakeLlm, type FakeLlm } from '../fake-llm/fake-llm-server.js';
import { tempDir, type SpawnedServer } from '../support/agentd.js';
import { clusterHeaders, clusterRequest, eventually as until, startInstance } from '../support/cluster-instances.js';
import { findNatsServer, startNatsServer, type NatsAuth, type NatsServer } from '../support/nats-server.js';
import { findPostgres, startPostgres, type PostgresCluster } from '../support/postgres-cluster.js';
import { connectSse, type SseConnection } from '../support/sse-client.js';

const pg = findPostgres();
const nats = findNatsServer();
const skipReason = 'missing' in nats ? nats.missing : 'missing' in pg ? pg.missing : null;
if (skipReason) console.warn(`test/cluster/nats-auth.test.ts: skipped (${skipReason})`);

const SEAL = new NoticeSeal(Buffer.alloc(32, 9));
const PASSWORD = `pw-${Math.random().toString(36).slice(2)}`;
const TOKEN = `tok${Math.random().toString(36).slice(2)}`;

/** The server's URL with credentials in it. */
function withCredentials(server: NatsServer, auth: NatsAuth): string {
  const url = new URL(server.url);
  if ('token' in auth) url.username = auth.token;
  else {
    url.username = auth.user;
    url.password = auth.password;
  }
  return url.toString().replace(/\/$/, '');
}

describe.skipIf(skipReason !== null)('NATS with authentication', () => {
  const servers: NatsServer[] = [];
  const cleanups: (() => Promise<unknown>)[] = [];

  afterAll(async () => {
    for (const cleanup of cleanups.reverse()) await cleanup().catch(() => {});
    for (const server of servers) await server.stop();
  }, 60_000);

  for (const auth of [{ user: 'agentd', password: PASSWORD }, { token: TOKEN }] satisfies NatsAuth[]) {
    const kind = 'token' in auth ? 'a token' : 'a user and password';
    it(`with ${kind}: the feed connects with them, a client without them is refused`, { timeout: 60_000 }, async () => {
      const server = await startNatsServer((nats as { path: string }).path, { auth });
      servers.push(server);
      const cluster = `auth${'token' in auth ? 'token' : 'user'}`;

      const a = await JetStreamEventFeed.connect({ url: withCredentials(server, auth) }, { cluster, seal: SEAL });
      const b = await JetStreamEventFeed.connect({ url: withCredentials(server, auth) }, { cluster, seal: SEAL });
      cleanups.push(() => a.close(), () => b.close());
      const heard: FeedNotice[] = [];
      await b.listen((notice) => heard.push(notice));
      await a.publish({ globalCursor: 1, conversationId: '00000000-0000-4000-8000-000000000001', seq: 1 });
      await until('the notice across the authenticated feed', 20_000, async () => heard.length === 1);

      // No credentials, or wrong ones: refused at connect, before it can publish or read anything.
      await expect(connect({ servers: server.url, maxReconnectAttempts: 0, reconnect: false })).rejects.toThrow(/author/i);
      const wrong = 'token' in auth ? { token: 'not-the-token' } : { user: 'agentd', pass: 'not-the-password' };
      await expect(connect({ servers: server.url, ...wrong, maxReconnectAttempts: 0, reconnect: false })).rejects.toThrow(/author/i);
      await expect(JetStreamEventFeed.connect({ url: server.url }, { cluster, seal: SEAL })).rejects.toThrow(/author/i);
    });
  }

  describe('two servers with the credentials in AGENTD_NATS_URL', () => {
    let cluster: PostgresCluster;
    let llm: FakeLlm;
    const instances: SpawnedServer[] = [];
    let stream: SseConnection | null = null;

    beforeAll(async () => {
      cluster = await startPostgres(pg as Exclude<typeof pg, { missing: string }>);
    }, 60_000);

    afterAll(async () => {
      stream?.close();
      for (const instance of instances) instance.child.kill('SIGKILL');
      await llm?.close();
      await cluster?.stop();
    }, 60_000);

    it("run a conversation whose events reach the other instance's stream over NATS", { timeout: 120_000 }, async () => {
      const auth = { user: 'agentd', password: PASSWORD };
      const server = await startNatsServer((nats as { path: string }).path, { auth });
      servers.push(server);
      const databaseUrl = await cluster.createDatabase();
      llm = await startFakeLlm([{ text: 'hello over an authenticated feed' }]);
      const start = () => startInstance({ databaseUrl, natsUrl: withCredentials(server, auth), workdirs: tempDir('agentd-nats-auth-'), leaseTtlS: 5 }, { dataDir: tempDir() });
      const [a, b] = await Promise.all([start(), start()]);
      instances.push(a!, b!);
      for (const instance of [a!, b!]) {
        const health = await clusterRequest(instance.url, '/health');
        expect(health.body.checks.nats).toEqual({ ok: true, detail: null });
      }

      const created = await clusterRequest(a!.url, '/conversations', { method: 'POST', body: JSON.stringify({ llm: { model: 'fake', base_url: llm.url, api_key: 'k' }, run: false }) });
      expect(created.status).toBe(201);
      const id = created.body.id as string;
      stream = await connectSse(`${b!.url}/conversations/${id}/events/stream?after=0`, { authorization: clusterHeaders.authorization });
      expect((await clusterRequest(a!.url, `/conversations/${id}/messages`, { method: 'POST', body: JSON.stringify({ content: 'say hello' }) })).status).toBe(202);
      await stream.waitFor((messages) => messages.some((message) => message.data.includes('hello over an authenticated feed')), 30_000);
      const metrics = await clusterRequest(b!.url, '/metrics');
      // B took events from NATS messages themselves, not only from the database.
      expect(Number(/^agentd_replication_inline_total (\d+)/m.exec(metrics.text)?.[1] ?? 0)).toBeGreaterThan(0);

      for (const instance of [a!, b!]) expect(instance.output()).not.toContain(PASSWORD);
    });
  });
});
