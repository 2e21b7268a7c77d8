/**
 * Random kill -9 of instances while clients write through all of them: nothing acknowledged is
 * lost. Three built servers on one database (and NATS when installed); clients post messages
 * (some starting runs) to random instances, retrying elsewhere on failure; meanwhile a random
 * instance is killed and started again, `AGENTD_CHAOS_KILLS` times (2 in `npm test`; 20 for the
 * heavy run: `AGENTD_CHAOS_KILLS=20 npx vitest run test/cluster/cluster-chaos.test.ts`). At the end every
 * acknowledged message is in its conversation exactly once, seqs run 1..N with no gap, no run is
 * left running, and each conversation's webhook received every event once, in order.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startFakeLlm, type FakeLlm } from '../fake-llm/fake-llm-server.js';
import { freePort, tempDir, type SpawnedServer } from '../support/agentd.js';
import { findNatsServer, startNatsServer, type NatsServer } from '../support/nats-server.js';
import { findPostgres, startPostgres, type PostgresCluster } from '../support/postgres-cluster.js';
import { sleep, until } from '../support/reliability.js';
import { WebhookReceiver } from '../support/webhook-receiver.js';
import { clusterRequest, startInstance } from '../support/cluster-instances.js';

const pg = findPostgres();
const nats = findNatsServer();
const skipReason = 'missing' in pg ? pg.missing : null;
if (skipReason) console.warn(`test/cluster/cluster-chaos.test.ts: skipped (${skipReason})`);
const KILLS = Number(process.env.AGENTD_CHAOS_KILLS ?? 2);

const pick = <T>(items: readonly T[]): T => items[Math.floor(Math.random() * items.length)]!;

const call = (base: string, path: string, init: RequestInit = {}) => clusterRequest(base, path, init, 20_000);

describe.skipIf(skipReason !== null)('random kills across instances', () => {
  let cluster: PostgresCluster;
  let natsServer: NatsServer | null = null;
  let llm: FakeLlm;
  let receiver: WebhookReceiver;
  const slots: { port: number; server: SpawnedServer | null }[] = [];

  beforeAll(async () => {
    cluster = await startPostgres(pg as Exclude<typeof pg, { missing: string }>);
    if (!('missing' in nats)) natsServer = await startNatsServer(nats.path);
    receiver = await WebhookReceiver.start();
    llm = await startFakeLlm({});
  }, 60_000);

  afterAll(async () => {
    for (const slot of slots) slot.server?.child.kill('SIGKILL');
    await llm?.close();
    await receiver?.close();
    await natsServer?.stop();
    await cluster?.stop();
  }, 60_000);

  it(`${KILLS} kill -9s of random instances lose nothing acknowledged`, { timeout: 180_000 + KILLS * 30_000 }, async () => {
    const databaseUrl = await cluster.createDatabase();
    const workdirs = tempDir('agentd-chaos-workdirs-');
    // A restart on a loaded machine (2 shared cores, three servers, the database) can take far
    // longer than the usual start: its budget is generous, and the kills wait for it.
    const start = (port: number, dataDir: string) =>
      startInstance(
        { databaseUrl, natsUrl: natsServer?.url, workdirs, leaseTtlS: 2 },
        // AGENTD_CHAOS_LOG_LEVEL=info: the servers' logs in a failure's message.
        { dataDir, port, healthyWithinMs: 120_000, env: { ...(process.env.AGENTD_CHAOS_LOG_LEVEL && { AGENTD_LOG_LEVEL: process.env.AGENTD_CHAOS_LOG_LEVEL }) } },
      );
    const dataDirs = [tempDir(), tempDir(), tempDir()];
    for (const dataDir of dataDirs) {
      const port = await freePort();
      slots.push({ port, server: await start(port, dataDir) });
    }
    const live = () => slots.filter((slot) => slot.server !== null).map((slot) => slot.server!.url);

    const ids: string[] = [];
    for (let i = 0; i < 4; i++) {
      const base = pick(live());
      const created = await call(base, '/conversations', { method: 'POST', body: JSON.stringify({ llm: { model: 'fake', base_url: llm.url, api_key: 'k' } }) });
      expect(created.status).toBe(201);
      ids.push(created.body.id);
      expect((await call(pick(live()), `/conversations/${created.body.id}/callbacks`, { method: 'POST', body: JSON.stringify({ url: receiver.url }) })).status).toBe(201);
    }

    // Clients: each message is acknowledged by a 2xx from some instance, or retried under a new content elsewhere.
    const acknowledged = new Map<string, string[]>(ids.map((id) => [id, []]));
    let writing = true;
    let attempts = 0;
    const writer = async (n: number) => {
      for (let k = 0; writing; k++) {
        const id = pick(ids);
        const content = `w${n}-${k}`;
        attempts++;
        try {
          const answer = await call(pick(live()), `/conversations/${id}/messages`, { method: 'POST', body: JSON.stringify({ content, run: k % 5 === 0 }) });
          if (answer.status === 202 || answer.status === 201) acknowledged.get(id)!.push(content);
          else if (answer.status !== 503 && answer.status !== 409) throw new Error(`unexpected ${answer.status}: ${JSON.stringify(answer.body)}`);
        } catch (error) {
          if ((error as Error).message.startsWith('unexpected')) throw error;
          // the instance died under the request: its outcome is unknown, it was not acknowledged
        }
        await sleep(20);
      }
    };
    const writers = [writer(1), writer(2)];
    // The kills begin once every conversation holds an acknowledged message: each has something to lose.
    // (A conversation whose owner was killed answers 503 until its lease is taken over; one that had
    // no message before such a kill could end the run with none, and nothing of it to check.)
    await until(() => ids.every((id) => acknowledged.get(id)!.length > 0), 'an acknowledged message in every conversation', 30_000);

    const restartMs: number[] = [];
    for (let kill = 0; kill < KILLS; kill++) {
      await sleep(500 + Math.random() * 1500);
      const index = Math.floor(Math.random() * slots.length);
      const slot = slots[index]!;
      slot.server!.child.kill('SIGKILL');
      await slot.server!.exited;
      slot.server = null;
      const restarting = Date.now();
      slot.server = await start(slot.port, dataDirs[index]!);
      restartMs.push(Date.now() - restarting);
    }
    writing = false;
    await Promise.all(writers);
    const total = [...acknowledged.values()].reduce((n, list) => n + list.length, 0);
    expect(total).toBeGreaterThan(KILLS);

    const deadline = Date.now() + 60_000;
    for (const id of ids) {
      // No run is left running: a run cut off by a kill was recovered by the instance that took it over.
      let events: { seq: number; kind: string; content?: string; source?: string; id: string }[] = [];
      for (;;) {
        const base = pick(live());
        const conversation = await call(base, `/conversations/${id}`).catch(() => null);
        const runs = await call(base, `/conversations/${id}/runs?limit=1000`).catch(() => null);
        if (conversation?.status === 200 && conversation.body.status !== 'running' && runs?.body.items.every((run: { status: string }) => run.status !== 'running')) {
          events = (await call(base, `/conversations/${id}/events?limit=1000`)).body.items;
          break;
        }
        if (Date.now() > deadline) throw new Error(`conversation ${id} still running: ${JSON.stringify(conversation?.body)} ${JSON.stringify(runs?.body)}`);
        await sleep(200);
      }
      expect(events.map((event) => event.seq)).toEqual(events.map((_, i) => i + 1));
      const userMessages = events.filter((event) => event.kind === 'message' && event.source === 'user').map((event) => event.content!);
      for (const content of acknowledged.get(id)!) expect(userMessages.filter((text) => text === content), `acknowledged message ${content}`).toHaveLength(1);
      await receiver.waitFor(
        () => receiver.delivered.filter((request) => request.json.conversation_id === id).at(-1)?.json.event.seq === events.at(-1)!.seq,
        `every event of ${id} delivered`,
        60_000,
      );
      expect(receiver.delivered.filter((request) => request.json.conversation_id === id).map((request) => request.json.event.seq)).toEqual(events.map((event) => event.seq));
    }
    console.info(`cluster chaos: ${KILLS} kills, ${attempts} writes attempted, ${total} acknowledged, none lost; restarts took ${Math.min(...restartMs)}-${Math.max(...restartMs)} ms`);
  });
});
