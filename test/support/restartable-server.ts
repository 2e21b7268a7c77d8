import { afterEach } from 'vitest';
import { startFakeLlm, type FakeLlm } from '../fake-llm/fake-llm-server.js';
import { spawnedApi, spawnServer, type SpawnedServer } from './agentd.js';

type SpawnOptions = Parameters<typeof spawnServer>[0];

/** The built server as the restart tests drive it: started, killed with SIGKILL, started again on its data dir. */
export interface RestartableServer {
  /** The server running now. */
  readonly server: SpawnedServer;
  /** The fake LLM of the test. */
  readonly llm: FakeLlm;
  /** JSON requests with the test key to the server running now. */
  api: (path: string, init?: RequestInit) => Promise<any>;
  /** A fake LLM (see startFakeLlm), closed after the test. */
  fakeLlm(...args: Parameters<typeof startFakeLlm>): Promise<FakeLlm>;
  /** `node dist/cli.js` on a data dir; its options are kept for `restart`. */
  start(options: SpawnOptions): Promise<SpawnedServer>;
  /** kill -9, and wait until the process is gone. */
  kill(): Promise<void>;
  /** kill -9, then the server again on the same data dir, with the options it was last started with. */
  restart(): Promise<SpawnedServer>;
}

/** One per test file (it registers an afterEach that kills the server and closes the fake LLM). */
export function restartableServer(): RestartableServer {
  let server: SpawnedServer | undefined;
  let llm: FakeLlm | undefined;
  let options: SpawnOptions | undefined;
  afterEach(async () => {
    server?.child.kill('SIGKILL');
    await llm?.close();
    server = undefined;
    llm = undefined;
  });
  const harness: RestartableServer = {
    get server() {
      if (!server) throw new Error('no server started yet');
      return server;
    },
    get llm() {
      if (!llm) throw new Error('no fake LLM started yet');
      return llm;
    },
    api: spawnedApi(() => harness.server),
    async fakeLlm(...args) {
      llm = await startFakeLlm(...args);
      return llm;
    },
    async start(spawnOptions) {
      options = spawnOptions;
      server = await spawnServer(spawnOptions);
      return server;
    },
    async kill() {
      const killed = harness.server;
      killed.child.kill('SIGKILL');
      await killed.exited;
    },
    async restart() {
      await harness.kill();
      return harness.start(options!);
    },
  };
  return harness;
}

/**
 * The time a test that starts the server twice may take: each start may take up to 45 s on a
 * loaded machine (see spawnServer), more than the 30 s a test gets by default.
 */
export const RESTART_TEST_TIMEOUT = 120_000;
