import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { request } from 'undici';
import { startFakeLlm, type FakeLlm, type FakeStaticTurn, type RecordedRequest } from '../test/fake-llm/fake-llm-server.js';
import { ensureRuntime, NODE_RUNTIME_VERSION } from '../scripts/binary-runtime.mjs';
import type { Benchmark, BenchOptions, BenchTable } from './support/benchmark.js';
import { descendants } from './support/process-census.js';
import { BENCH_KEY, childScript, CLI, ROOT, startProcess, type StartedProcess } from './support/processes.js';
import { fmt, median } from './support/stats.js';

/** Where the peer is installed (bench/peer/package.json pins its version; `npm install` there, once). */
const PEER_DIR = path.join(ROOT, 'bench', 'peer');
const PEER_BIN = path.join(PEER_DIR, 'node_modules', '.bin', 'opencode');
/**
 * The peer's home, kept between runs: at its first start it installs its plugin package with npm
 * into its config dir there, and no measured start should wait for that. Outside the repository:
 * npm installs into the nearest folder with a package.json, which there would be agentd's own.
 */
const PEER_HOME = path.join(os.tmpdir(), 'agentd-bench-opencode-home');

/** The pauses between a client's turns that the rows are measured at, in ms. */
const PACES_MS = [200, 2000, 10_000];
/** Turns a warm server has served before the warm rows: a server that has run for a while. */
const WARM_TURNS = 50;

/**
 * The peer runs offline as this machine does: OPENCODE_DISABLE_MODELS_FETCH spares it the
 * models.dev catalogue it cannot reach (its retries held the first request for tens of seconds).
 *
 * P20: agentd and opencode (`opencode serve`, installed from npm into bench/peer/) driven the same
 * way in the same run: the same fake LLM (a `bash true` call, then an answer), the same client
 * code (POST a message, wait for the run's end on the server's event stream), turns interleaved
 * between the two servers. Rows: a new conversation's and a later turn's round trip with turns
 * paced 0.2, 2 and 10 s apart, on servers started fresh (their first turns) and warm (after 50
 * turns); the server's CPU per turn (its whole process tree, garbage collections and what runs in
 * the pauses included); start to ready; RSS and PSS of the process tree after 50 turns; 20
 * concurrent round trips. agentd runs on the Node it ships on, with its default sandbox. Beside the
 * warm rows, the floor: a server that does only the turn's hops (bench/children/hops-server.ts).
 */
export const p20Peer: Benchmark = {
  id: 'P20',
  title: 'agentd and opencode side by side',
  measures:
    'round trips of a new conversation and a later turn (POST to the run\'s end on the event stream) at 0.2/2/10 s pacing, fresh and warm, server CPU per turn, start to ready, process-tree RSS/PSS after 50 turns and 20 concurrent round trips, for agentd and `opencode serve` on the same fake LLM in the same run',
  async run(options) {
    if (!fs.existsSync(PEER_BIN)) {
      const installed = spawnSync('npm', ['install', '--no-audit', '--no-fund', '--silent'], { cwd: PEER_DIR, stdio: 'inherit' });
      if (installed.status !== 0 || !fs.existsSync(PEER_BIN)) return { sizes: '', tables: [], notes: [], skipped: `opencode is not installed in bench/peer (npm install there failed: ${installed.status})` };
    }
    return measure(options);
  },
};

type Name = 'agentd' | 'opencode';
const NAMES: Name[] = ['agentd', 'opencode'];

/** What one server answered in a run: samples by row. */
class Figures {
  readonly samples = new Map<string, number[]>();
  add(row: string, value: number): void {
    const list = this.samples.get(row) ?? [];
    list.push(value);
    this.samples.set(row, list);
  }
  median(row: string): number {
    const list = this.samples.get(row);
    return list && list.length > 0 ? median(list) : Number.NaN;
  }
}

async function measure({ quick, tmp }: BenchOptions): Promise<{ sizes: string; tables: BenchTable[]; notes: string[] }> {
  // --quick keeps the whole suite's quick run near two minutes: the peer's starts alone take seconds.
  const paces = quick ? [200] : PACES_MS;
  const freshServers = quick ? 1 : 2;
  const warmRounds = quick ? 2 : 4;
  const starts = quick ? 1 : 3;
  const warmTurns = quick ? 20 : WARM_TURNS;
  const node = ensureRuntime({ root: ROOT });
  const fakes = { agentd: await startFakeLlm({ script: [], whenExhausted: bashThenAnswer, requireSystemFirst: false }), opencode: await startFakeLlm({ script: [], whenExhausted: bashThenAnswer, requireSystemFirst: false }), hops: await startFakeLlm({ script: [], whenExhausted: bashThenAnswer, requireSystemFirst: false }) };
  const figures = { agentd: new Figures(), opencode: new Figures() };
  const floor = new Figures();
  const subject = (name: Name, label: string) => (name === 'agentd' ? new Agentd(node, fakes.agentd, path.join(tmp, `agentd-${label}`)) : new Opencode(fakes.opencode, path.join(tmp, `opencode-${label}`)));
  try {
    // Each server once before anything is measured: the peer fetches its provider package then,
    // and both write their first data dir; the start figures are later starts, as a user restarts.
    for (const name of NAMES) {
      const first = subject(name, 'setup');
      await first.start();
      await first.turn(await first.newConversation(), 'Turn 1: run true.');
      await first.stop();
    }
    for (let i = 0; i < starts; i++) {
      for (const name of NAMES) {
        const server = subject(name, 'setup');
        await server.start();
        figures[name].add('start to ready, ms', server.readyMs);
        await server.stop();
      }
    }
    // Fresh servers: their first turns, at each pace, interleaved turn by turn.
    for (const pace of paces) {
      for (let i = 0; i < freshServers; i++) {
        const pair = { agentd: subject('agentd', `fresh-${pace}-${i}`), opencode: subject('opencode', `fresh-${pace}-${i}`) };
        await Promise.all(NAMES.map((name) => pair[name].start()));
        try {
          const ids = { agentd: '', opencode: '' };
          for (let turn = 0; turn < 3; turn++) {
            for (const name of NAMES) {
              const server = pair[name];
              if (turn === 0) ids[name] = await server.newConversation();
              const ms = await server.turn(ids[name], `Turn ${turn + 1}: run true.`);
              figures[name].add(`fresh server, ${turn === 0 ? 'new conversation' : 'later turn'}, ${pace / 1000} s apart`, ms);
            }
            await sleep(pace);
          }
        } finally {
          await Promise.all(NAMES.map((name) => pair[name].stop()));
        }
      }
    }
    // Warm servers: 50 turns first, then paced turns, the tree's CPU read around each paced block.
    const pair = { agentd: subject('agentd', 'warm'), opencode: subject('opencode', 'warm') };
    await Promise.all(NAMES.map((name) => pair[name].start()));
    let hops: Hops | undefined;
    try {
      for (const name of NAMES) {
        const server = pair[name];
        for (let c = 0; c < warmTurns / 5; c++) {
          const id = await server.newConversation();
          for (let turn = 0; turn < 5; turn++) await server.turn(id, `Turn ${turn + 1}: run true.`);
        }
        const memory = treeMemory(server.pid);
        figures[name].add(`tree RSS after ${warmTurns} turns, MiB`, memory.rss / 2 ** 20);
        figures[name].add(`tree PSS after ${warmTurns} turns, MiB`, memory.pss / 2 ** 20);
      }
      // The floor's server sends the two requests of agentd's last warm turn (a later turn's).
      const bodies = path.join(tmp, 'hops-bodies.json');
      fs.writeFileSync(bodies, JSON.stringify(fakes.agentd.requests.slice(-2).map((recorded) => recorded.body)));
      hops = new Hops(node, fakes.hops, bodies);
      await hops.start();
      for (let c = 0; c < warmTurns / 5; c++) {
        const id = await hops.newConversation();
        for (let turn = 0; turn < 5; turn++) await hops.turn(id, 'Run true.');
      }
      for (const pace of paces) {
        const cpuBefore = { agentd: treeCpuMs(pair.agentd.pid), opencode: treeCpuMs(pair.opencode.pid) };
        let turns = 0;
        for (let round = 0; round < warmRounds; round++) {
          const ids = { agentd: '', opencode: '' };
          for (const kind of ['new conversation', 'later turn'] as const) {
            for (const name of NAMES) {
              const server = pair[name];
              if (kind === 'new conversation') ids[name] = await server.newConversation();
              figures[name].add(`warm server, ${kind}, ${pace / 1000} s apart`, await server.turn(ids[name], 'Run true.'));
            }
            turns += 1;
            await sleep(pace);
          }
        }
        for (const name of NAMES) figures[name].add(`server CPU per turn (tree, pauses included), ${pace / 1000} s apart, ms`, (treeCpuMs(pair[name].pid) - cpuBefore[name]) / turns);
        // The floor's rounds after the servers' (their turns keep the pace they had without it), the same pause before each turn.
        for (let round = 0; round < warmRounds; round++) {
          let id = '';
          for (const kind of ['new conversation', 'later turn'] as const) {
            if (kind === 'new conversation') id = await hops.newConversation();
            floor.add(`${kind}, ${pace / 1000} s apart`, await hops.turn(id, 'Run true.'));
            await sleep(pace);
          }
        }
      }
      // 20 round trips at once on new conversations: the time until the last run ended.
      for (const name of NAMES) {
        const server = pair[name];
        const ids = await Promise.all(Array.from({ length: 20 }, () => server.newConversation()));
        const started = performance.now();
        const each = await Promise.all(ids.map((id) => server.turn(id, 'Run true.')));
        figures[name].add('20 concurrent round trips, all done, ms', performance.now() - started);
        figures[name].add('20 concurrent round trips, median, ms', median(each));
      }
    } finally {
      await Promise.all([...NAMES.map((name) => pair[name].stop()), hops?.stop()]);
    }
  } finally {
    await Promise.all([...NAMES.map((name) => fakes[name].close()), fakes.hops.close()]);
  }
  const rows = [...figures.agentd.samples.keys()].map((row) => {
    const a = figures.agentd.median(row);
    const o = figures.opencode.median(row);
    // Every row is a time, CPU or memory figure: smaller is better, so opencode / agentd is agentd's lead.
    return [row, fmt(a), fmt(o), `×${fmt(o / a)}`];
  });
  const floorRows = paces.flatMap((pace) =>
    (['new conversation', 'later turn'] as const).map((kind) => {
      const row = `${kind}, ${pace / 1000} s apart`;
      const hopsMs = floor.median(row);
      const opencodeMs = figures.opencode.median(`warm server, ${row}`);
      return [row, fmt(hopsMs), fmt(figures.agentd.median(`warm server, ${row}`)), fmt(opencodeMs), `×${fmt(opencodeMs / hopsMs)}`];
    }),
  );
  return {
    sizes: `${paces.map((pace) => `${pace / 1000} s`).join(', ')} pacing; ${freshServers} fresh server(s) per pace (3 turns each), ${warmRounds} warm rounds per pace after ${warmTurns} turns; agentd on Node ${NODE_RUNTIME_VERSION} (its default sandbox), opencode ${peerVersion()}`,
    tables: [
      { caption: 'Medians; the last column is how many times agentd is faster or smaller', columns: ['', 'agentd', 'opencode', 'opencode / agentd'], rows },
      {
        caption: "The turn's floor on this machine: a server doing only a turn's hops (POST answered, agentd's two LLM requests, `true` in a running bash without a sandbox, one event on the stream), on the same Node, paced as the servers after their warm rounds; medians, ms",
        columns: ['warm server', 'the hops alone', 'agentd', 'opencode', 'opencode / the hops alone'],
        rows: floorRows,
      },
    ],
    notes: [],
  };
}

/** The fake model both servers talk to: `bash true`, then an answer once it sees the tool's result; a request without tools (opencode's title) gets a title. */
function bashThenAnswer(recorded: RecordedRequest): FakeStaticTurn {
  if (!recorded.body.tools || recorded.body.tools.length === 0) return { text: 'A title' };
  const last = recorded.body.messages?.at(-1);
  return last?.role === 'tool' ? { text: 'done' } : { toolCalls: [{ name: 'bash', arguments: { command: 'true' } }] };
}

/**
 * One server under test: started, asked for conversations and turns. A turn is a POST and the
 * run's end seen on the server's own event stream (one stream per server, opened at start).
 */
abstract class Subject {
  protected process: StartedProcess | undefined;
  private stream: AbortController | undefined;
  private readonly waiting = new Map<string, () => void>();

  get readyMs(): number {
    return this.process!.readyMs;
  }
  get pid(): number {
    return this.process!.child.pid!;
  }
  protected get url(): string {
    return this.process!.url;
  }

  async start(): Promise<void> {
    this.process = await this.spawn();
    this.stream = new AbortController();
    const opened = await fetch(`${this.url}${this.streamPath}`, { headers: this.headers, signal: this.stream.signal });
    if (opened.status !== 200 || !opened.body) throw new Error(`${this.streamPath}: ${opened.status}`);
    void this.follow(opened.body).catch(() => {});
  }

  async stop(): Promise<void> {
    this.stream?.abort();
    await this.process?.stop();
  }

  /** One round trip: from the POST to the run's end on the stream, in ms. */
  async turn(id: string, text: string): Promise<number> {
    const started = performance.now();
    const ended = new Promise<void>((resolve) => this.waiting.set(id, resolve));
    await this.send(id, text);
    await ended;
    return performance.now() - started;
  }

  private async follow(body: ReadableStream<Uint8Array>): Promise<void> {
    const decoder = new TextDecoder();
    let buffered = '';
    for await (const chunk of body) {
      buffered += decoder.decode(chunk, { stream: true });
      let end: number;
      while ((end = buffered.indexOf('\n\n')) >= 0) {
        const message = buffered.slice(0, end);
        buffered = buffered.slice(end + 2);
        const data = message
          .split('\n')
          .filter((line) => line.startsWith('data:'))
          .map((line) => line.slice(5).trimStart())
          .join('\n');
        if (!data) continue;
        const id = this.runEndOf(JSON.parse(data));
        if (id === null) continue;
        this.waiting.get(id)?.();
        this.waiting.delete(id);
      }
    }
  }

  protected abstract spawn(): Promise<StartedProcess>;
  protected abstract readonly streamPath: string;
  protected abstract readonly headers: Record<string, string>;
  /** The conversation whose run this stream message ends, or null. */
  protected abstract runEndOf(data: Record<string, unknown>): string | null;
  abstract newConversation(): Promise<string>;
  protected abstract send(id: string, text: string): Promise<void>;

  protected async post(route: string, body: unknown, expect: number): Promise<string> {
    const response = await request(`${this.url}${route}`, { method: 'POST', headers: { ...this.headers, 'content-type': 'application/json' }, body: JSON.stringify(body) });
    const text = await response.body.text();
    if (response.statusCode !== expect) throw new Error(`POST ${route}: ${response.statusCode} ${text}`);
    return text;
  }
}

/** A server with agentd's routes: agentd itself, and P20's floor (which ignores the key). */
abstract class AgentdRoutes extends Subject {
  protected readonly streamPath = '/events/stream';
  protected readonly headers = { authorization: `Bearer ${BENCH_KEY}` };

  protected runEndOf(data: Record<string, unknown>): string | null {
    return data.kind === 'state_update' && data.status !== 'running' ? (data.conversation_id as string) : null;
  }

  async newConversation(): Promise<string> {
    return (JSON.parse(await this.post('/conversations', {}, 201)) as { id: string }).id;
  }

  protected async send(id: string, text: string): Promise<void> {
    await this.post(`/conversations/${id}/messages`, { content: text, run: true }, 202);
  }
}

class Agentd extends AgentdRoutes {
  constructor(
    private readonly node: string,
    private readonly fake: FakeLlm,
    private readonly dataDir: string,
  ) {
    super();
  }

  protected spawn(): Promise<StartedProcess> {
    return startProcess({
      command: [this.node, CLI],
      args: (port) => ['--port', String(port), '--data-dir', this.dataDir],
      env: { AGENTD_LOG_LEVEL: 'warn', AGENTD_LLM_MODEL: 'fake-model', AGENTD_LLM_BASE_URL: this.fake.url, AGENTD_LLM_API_KEY: 'sk-bench' },
      probe: '/health',
    });
  }
}

class Opencode extends Subject {
  protected readonly streamPath = '/event';
  protected readonly headers = {};

  constructor(
    private readonly fake: FakeLlm,
    private readonly project: string,
  ) {
    super();
  }

  protected spawn(): Promise<StartedProcess> {
    fs.mkdirSync(this.project, { recursive: true });
    fs.writeFileSync(
      path.join(this.project, 'opencode.json'),
      JSON.stringify({
        provider: { fake: { npm: '@ai-sdk/openai-compatible', name: 'Fake', options: { baseURL: `${this.fake.url}/v1`, apiKey: 'sk-bench' }, models: { 'fake-model': { name: 'Fake' } } } },
        model: 'fake/fake-model',
        autoupdate: false,
        share: 'disabled',
        permission: { bash: 'allow', edit: 'allow' },
      }),
    );
    const home = PEER_HOME;
    return startProcess({
      command: [PEER_BIN, 'serve'],
      args: (port) => ['--port', String(port), '--hostname', '127.0.0.1'],
      cwd: this.project,
      env: { HOME: home, XDG_CACHE_HOME: path.join(home, 'cache'), XDG_CONFIG_HOME: path.join(home, 'config'), XDG_DATA_HOME: path.join(this.project, '.data'), XDG_STATE_HOME: path.join(this.project, '.state'), OPENCODE_DISABLE_AUTOUPDATE: '1', OPENCODE_DISABLE_MODELS_FETCH: '1' },
      probe: '/config',
      timeoutMs: 180_000,
      // Its first request made while it starts may never be answered (seen on 1.18): each probe gets 200 ms, then more.
      probeTimeoutMs: 200,
    });
  }

  protected runEndOf(data: Record<string, unknown>): string | null {
    if (data.type !== 'session.idle') return null;
    return ((data.properties as { sessionID?: string } | undefined)?.sessionID ?? null) as string | null;
  }

  async newConversation(): Promise<string> {
    return (JSON.parse(await this.post('/session', {}, 200)) as { id: string }).id;
  }

  protected async send(id: string, text: string): Promise<void> {
    await this.post(`/session/${id}/prompt_async`, { parts: [{ type: 'text', text }] }, 204);
  }
}

/** P20's floor: bench/children/hops-server.ts, on the Node agentd runs on, with agentd's routes. */
class Hops extends AgentdRoutes {
  constructor(
    private readonly node: string,
    private readonly fake: FakeLlm,
    private readonly bodies: string,
  ) {
    super();
  }

  protected spawn(): Promise<StartedProcess> {
    return startProcess({
      command: [this.node, childScript('hops-server')],
      args: (port) => ['--port', String(port), '--llm', this.fake.url, '--bodies', this.bodies],
      probe: '/health',
    });
  }
}

/** CPU (user + system, ms) of a process and everything below it, children that already exited and were waited for included. */
function treeCpuMs(rootPid: number): number {
  let total = 0;
  for (const pid of [rootPid, ...descendants(rootPid)]) {
    try {
      const fields = fs.readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
      // utime, stime, cutime, cstime (clock ticks of 10 ms).
      total += (Number(fields[11]) + Number(fields[12]) + Number(fields[13]) + Number(fields[14])) * 10;
    } catch {
      // Gone meanwhile: its time is in its parent's cutime/cstime once waited for.
    }
  }
  return total;
}

/** Resident and proportional set sizes of a process and everything below it, bytes. */
function treeMemory(rootPid: number): { rss: number; pss: number } {
  let rss = 0;
  let pss = 0;
  for (const pid of [rootPid, ...descendants(rootPid)]) {
    try {
      const rollup = fs.readFileSync(`/proc/${pid}/smaps_rollup`, 'utf8');
      rss += Number(/^Rss:\s+(\d+) kB/m.exec(rollup)?.[1] ?? 0) * 1024;
      pss += Number(/^Pss:\s+(\d+) kB/m.exec(rollup)?.[1] ?? 0) * 1024;
    } catch {
      // Gone meanwhile.
    }
  }
  return { rss, pss };
}

function peerVersion(): string {
  try {
    return (JSON.parse(fs.readFileSync(path.join(PEER_DIR, 'node_modules', 'opencode-ai', 'package.json'), 'utf8')) as { version: string }).version;
  } catch {
    return '?';
  }
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
