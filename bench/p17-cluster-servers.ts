/**
 * P17's second part: the same two figures through real agentd processes over HTTP on loopback.
 * Append throughput: clients post messages (`run: false`: one event each) to conversations, each
 * to a random instance as a load balancer without affinity would (with 3 instances, 2 of 3 are
 * forwarded to the conversation's owner). Fan-out latency: a message posted to the owner, until
 * an SSE client of another instance receives its event. One agentd on files is the baseline.
 */
import fs from 'node:fs';
import path from 'node:path';
import { request } from 'undici';
import type { BenchTable } from './support/benchmark.js';
import { BENCH_KEY, CLI, startProcess, type StartedProcess } from './support/processes.js';
import { fmt, ratio, summarize } from './support/stats.js';

const auth = { authorization: `Bearer ${BENCH_KEY}` };

interface Setup {
  label: string;
  instances: number;
  env: Record<string, string>;
}

async function post(url: string, body: unknown): Promise<any> {
  const response = await request(url, { method: 'POST', headers: { ...auth, 'content-type': 'application/json' }, body: JSON.stringify(body) });
  const text = await response.body.text();
  if (response.statusCode >= 300) throw new Error(`POST ${url}: ${response.statusCode} ${text}`);
  return JSON.parse(text);
}

/** Resolves each seq's arrival time as the SSE stream of one conversation delivers it. */
async function subscribe(url: string): Promise<{ arrivals: Map<number, number>; close: () => void; wait: (seq: number) => Promise<void> }> {
  const controller = new AbortController();
  const response = await request(url, { headers: { ...auth, accept: 'text/event-stream' }, signal: controller.signal });
  if (response.statusCode !== 200) throw new Error(`SSE ${url}: ${response.statusCode}`);
  const arrivals = new Map<number, number>();
  const waiters = new Map<number, () => void>();
  void (async () => {
    let buffer = '';
    try {
      for await (const chunk of response.body) {
        buffer += chunk.toString();
        let newline: number;
        while ((newline = buffer.indexOf('\n')) >= 0) {
          const line = buffer.slice(0, newline);
          buffer = buffer.slice(newline + 1);
          if (!line.startsWith('data:')) continue;
          const seq = (JSON.parse(line.slice(5)) as { seq?: number }).seq;
          if (typeof seq !== 'number') continue;
          arrivals.set(seq, performance.now());
          waiters.get(seq)?.();
        }
      }
    } catch {
      // closed
    }
  })();
  return {
    arrivals,
    close: () => controller.abort(),
    wait: (seq) => (arrivals.has(seq) ? Promise.resolve() : new Promise<void>((resolve) => waiters.set(seq, resolve))),
  };
}

export async function measureServers(options: { quick: boolean; tmp: string; databaseUrl: () => Promise<string>; natsUrl: string | null }): Promise<BenchTable & { notes: string[] }> {
  const { quick, tmp } = options;
  const appends = quick ? 120 : 2_000;
  const fanouts = quick ? 30 : 200;
  const conversations = 12;
  const clients = 8;
  const all: Setup[] = [
    { label: 'agentd on files, 1 process', instances: 1, env: {} },
    { label: 'agentd on PostgreSQL, 1 process', instances: 1, env: { AGENTD_DATABASE_URL: '' } },
    { label: 'agentd on PostgreSQL, 3 processes, LISTEN/NOTIFY', instances: 3, env: { AGENTD_DATABASE_URL: '' } },
    ...(options.natsUrl ? [{ label: 'agentd on PostgreSQL, 3 processes, NATS JetStream', instances: 3, env: { AGENTD_DATABASE_URL: '', AGENTD_NATS_URL: options.natsUrl } }] : []),
  ];
  // --quick: the baseline and the last setup (the one scaling out is meant to use), for a run
  // under two minutes: each setup's processes take a few seconds to start, more than it is measured.
  const setups = quick ? [all[0]!, all.at(-1)!] : all;
  const rows: string[][] = [];
  let baseRate = 0;
  let baseP50 = 0;
  for (const [index, setup] of setups.entries()) {
    const root = path.join(tmp, `servers-${index}`);
    const env: Record<string, string> = { ...setup.env, AGENTD_LOG_LEVEL: 'warn', AGENTD_WORKDIR_BASE: path.join(root, 'workdirs'), AGENTD_SECRET_KEY: 'bench-secret-key' };
    if (env.AGENTD_DATABASE_URL === '') env.AGENTD_DATABASE_URL = await options.databaseUrl();
    const servers: StartedProcess[] = [];
    try {
      // The instances start together (nothing is measured while they start; migrations take a lock).
      const starting = Array.from({ length: setup.instances }, (_, i) => {
        const dataDir = path.join(root, `data-${i}`);
        fs.mkdirSync(dataDir, { recursive: true });
        return startProcess({ command: [process.execPath, CLI], args: (port) => ['--port', String(port), '--data-dir', dataDir], env, probe: '/health' });
      });
      const results = await Promise.allSettled(starting);
      for (const result of results) if (result.status === 'fulfilled') servers.push(result.value);
      const failed = results.find((result) => result.status === 'rejected');
      if (failed) throw failed.reason;
      // Each conversation is owned by the instance that created it (round robin).
      const ids: string[] = [];
      for (let i = 0; i < conversations; i++) ids.push((await post(`${servers[i % servers.length]!.url}/conversations`, { title: `bench ${i}` })).id as string);
      let next = 0;
      const started = performance.now();
      await Promise.all(
        Array.from({ length: clients }, async () => {
          for (let i = next++; i < appends; i = next++) {
            const server = servers[Math.floor(Math.random() * servers.length)]!;
            await post(`${server.url}/conversations/${ids[i % conversations]}/messages`, { content: `append ${i}`, run: false });
          }
        }),
      );
      const rate = appends / ((performance.now() - started) / 1000);
      // Fan-out: owned by the first instance, streamed from the last one.
      const id = (await post(`${servers[0]!.url}/conversations`, { title: 'fan-out' })).id as string;
      const stream = await subscribe(`${servers.at(-1)!.url}/conversations/${id}/events/stream?after=0`);
      const latencies: number[] = [];
      for (let i = 1; i <= fanouts; i++) {
        const sentAt = performance.now();
        await post(`${servers[0]!.url}/conversations/${id}/messages`, { content: `fan-out ${i}`, run: false });
        await stream.wait(i);
        latencies.push(stream.arrivals.get(i)! - sentAt);
      }
      stream.close();
      const latency = summarize(latencies);
      if (rows.length === 0) {
        baseRate = rate;
        baseP50 = latency.p50;
      }
      rows.push([setup.label, fmt(rate), ratio(rate, baseRate), fmt(latency.p50), fmt(latency.p99), ratio(latency.p50, baseP50)]);
    } finally {
      await Promise.all(servers.map((server) => server.stop()));
    }
  }
  return {
    caption: `real agentd processes over HTTP: ${appends.toLocaleString('en-US')} messages by ${clients} clients over ${conversations} conversations, each to a random instance; ${fanouts} fan-out samples (POST to the owner → SSE on another instance)${quick ? `; --quick: ${setups.length} of the ${all.length} setups` : ''}`,
    columns: ['servers', 'appends/s', 'vs files', 'fan-out p50 ms', 'fan-out p99 ms', 'p50 vs files'],
    rows,
    notes: [
      'Real processes: with 3 instances, 2 of 3 messages are forwarded to the owner (one more HTTP hop), and the 3 processes share the same 2 cores as PostgreSQL, NATS and the clients: a ceiling, not a measure of scaling out.',
      'Fan-out includes the POST round trip: the event is on the other instance\'s SSE stream when the figure stops, whether it came before or after the 202.',
    ],
  };
}
