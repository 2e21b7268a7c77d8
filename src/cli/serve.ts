import fs from 'node:fs';
import net from 'node:net';
import v8 from 'node:v8';
import { ConfigError } from '../config.js';
import { helpText, parseCli } from './command-line.js';
import { buildApp } from '../app.js';
import { composeServices } from '../compose.js';
import { DataDirInUseError, DataDirLock } from '../adapters/files/index.js';
import { createLogger, terminalDestination } from '../logger.js';
import { VERSION } from '../version.js';
import { compactHeap } from '../perf/compact-heap.js';
import { CompactWhenIdle } from '../perf/compact-when-idle.js';
import { warmUp, WARM_UP_AFTER_MS } from './warm-up.js';

/** `agentd [serve] [--host H] [--port P] ...`: argv + env → config → services → HTTP, until SIGTERM/SIGINT. */
export async function serve(argv: readonly string[]): Promise<void> {
  let parsed;
  try {
    parsed = parseCli(argv, process.env);
  } catch (error) {
    if (error instanceof ConfigError) {
      process.stderr.write(`agentd: ${error.message}\n`);
      process.exit(2);
    }
    throw error;
  }
  if (parsed.action === 'help') return void process.stdout.write(helpText());
  if (parsed.action === 'version') return void process.stdout.write(`${VERSION}\n`);

  const { config } = parsed;
  for (const warning of parsed.warnings) process.stderr.write(`agentd: WARNING: ${warning}\n`);
  // A busy server's heap otherwise grows to several times its live data before V8 collects (P16's
  // RSS growth over its rounds, docs/benchmarks.md); read by V8 at each collection.
  if (config.heapGrowthPercent > 0) v8.setFlagsFromString(`--heap-growing-percent=${config.heapGrowthPercent}`);
  // A port in use stops the start before the data dir is made or written (a new one would keep a key nobody uses).
  const portProblem = await portInUse(config.host, config.port);
  if (portProblem) {
    process.stderr.write(`agentd: ${portProblem}\n`);
    process.exit(1);
  }
  const dataDirExisted = fs.existsSync(config.dataDir);
  // Before anything reads, repairs or writes the data dir: a second server must not touch a live one's files.
  let lock: DataDirLock;
  try {
    lock = DataDirLock.acquire(config.dataDir);
  } catch (error) {
    if (error instanceof DataDirInUseError) {
      process.stderr.write(`agentd: ${error.message}\n`);
      process.exit(1);
    }
    throw error;
  }
  // Bound to the secrets once they are loaded: no log line carries a secret value.
  const masker = { mask: (text: string) => text };
  const destination = await terminalDestination();
  const logger = createLogger({ level: config.logLevel, masker, flushMs: config.logFlushMs, ...(destination && { destination }) });
  // Once the server has had no run for a while, the pages its garbage was spread over go back (compact-when-idle.ts).
  const compactWhenIdle = config.compactIdleMs > 0 ? new CompactWhenIdle({ compact: compactHeap, quietMs: config.compactIdleMs }) : null;
  const services = await composeServices(config, logger, { readers: compactWhenIdle ? [compactWhenIdle] : [] });
  masker.mask = (text) => services.secrets.maskAny(text);
  const app = await buildApp(services);

  if (services.sandbox.warning) process.stderr.write(`agentd: WARNING: ${services.sandbox.warning}\n`);
  if (!config.defaultLlm) process.stderr.write('agentd: WARNING: no default LLM (AGENTD_LLM_MODEL is not set): a conversation created without its own `llm` cannot run\n');
  const how = services.masterKeyCreated ? 'generated a new API key' : 'using the API key';
  if (services.masterKeyFile) process.stderr.write(`agentd: AGENTD_MASTER_KEY is not set; ${how} stored in ${services.masterKeyFile}\n`);

  // The shells go last, right before the process exits, with nothing waited for (host shells sent
  // SIGKILL, sandboxes dying with the process: see BashShellSession.killForExit): waiting would
  // have the server reap every sandbox on its event loop (a thousand exits stall it for hundreds
  // of milliseconds, P13); the kernel hands the dying processes to init instead.
  let shellsKilled = false;
  const killShells = (): void => {
    if (shellsKilled) return;
    shellsKilled = true;
    try {
      services.killShellsForExit();
    } catch (error) {
      logger.error({ err: error }, 'stopping the shells failed: the next start stops what is left of them');
    }
  };
  const exit = (code: number): never => {
    killShells();
    return process.exit(code);
  };
  let stopping = false;
  let warming: NodeJS.Timeout | undefined;
  const stop = async (signal: string) => {
    if (stopping) {
      process.stderr.write(`agentd: ${signal} again, exiting now\n`);
      exit(1);
    }
    stopping = true;
    logger.info({ signal }, 'shutting down: pausing runs, closing streams');
    const force = setTimeout(() => {
      logger.error(`shutdown took longer than ${config.shutdownTimeoutMs / 1000} s (AGENTD_SHUTDOWN_TIMEOUT_S), exiting`);
      exit(1);
    }, config.shutdownTimeoutMs);
    force.unref();
    let code = 0;
    try {
      // Runs first, so that subscribers still receive the events saying they were paused.
      compactWhenIdle?.close();
      clearTimeout(warming);
      await services.agent.stopAll({ exiting: true });
      await app.close();
      await services.close({ exiting: true });
      // Before the data dir is let go (a server started next stops whatever the shell journal names).
      killShells();
      lock.release();
      logger.info('stopped');
    } catch (error) {
      logger.error({ err: error }, 'shutdown failed');
      code = 1;
    }
    exit(code);
  };
  process.on('SIGTERM', () => void stop('SIGTERM'));
  process.on('SIGINT', () => void stop('SIGINT'));

  let address: string;
  try {
    await app.listen({ host: config.host, port: config.port });
    address = boundAddress(app.server.address(), config.host);
  } catch (error) {
    // Taken between the check and now: the same hint, and a data dir this start made goes again.
    const code = (error as NodeJS.ErrnoException).code;
    process.stderr.write(`agentd: ${code === 'EADDRINUSE' || code === 'EACCES' ? portMessage(config.host, config.port, code) : (error as Error).message}\n`);
    killShells();
    lock.release();
    if (!dataDirExisted) fs.rmSync(config.dataDir, { recursive: true, force: true });
    return exit(1);
  }
  // What start-up only used goes, the pages it was spread over with what stays, and the young
  // generation V8 grew while starting, once the server is quiet: a collection's time (tens of ms
  // with many records loaded) not spent before the server answers.
  compactWhenIdle?.afterStart();
  // What start-up leaves for after listen, a slice per turn of the event loop so that the first
  // requests (a probe's /health) wait for one slice at most: the index of every conversation's
  // secrets that log lines are masked against (built by the first log line in one go, it held the
  // event loop for tens of milliseconds with 10,000 conversations; a line before its last slice
  // finishes what is left), then the loaded records in the listing's orders (a listing or a change
  // before sorts them itself). The first lines are written once the index is made.
  void services.secrets
    .prepareMaskAny()
    .catch(() => undefined)
    .then(() => {
      if (services.masterKeyFile) logger.warn({ key_file: services.masterKeyFile }, `AGENTD_MASTER_KEY is not set: ${how} in ${services.masterKeyFile}`);
      logger.info({ address, data_dir: config.dataDir, version: VERSION }, 'agentd listening');
      return services.store.sortLoaded();
    });
  // What the first conversation would otherwise start on its own path (warm-up.ts).
  warming = setTimeout(() => warmUp(services), WARM_UP_AFTER_MS).unref();
}

/**
 * The address the socket is bound to, as a URL: Fastify's listen() answers one of the machine's
 * interfaces (127.0.0.1) for a wildcard host, which hid that the server listens on all of them.
 */
export function boundAddress(bound: string | net.AddressInfo | null, host: string): string {
  if (bound === null || typeof bound === 'string') return bound ?? host;
  return `http://${bound.family === 'IPv6' ? `[${bound.address}]` : bound.address}:${bound.port}`;
}

function portMessage(host: string, port: number, code: string): string {
  const why = code === 'EACCES' ? 'needs privileges this user lacks' : 'is in use';
  return `cannot listen on ${host}:${port}: the port ${why} (${code}). Choose another with --port P (or AGENTD_PORT), or stop what holds it`;
}

/** Why the server could not listen on host:port, tried before anything is written; null when it can (or the port is picked by the system). */
async function portInUse(host: string, port: number): Promise<string | null> {
  if (port === 0) return null;
  return new Promise((resolve) => {
    const probe = net.createServer();
    probe.once('error', (error: NodeJS.ErrnoException) => resolve(error.code === 'EADDRINUSE' || error.code === 'EACCES' ? portMessage(host, port, error.code) : null));
    probe.listen({ host, port, exclusive: true }, () => probe.close(() => resolve(null)));
  });
}
