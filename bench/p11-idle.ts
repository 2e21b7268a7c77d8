import fs from 'node:fs';
import path from 'node:path';
import { startFakeLlm } from '../test/fake-llm/fake-llm-server.js';
import { bashThenAnswer, createIdleConversations, sleep } from './support/idle-conversations.js';
import type { Benchmark } from './support/benchmark.js';
import { census, wakeupsBetween, wakeupsByName, type Census } from './support/process-census.js';
import { BENCH_KEY, CLI, settled, startProcess, type StartedProcess } from './support/processes.js';
import { findNetworkHelper } from '../src/adapters/sandbox/network.js';
import { fmt } from './support/stats.js';

/**
 * P11: what an idle conversation costs the machine after one run (one `bash true`, then an
 * answer): the processes and file descriptors it keeps, the server's RSS, its processes' PSS,
 * and the CPU time and wakeups (context switches) it causes while nothing happens, at growing
 * numbers of conversations, against the same server empty (the baseline, measured in the same
 * run). Then the same after AGENTD_IDLE_TIMEOUT_S: the conversations' shells released.
 */
export const p11Idle: Benchmark = {
  id: 'P11',
  title: 'idle cost',
  measures:
    'processes, fds, server RSS, children PSS, idle CPU and wakeups per idle conversation after one run each (50/200/500/1,000 conversations without network, 50 with; --quick 10 and 5, 0.5 s windows), before and after AGENTD_IDLE_TIMEOUT_S, versus the empty server.',
  async run({ quick, tmp }) {
    const sizes = quick ? [10] : [50, 200, 500, 1000];
    const windowMs = quick ? 500 : 10_000;
    const settleMs = quick ? 250 : SETTLE_MS;
    const idle = (server: StartedProcess) => idleWindow(server, windowMs, settleMs);
    const fake = await startFakeLlm({ whenExhausted: bashThenAnswer });
    const rows: string[][] = [];
    const notes: string[] = [];
    let largest: { size: number; figures: IdleFigures } | undefined;
    let withNetwork: { size: number; figures: IdleFigures; helper: string } | undefined;
    let withPasta: { size: number; figures: IdleFigures } | undefined;
    // pasta's own row beside the default helper's (slirp4netns where installed): what AGENTD_SANDBOX_NETWORK_HELPER=pasta costs
    // (--quick: a full run's row only; its server and phase took 3-4 s of a run meant to take two minutes).
    const pastaToo = !quick && findNetworkHelper(process.env.PATH ?? '', 'pasta') !== null && findNetworkHelper(process.env.PATH ?? '')?.kind !== 'pasta';
    const networkSize = quick ? 5 : 50;
    // AGENTD_IDLE_TIMEOUT_S of the server measured after it (--quick: one second less to wait).
    const idleTimeoutS = quick ? 1 : 2;
    // The three servers start together (set-up: nothing is measured until each one's phase, and
    // each phase reads its own server's process tree); each is stopped after its phase.
    const servers: StartedProcess[] = [];
    const start = async (name: string, idleTimeout: string, env: Record<string, string> = {}) => {
      const server = await spawnServer(tmp, name, idleTimeout, env);
      servers.push(server);
      return server;
    };
    try {
      const [server, networked, after, pasta] = await settled([start('before', '3600'), start('network', '3600'), start('after', String(idleTimeoutS)), pastaToo ? start('network-pasta', '3600', { AGENTD_SANDBOX_NETWORK_HELPER: 'pasta' }) : Promise.resolve(null)] as const);
      // Before the timeout: one server, conversations added up to each size. Their sandboxes have
      // no network (at 1,000, the network helper alone would hold ~30 GB); the helper's own cost
      // is measured on a second server with the default network.
      const empty = await idle(server);
      rows.push(row('empty server (baseline)', 0, empty, empty));
      let created = 0;
      for (const size of sizes) {
        await createIdleConversations(server, fake, created, size, { network: false });
        created = size;
        const figures = await idle(server);
        rows.push(row(`${size} idle conversations, no network`, size, figures, empty));
        largest = { size, figures };
      }
      await server.stop();
      const networkedEmpty = await idle(networked);
      const helper = await networkHelperOf(networked);
      await createIdleConversations(networked, fake, 0, networkSize);
      const figures = await idle(networked);
      rows.push(row(`${networkSize} idle conversations, default network (${helper})`, networkSize, figures, networkedEmpty));
      withNetwork = { size: networkSize, figures, helper };
      await networked.stop();
      if (pasta) {
        const pastaEmpty = await idle(pasta);
        await createIdleConversations(pasta, fake, 0, networkSize);
        const pastaFigures = await idle(pasta);
        rows.push(row(`${networkSize} idle conversations, network through pasta (AGENTD_SANDBOX_NETWORK_HELPER=pasta)`, networkSize, pastaFigures, pastaEmpty));
        withPasta = { size: networkSize, figures: pastaFigures };
        await pasta.stop();
      }
      // After the timeout: a server whose conversations are released idleTimeoutS after their run.
      const afterEmpty = await idle(after);
      await createIdleConversations(after, fake, 0, networkSize);
      const deadline = performance.now() + 120_000;
      while (census(after.child.pid!).processes > 0 && performance.now() < deadline) await sleep(200);
      // The row whose target is no wakeup at all: its window comes after the one-off collections
      // V8's memory reducer makes after the release's compaction (see AFTER_RELEASE_SETTLE_MS).
      rows.push(row(`${networkSize} conversations (default network) after AGENTD_IDLE_TIMEOUT_S (${idleTimeoutS} s)`, networkSize, await idleWindow(after, windowMs, quick ? settleMs : AFTER_RELEASE_SETTLE_MS), afterEmpty));
      if (!quick) notes.push(`The row after AGENTD_IDLE_TIMEOUT_S: its window starts ${AFTER_RELEASE_SETTLE_MS / 1000} s after the last shell is gone. Before that the server compacts its heap (2 s after the last run), and V8's memory reducer follows with two collections of its own 18-27 s after the shells are gone (~100 ms of CPU and ~100 wakeups, once); a window 10 s after caught them in some runs (RESULTS.md, round 2's thirty-seventh session).`);
    } finally {
      // stop() of a stopped server returns at once.
      await Promise.all(servers.map((server) => server.stop()));
      await fake.close();
    }
    notes.push(
      'Per conversation: (figure with N conversations − figure of the empty server) / N. CPU and wakeups are over an idle window of ' +
        `${windowMs / 1000} s with nothing running; wakeups are context switches of the server and of every process below it.` +
        (quick
          ? ''
          : ` Each window starts ${SETTLE_MS / 1000} s after the server answered or its last conversation's run ended, after the collections V8's memory reducer makes 8-10 s after a burst of allocations; a window can still catch a later one, a few ms/s of CPU and wakeups/s for the whole server once, which does not grow with the conversations (RESULTS.md, round 2's thirty-fifth session).`),
      "Before the timeout each conversation keeps its sandboxed shell (bwrap, the pid namespace's init, the watchdog, bash; with the default network also a wrapper and its user-mode network helper): the watchdog sleeps in a blocking read while no command runs, so agentd's own processes cause no wakeup; the network helper (slirp4netns or pasta alike) wakes about once a second.",
    );
    return {
      sizes: `${sizes.join(', ')} conversations after one run each (one \`bash true\`, then an answer); idle windows of ${windowMs / 1000} s`,
      tables: [
        ...(largest ? [byProcessTable(largest.size, largest.figures, 'no network')] : []),
        ...(withNetwork ? [byProcessTable(withNetwork.size, withNetwork.figures, `default network, ${withNetwork.helper}`)] : []),
        ...(withPasta ? [byProcessTable(withPasta.size, withPasta.figures, 'network through pasta')] : []),
        {
          caption: 'Idle cost per conversation',
          columns: ['', 'processes', 'fds (server + children)', 'server RSS MiB', 'children PSS KiB / conv', 'server RSS KiB / conv', 'idle CPU ms/s (all)', 'idle CPU µs/s / conv', 'wakeups/s (all)', 'wakeups/s / conv'],
          rows,
        },
      ],
      notes,
    };
  },
};

interface IdleFigures {
  census: Census;
  cpuMsPerS: number;
  wakeupsPerS: number;
  /** Wakeups per second by command name, of the processes below the server. */
  wakeupsByName: Map<string, number>;
}

function row(label: string, size: number, figures: IdleFigures, empty: IdleFigures): string[] {
  const per = (value: number, base: number) => (size === 0 ? '' : fmt((value - base) / size));
  const { census: now } = figures;
  return [
    label,
    String(now.processes),
    String(now.rootFds + now.childFds),
    fmt(now.rootRss / 2 ** 20),
    size === 0 ? '' : fmt(now.childPss / 1024 / size),
    per(now.rootRss / 1024, empty.census.rootRss / 1024),
    fmt(figures.cpuMsPerS),
    size === 0 ? '' : fmt(((figures.cpuMsPerS - empty.cpuMsPerS) * 1000) / size),
    fmt(figures.wakeupsPerS),
    per(figures.wakeupsPerS, empty.wakeupsPerS),
  ];
}

/** Per conversation, by program: who holds the processes, fds and memory, and who wakes up. */
function byProcessTable(size: number, figures: IdleFigures, label: string) {
  const names = [...figures.census.byName.keys()].sort();
  return {
    caption: `By program, per idle conversation (${size} conversations, ${label})`,
    columns: ['program', 'processes', 'fds', 'PSS KiB', 'wakeups/s'],
    rows: names.map((name) => {
      const held = figures.census.byName.get(name)!;
      return [name, fmt(held.processes / size), fmt(held.fds / size), fmt(held.pss / 1024 / size), fmt((figures.wakeupsByName.get(name) ?? 0) / size)];
    }),
  };
}

async function spawnServer(tmp: string, name: string, idleTimeoutS: string, env: Record<string, string> = {}): Promise<StartedProcess> {
  const dataDir = path.join(tmp, name);
  fs.mkdirSync(dataDir, { recursive: true });
  return startProcess({
    command: [process.execPath, CLI],
    args: (port) => ['--port', String(port), '--data-dir', dataDir],
    // Compacting 2 s after the last run, as its notes say (the default waits 30 s, past the windows).
    env: { AGENTD_IDLE_TIMEOUT_S: idleTimeoutS, AGENTD_COMPACT_IDLE_S: '2', AGENTD_LOG_LEVEL: 'warn', ...env },
    probe: '/health',
  });
}

/** The user-mode network helper the server uses (`/info`), or `none`. */
async function networkHelperOf(server: StartedProcess): Promise<string> {
  const info = (await (await fetch(`${server.url}/info`, { headers: { authorization: `Bearer ${BENCH_KEY}` } })).json()) as { sandbox: { network: { user_mode: string | null } } };
  return info.sandbox.network.user_mode ?? 'none';
}

/**
 * How long a server idles before a window (full runs): idle, not finishing its start or the
 * conversations' creation. V8's memory reducer collects 8-10 s after a burst of allocations
 * stops (two full collections, ~30 ms of CPU): a window taken 1 s after read 7-8 ms/s of CPU and
 * 8 wakeups/s with 200 conversations, and 0 ms/s and 0.1/s in the next two windows. (P11's full
 * run takes ~70 s longer for it.)
 */
const SETTLE_MS = 10_000;

/**
 * How long the server idles after its conversations were released before the window after the
 * idle timeout: past V8's memory reducer, which collects twice 18-27 s after the release here
 * (it follows the server's own compaction 2 s after the last run).
 */
const AFTER_RELEASE_SETTLE_MS = 35_000;

/** Settles, then samples the server and its processes over an idle window. */
async function idleWindow(server: StartedProcess, windowMs: number, settleMs: number): Promise<IdleFigures> {
  await sleep(settleMs);
  const before = census(server.child.pid!);
  const started = performance.now();
  await sleep(windowMs);
  const after = census(server.child.pid!);
  const seconds = (performance.now() - started) / 1000;
  const cpu = after.rootCpuMs - before.rootCpuMs + (after.childCpuMs - before.childCpuMs);
  const wakeups = after.rootSwitches - before.rootSwitches + wakeupsBetween(before, after);
  const byName = new Map([...wakeupsByName(before, after)].map(([name, count]) => [name, count / seconds]));
  return { census: after, cpuMsPerS: cpu / seconds, wakeupsPerS: wakeups / seconds, wakeupsByName: byName };
}
