import fs from 'node:fs/promises';
import path from 'node:path';
import type { Benchmark } from './support/benchmark.js';
import { loadLoop, type LoadResult } from './support/load-loop.js';
import { populate } from './support/populate.js';
import { BENCH_KEY, CLI, childScript, cpuTimeOf, settled, startProcess, type StartedProcess } from './support/processes.js';
import { fmt, median, spread } from './support/stats.js';

const CONNECTIONS = 16;
const AUTH = { authorization: `Bearer ${BENCH_KEY}` };

/** One server process answering a row, and the path it is asked for there. */
interface Instance {
  server: StartedProcess;
  path: string;
}

interface Target {
  label: string;
  /** Several processes of the same server, taken in turn round by round. */
  instances: Instance[];
  headers?: Record<string, string>;
}

interface Measured {
  result: LoadResult;
  serverCpu: number;
  clientCpu: number;
}

/**
 * P5: requests/s of agentd's routes (every hook, auth, zod serialization, metrics and request
 * logging) versus a bare Fastify route, each server in its own process, the load generator (an
 * undici closed loop on loopback) in this one.
 */
export const p5Http: Benchmark = {
  id: 'P5',
  title: 'HTTP overhead',
  measures: 'requests/s of `GET /alive` and `GET /conversations/{id}` (as deployed: auth, hooks, metrics, request logging at `info`) versus a bare Fastify route, in the same run.',
  async run({ quick, tmp }) {
    const durationMs = quick ? 300 : 2_000;
    const warmupMs = quick ? 100 : 500;
    // Even --quick measures several rounds: the spread of the ratios shows how far one run can be trusted.
    const rounds = quick ? 2 : 6;
    // Each process carries its own luck for its whole life (code and heap placement, what its
    // compiler chose: the same build measured ±10 % from process to process, RESULTS.md), so each
    // row is answered by several processes of its server, one per round in turn, each warmed up
    // first with more requests than a round's warm-up gives.
    const processes = quick ? 1 : 3;
    const firstWarmupMs = quick ? 300 : 3_000;
    const secretConversations = quick ? 200 : 10_000;
    const manySecrets = path.join(tmp, 'data-secrets');
    // A data directory is one server's: each process with many conversations gets a copy.
    const secretDirs = Array.from({ length: processes }, (_, index) => (index === 0 ? manySecrets : `${manySecrets}-${index}`));
    const fillSecretDirs = async () => {
      // Every log line is scrubbed of every conversation's secret values (the last line of defence): does that scale?
      await populate({ dataDir: manySecrets, conversations: secretConversations, eventsPerConversation: 1, secretNames: 'distinct' });
      for (const dir of secretDirs.slice(1)) await fs.cp(manySecrets, dir, { recursive: true });
    };

    const agentd = (level: string, dataDir: string) =>
      startProcess({ command: [process.execPath, CLI], args: (port) => ['--port', String(port), '--data-dir', dataDir], env: { AGENTD_LOG_LEVEL: level }, probe: '/health' });
    const servers: StartedProcess[] = [];
    const start = async (server: Promise<StartedProcess>) => {
      servers.push(await server);
      return servers[servers.length - 1]!;
    };
    const each = <T>(make: (index: number) => Promise<T>) => Promise.all(Array.from({ length: processes }, (_, index) => make(index)));
    try {
      // Set-up, nothing measured yet: the servers with empty data dirs start while the many
      // conversations are written, and those with them as soon as they are.
      const [bare, info, warn, secrets] = await settled([
        each(async () => ({ server: await start(startProcess({ command: [process.execPath, childScript('bare-fastify')], probe: '/bare' })), path: '/bare' })),
        each((index) => start(agentd('info', path.join(tmp, `data-info-${index}`)))),
        each((index) => start(agentd('warn', path.join(tmp, `data-warn-${index}`)))),
        fillSecretDirs().then(() => each((index) => start(agentd('info', secretDirs[index]!)))),
      ] as const);
      const conversationPaths = async (group: StartedProcess[]) => Promise.all(group.map(async (server) => ({ server, path: `/conversations/${await createOne(server.url)}` })));
      const alivePaths = (group: StartedProcess[]) => group.map((server) => ({ server, path: '/alive' }));
      const targets: Target[] = [
        { label: 'baseline: bare Fastify `GET /bare`', instances: bare },
        { label: 'agentd `GET /alive` (log level info, the default)', instances: alivePaths(info) },
        { label: 'agentd `GET /conversations/{id}` (log level info, the default)', instances: await conversationPaths(info), headers: AUTH },
        { label: 'agentd `GET /alive` (log level warn: no request log lines)', instances: alivePaths(warn) },
        { label: 'agentd `GET /conversations/{id}` (log level warn)', instances: await conversationPaths(warn), headers: AUTH },
        { label: `agentd \`GET /alive\` (info), ${secretConversations.toLocaleString('en-US')} conversations with a secret each`, instances: alivePaths(secrets) },
      ];
      for (const target of targets) {
        for (const instance of target.instances) {
          const warmed = await loadLoop({ origin: instance.server.url, path: instance.path, connections: CONNECTIONS, durationMs: firstWarmupMs, warmupMs: 0, ...(target.headers ? { headers: target.headers } : {}) });
          if (warmed.errors > 0) throw new Error(`${target.label}: ${warmed.errors} failed requests while warming up`);
        }
      }
      // Each agentd row is measured right after the bare route, every round: the ratio of each
      // adjacent pair cancels most of the load elsewhere on the machine; medians over the rounds.
      // The row with many conversations is measured right beside `/alive` with one (in turn
      // before and after it), sharing its bare run: their CPU per request, pair by pair, is the
      // steady answer to "does the number of conversations cost anything" (rows measured far
      // apart in time differed by ×0.65-×1.08 from run to run).
      const [baseline, oneAlive, , , , manyAlive] = targets;
      const runs = new Map<Target, Measured[]>(targets.map((target) => [target, []]));
      const byInstance = new Map<Instance, number[]>(targets.flatMap((target) => target.instances.map((instance): [Instance, number[]] => [instance, []])));
      const pairRatios = new Map<Target, number[]>(targets.slice(1).map((target) => [target, []]));
      const manyVsOne: number[] = [];
      const record = (target: Target, instance: Instance, measured: Measured, bareRun: Measured) => {
        if (measured.result.errors > 0) throw new Error(`${target.label}: ${measured.result.errors} failed requests`);
        runs.get(target)!.push(measured);
        byInstance.get(instance)!.push(cpuPerRequest(measured));
        if (target !== baseline) pairRatios.get(target)!.push(measured.result.perSecond / bareRun.result.perSecond);
      };
      let turn = 0;
      for (let round = 0; round < rounds; round++) {
        for (const target of targets.slice(1, 5)) {
          // Processes in turn: a different bare one beside each agentd row of a round, too.
          const pick = (member: Target) => member.instances[turn % member.instances.length]!;
          const bareInstance = pick(baseline!);
          const bareRun = await measure({ target: baseline!, instance: bareInstance, durationMs, warmupMs });
          record(baseline!, bareInstance, bareRun, bareRun);
          const group = target === oneAlive ? (round % 2 === 0 ? [oneAlive, manyAlive!] : [manyAlive!, oneAlive]) : [target];
          const measured = new Map<Target, Measured>();
          for (const member of group) {
            const instance = pick(member);
            const run = await measure({ target: member, instance, durationMs, warmupMs });
            record(member, instance, run, bareRun);
            measured.set(member, run);
          }
          if (target === oneAlive) manyVsOne.push(cpuPerRequest(measured.get(oneAlive!)!) / cpuPerRequest(measured.get(manyAlive!)!));
          turn += 1;
        }
      }
      const typical = (target: Target): Measured => {
        const sorted = [...runs.get(target)!].sort((a, b) => a.result.perSecond - b.result.perSecond);
        return sorted[Math.floor((sorted.length - 1) / 2)]!;
      };
      const medianCpuUs = (target: Target) => median(runs.get(target)!.map(cpuPerRequest));
      const rows = targets.map((target) => {
        const { result, serverCpu, clientCpu } = typical(target);
        const ratios = target === baseline ? [1] : pairRatios.get(target)!;
        const cpuUs = medianCpuUs(target);
        return [target.label, fmt(result.perSecond), fmt(result.latency.p50), fmt(result.latency.p99), `${Math.round(serverCpu * 100)}%`, `${Math.round(clientCpu * 100)}%`, spread(ratios, (value) => `×${fmt(value)}`), fmt(cpuUs), `×${fmt(medianCpuUs(baseline!) / cpuUs)}`];
      });
      const perRequestUs = (target: Target) => 1e6 / (typical(baseline!).result.perSecond * (target === baseline ? 1 : median(pairRatios.get(target)!)));
      // Conversations created and deleted beside the many: each changes the set of secret values the log masks.
      const churnCycles = quick ? 10 : 40;
      const churned = [await churn(info[0]!, churnCycles), await churn(secrets[0]!, churnCycles)];
      const churnRows = churned.map((run, index) => [index === 0 ? 'one conversation' : `${secretConversations.toLocaleString('en-US')} conversations with a secret each`, fmt(run.createCpuMs), fmt(run.deleteCpuMs), fmt(median(run.afterCreateMs)), fmt(median(run.afterDeleteMs)), index === 0 ? '×1' : `×${fmt(run.createCpuMs / churned[0]!.createCpuMs)} / ×${fmt(run.deleteCpuMs / churned[0]!.deleteCpuMs)}`]);
      return {
        sizes: `${CONNECTIONS} kept-alive connections, ${durationMs / 1000} s per measurement after ${warmupMs / 1000} s of warm-up; ${rounds} round${rounds > 1 ? 's' : ''}, each agentd row right after a bare one (the row with many conversations beside \`/alive\` with one, sharing its bare run); ${processes} process${processes > 1 ? 'es' : ''} per server, taken in turn, each first warmed up for ${firstWarmupMs / 1000} s`,
        tables: [
          { columns: ['route', 'requests/s (median)', 'p50 ms', 'p99 ms', 'server CPU', 'load generator CPU', 'vs bare: median (min–max) of pairs', 'server CPU µs/request (median)', 'bare\'s CPU/request ÷ this'], rows },
          {
            caption: `${churnCycles} conversations created (each with a secret), then deleted, one at a time, each followed by a \`GET /alive\`: server CPU per create and per delete (with its /alive), and that /alive's time`,
            columns: ['server holding', 'CPU ms per create', 'CPU ms per delete', '/alive after a create, p50 ms', '/alive after a delete, p50 ms', 'CPU vs one conversation (create / delete)'],
            rows: churnRows,
          },
        ],
        notes: [
          ...(processes > 1
            ? [`Server CPU µs/request by process (median of its rounds), row by row: ${targets.map((target, index) => `${index === 0 ? 'bare' : `row ${index + 1}`} ${target.instances.map((instance) => fmt(median(byInstance.get(instance)!))).join(' / ')}`).join('; ')}.`]
            : []),
          `\`/alive\` costs ${fmt(perRequestUs(targets[1]!) - perRequestUs(targets[0]!))} µs more per request than a bare Fastify route (${fmt(perRequestUs(targets[3]!) - perRequestUs(targets[0]!))} µs without the request log line); \`/conversations/{id}\` (auth, lookup, zod serialization) ${fmt(perRequestUs(targets[2]!) - perRequestUs(targets[0]!))} µs.`,
          `With ${secretConversations.toLocaleString('en-US')} conversations holding a secret each, \`/alive\` costs ${fmt(perRequestUs(targets[5]!) - perRequestUs(targets[1]!))} µs more per request than with one conversation (requests/s). Server CPU per request, one conversation's ÷ this row's, measured side by side (in turn first and second) in each round: ×${spread(manyVsOne)}. Log records are masked at the source (logger.ts: only the strings that can carry a secret, such as the URL, are scanned, through an index whose cost does not grow with the number of values).`,
          'CPU columns are the share of one core during the row: a server near 100% is the bottleneck; the load generator shares the other core.',
          'Server CPU µs/request is the steadier figure on a shared machine: requests/s also measure how often the scheduler runs each process, CPU time per request only what the server spends. It is read over the measured window only (not the warm-up).',
          'CPU per request also falls as a server gets busier (more requests per event-loop turn and per system call): a row whose server CPU share is far from another\'s is not compared at the same load (the bare server, bound by the load generator, is usually the idler one).',
          ...(typical(baseline!).clientCpu > 0.9
            ? ['The bare route is bound by the load generator (near 100% of a core): its rate is a floor, so the ratios are upper bounds and agentd\'s extra µs per request lower bounds.']
            : []),
        ],
      };
    } finally {
      await Promise.all(servers.map((server) => server.stop()));
    }
  },
};

/**
 * `cycles` conversations created with a secret, each followed by `GET /alive`, then deleted, each
 * followed by one too (after three of each unmeasured): the server's CPU per create and per delete (its clock ticks are 10 ms: read
 * over all of them), and how long each /alive took (what a request right after such a change waits).
 */
async function churn(server: StartedProcess, cycles: number): Promise<{ createCpuMs: number; deleteCpuMs: number; afterCreateMs: number[]; afterDeleteMs: number[] }> {
  const pid = server.child.pid!;
  const alive = async () => {
    const started = performance.now();
    const answer = await fetch(`${server.url}/alive`);
    await answer.arrayBuffer();
    return performance.now() - started;
  };
  const create = async (value: string) => {
    const id = await createOne(server.url, { CHURN_TOKEN: `${value}-${process.pid}` });
    return { id, aliveMs: await alive() };
  };
  const remove = async (id: string) => {
    const deleted = await fetch(`${server.url}/conversations/${id}`, { method: 'DELETE', headers: AUTH });
    if (deleted.status !== 204) throw new Error(`DELETE /conversations/${id}: ${deleted.status}`);
    return alive();
  };
  // First, unmeasured, a few of each: the server's first create and delete compile their code.
  for (let i = 0; i < 3; i++) await remove((await create(`churn-warm-${i}`)).id);
  const before = cpuTimeOf(pid);
  const createdOnes: { id: string; aliveMs: number }[] = [];
  for (let i = 0; i < cycles; i++) createdOnes.push(await create(`churn-value-${i}`));
  const created = cpuTimeOf(pid);
  const afterDeleteMs: number[] = [];
  for (const { id } of createdOnes) afterDeleteMs.push(await remove(id));
  const afterCreateMs = createdOnes.map((one) => one.aliveMs);
  return { createCpuMs: (created - before) / cycles, deleteCpuMs: (cpuTimeOf(pid) - created) / cycles, afterCreateMs, afterDeleteMs };
}

/**
 * Server CPU per request in µs: what the server itself spends, whatever else runs on the machine
 * (requests/s on a shared machine also measure the scheduler).
 */
function cpuPerRequest(measured: Measured): number {
  return (measured.serverCpu / measured.result.perSecond) * 1e6;
}

/** Server and client CPU over the measured window only (not the warm-up, not the drain after it), as shares of one core. */
async function measure(options: { target: Target; instance: Instance; durationMs: number; warmupMs: number }): Promise<Measured> {
  const { target, instance, durationMs, warmupMs } = options;
  const pid = instance.server.child.pid!;
  let serverBefore = 0;
  let clientBefore = process.cpuUsage();
  let windowStarted = 0;
  let window = { serverMs: 0, clientMs: 0, wallMs: 1 };
  const onWindow = (edge: 'start' | 'end') => {
    if (edge === 'start') {
      serverBefore = cpuTimeOf(pid);
      clientBefore = process.cpuUsage();
      windowStarted = performance.now();
      return;
    }
    const client = process.cpuUsage(clientBefore);
    window = { serverMs: cpuTimeOf(pid) - serverBefore, clientMs: (client.user + client.system) / 1000, wallMs: performance.now() - windowStarted };
  };
  const result = await loadLoop({ origin: instance.server.url, path: instance.path, connections: CONNECTIONS, durationMs, warmupMs, onWindow, ...(target.headers ? { headers: target.headers } : {}) });
  return { result, serverCpu: window.serverMs / window.wallMs, clientCpu: window.clientMs / window.wallMs };
}

async function createOne(url: string, secrets?: Record<string, string>): Promise<string> {
  const created = await fetch(`${url}/conversations`, {
    method: 'POST',
    headers: { ...AUTH, 'content-type': 'application/json' },
    body: JSON.stringify({ title: 'bench', llm: { model: 'gpt-4o-mini', api_key: 'sk-bench' }, ...(secrets && { secrets }) }),
  });
  if (created.status !== 201) throw new Error(`POST /conversations: ${created.status}`);
  return ((await created.json()) as { id: string }).id;
}

