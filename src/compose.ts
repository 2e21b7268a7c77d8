import fs from 'node:fs';
import path from 'node:path';
import type { Logger } from 'pino';
import type { Config } from './config.js';
import { VERSION } from './version.js';
import type { Ownership } from './adapters/cluster/index.js';
import { DiskSpace, HostWorkdirs, loadServerKeys } from './adapters/files/index.js';
import { createCheckpoints } from './adapters/git/index.js';
import { createHookTransport } from './adapters/hooks/index.js';
import { FallbackLlmClient, ProtocolLlmClient } from './adapters/llm/index.js';
import { SdkMcpConnector } from './adapters/mcp/index.js';
import { Metrics } from './adapters/metrics/index.js';
import { ExecaCommandRunner, ProcessSpawner, testPausePoint } from './adapters/process/index.js';
import { createSandbox, sandboxReport, type SandboxInfo } from './adapters/sandbox/index.js';
import { createShells, type Shells } from './adapters/shell/index.js';
import { createAccess } from './adapters/access/index.js';
import { createStorage, saveForNextStart, type Storage } from './adapters/storage/index.js';
import { createTools } from './adapters/tools/index.js';
import { createWebhooks } from './adapters/webhooks/index.js';
import { TreeSitterShellParser } from './adapters/shell-syntax/index.js';
import { createWorkspace } from './adapters/workspace/index.js';
import { AgentRuntime } from './core/agent/agent-runtime.js';
import { AgentSessions } from './core/agent/agent-sessions.js';
import type { LlmClient } from './core/agent/llm.js';
import { CommandService } from './core/commands/command-service.js';
import { ConversationForks } from './core/conversations/conversation-fork.js';
import { ConversationService } from './core/conversations/conversation-service.js';
import { ConversationStore } from './core/conversations/conversation-store.js';
import { imageReader } from './core/conversations/message-images.js';
import { describeDamage, type DamagedDataError, type Damage } from './core/errors.js';
import { DeltaChannel } from './core/events/delta-channel.js';
import { EventQueries } from './core/events/event-queries.js';
import { EventRecorder, type EventReader } from './core/events/event-recorder.js';
import { EventStreams } from './core/events/event-streams.js';
import { ServerStatus } from './core/health/server-status.js';
import { McpRegistry } from './core/mcp/mcp-registry.js';
import { normalizeLlmConfig } from './core/schemas/llm-config.js';
import { SecretBox } from './core/secrets/secret-box.js';
import { SecretService } from './core/secrets/secret-service.js';
import type { ShellFactory } from './core/tools/shell-session.js';
import { WebhookTargets } from './core/webhooks/webhook-targets.js';
import { createSchedules } from './core/schedules/schedules.js';
import { systemClock, type Clock } from './core/clock.js';
import type { HttpServices } from './http/services.js';

/** Everything the server holds: what the HTTP layer calls (HttpServices) and what start and shutdown need. */
export interface Services extends HttpServices {
  config: Config;
  logger: Logger;
  startedAt: number;
  masterKeys: readonly string[];
  toolNames: readonly string[];
  /** Set when the master key was generated or read from the data dir (not from the environment). */
  masterKeyFile: string | null;
  masterKeyCreated: boolean;
  /** How agent processes run (bwrap or none) and their limits. */
  sandbox: SandboxInfo;
  metrics: Metrics;
  recorder: EventRecorder;
  /** Streaming-only deltas, beside the log. */
  deltas: DeltaChannel;
  /** Whether the data dir takes writes (out of space, read-only). */
  disk: DiskSpace;
  /** Several instances: who serves each conversation (null on files). */
  ownership: Ownership | null;
  /** Files or PostgreSQL: `durable()` is the barrier every HTTP response waits for. */
  storage: Storage;
  /** Stored data found damaged at start-up and quarantined (kept as found, never written). */
  quarantined(): { conversations: { id: string; damage: Damage }[]; callbacks: { id: string; damage: Damage }[]; schedules: { id: string; damage: Damage }[] };
  /** `exiting`: the process exits next; the shells are left to killShellsForExit (see AgentRuntime.stopAll). */
  close(options?: { exiting?: boolean }): Promise<void>;
  /** Every shell made to end with the process, nothing waited for: the last step before it exits (ShellFactory.killAllForExit); the sandboxes' cgroups are removed after it. */
  killShellsForExit(): void;
  /** The shells started ahead for the next new conversations (null when none are kept): the warm-up starts them (cli/warm-up.ts). */
  warmShells: Shells['warm'];
}

/** Replacements for the outside world, for tests and benchmarks. */
export interface ServiceOverrides {
  llm?: LlmClient;
  shells?: ShellFactory;
  /** Wraps the server's own shells (`shells`, or else its sandbox's through its spawner): benchmarks time them as they are. */
  wrapShells?: (shells: ShellFactory) => ShellFactory;
  /** More in-process readers of every stored event, after the server's own (benchmarks time appends with one). */
  readers?: readonly EventReader[];
  /** The time schedules fire by, and the clock of keys, quotas and the audit log (tests move a fake clock). */
  clock?: Clock;
}

export async function composeServices(config: Config, logger: Logger, overrides: ServiceOverrides = {}): Promise<Services> {
  fs.mkdirSync(config.dataDir, { recursive: true, mode: 0o700 });
  fs.mkdirSync(config.workdirBase, { recursive: true });
  // The sandbox probe (a bwrap process or two, mostly waiting) runs while the records load: start-up
  // takes the longer of the two, not their sum. Awaited below, where a failure is thrown.
  const sandboxReady = createSandbox(config, logger);
  sandboxReady.catch(() => {});

  // Keys and storage: the data dir's files, or PostgreSQL for several instances.
  const keys = loadServerKeys(config);
  const box = new SecretBox(SecretBox.keyFromText(keys.secretKeyText));
  const disk = new DiskSpace(config.dataDir);
  const storage = await createStorage({
    config,
    logger,
    box,
    storageError: (error: unknown) => disk.storageError(error),
    onDamaged: (conversationId, error) => {
      if (!store.quarantineFound(conversationId, error)) return;
      // Found in its runs (first read after a clean stop): its log is written no more either, as when found at start-up.
      log.quarantine(conversationId, error);
      logQuarantined(logger, conversationId, error);
    },
  });
  const { log, runs, summaries, postgres: pg } = storage;
  const access = createAccess(config, { storage, store: () => store, logger, clock: overrides.clock });

  // Conversations, their histories and secrets, and the one way into the event log.
  const deltas = new DeltaChannel();
  const store = new ConversationStore({
    repository: storage.repository,
    log,
    hostNetworkAllowed: config.sandbox.network.hostAllowed,
    integrityChecks: [(id) => void runs.list(id)],
    // Several instances list each other's conversations from the database: usage and run starts are saved as they happen.
    persistUsage: storage.kind === 'postgres',
    persistRunStart: storage.kind === 'postgres',
  });
  // Fallback models around the protocol client; one cooldown table for the whole server.
  const llm = new FallbackLlmClient(overrides.llm ?? new ProtocolLlmClient(config.llmClient));
  // Histories keep their messages in the LLM client's own encoding (sent as they are at each request).
  const sessions = new AgentSessions(log, { codec: llm.codec, historyBudget: config.historyCacheBytes });
  const secrets = new SecretService({ conversations: store, onChange: (conversationId, change) => sessions.updateShellEnv(conversationId, change) });
  const streams = new EventStreams({ log, deltas, maxBuffered: config.sseMaxBuffered, maxBufferedBytes: config.sseMaxBufferedBytes });
  const metrics = new Metrics({ conversationsByStatus: () => store.countsByStatus(), sseSubscribers: () => streams.size, historyCache: () => sessions.historyCache });
  // Every event is masked, stored, then read in this process by these readers, in this order;
  // SSE streams and webhook deliveries subscribe to the log itself (each with its own cursor).
  const recorder = new EventRecorder({
    log,
    deltas,
    mask: secrets.maskEvent,
    deltaMasker: secrets.deltaMasker,
    readers: [store.summaryReader, sessions, { name: 'metrics', read: ({ event }) => metrics.observeEvent(event) }, access.spendReader, ...(overrides.readers ?? [])],
  });
  const events = new EventQueries(log, (id) => void store.record(id));
  const saved = await summaries.take();
  for (const { id, error } of await store.load(saved)) logQuarantined(logger, id, error);
  const { launcher, info: sandbox } = await sandboxReady;

  // Webhooks, and the one address policy for everything the server sends out.
  const targets = new WebhookTargets({ allowPrivate: config.webhooks.allowPrivate, allowCidrs: config.webhooks.allowCidrs });
  let ownership: Ownership | null = null;
  const webhooks = await createWebhooks({ config, logger, log, conversations: store, store: storage.webhooks, version: VERSION, targets, ...(storage.postgres && { owns: (id: string) => ownership?.holds(id) ?? false }) });

  // Workdirs: their files and the project catalog (skills, agents, commands).
  const { workdirFs, projectFiles, files, catalogs, catalogOf } = createWorkspace(config, { workdirOf: (id) => store.record(id).workdir, maskText: (id, text) => secrets.maskText(id, text) });

  // The agent's processes: tools, shells, one-off commands, hooks, MCP servers.
  const spawner = new ProcessSpawner();
  const commandRunner = new ExecaCommandRunner({ launcher, ...config.agentEnv });
  const { tools, close: closeTools } = await createTools(config, launcher, spawner.spawn, commandRunner);
  const toolNames: readonly string[] = tools.map((tool) => tool.name);
  const workdirs = new HostWorkdirs({ dataDir: config.dataDir, workdirBase: config.workdirBase, ...(config.checkpoints.shared && { checkpointsDir: config.checkpoints.dir }) });
  const shells = createShells(config, {
    logger,
    launcher,
    spawn: spawner.spawn,
    workdirs,
    inUse: (workdir) => [...store.all()].some((record) => record.workdir === workdir),
    ...(overrides.shells && { shells: overrides.shells }),
    ...(overrides.wrapShells && { wrapShells: overrides.wrapShells }),
  });
  const hooks = createHookTransport({ commandRunner, homeDir: path.join(config.dataDir, 'hook-home'), targets, userAgent: `agentd/${VERSION}`, environment: (record) => secrets.environment(record), sandboxOf: (record) => store.sandboxOf(record) });
  const mcpConnector = new SdkMcpConnector({ launcher, targets, version: VERSION, ...config.agentEnv });
  const mcp = new McpRegistry({
    projectFiles,
    connector: mcpConnector,
    serverDefaults: config.mcpServers,
    secretsOf: (record) => secrets.environment(record),
    sandboxOf: (record) => store.sandboxOf(record),
    mask: (conversationId, text) => secrets.maskText(conversationId, text),
  });

  // Workdir checkpoints.
  const pausePoint = testPausePoint(config.testPauseAt, logger);
  const { intents, store: checkpointStore, checkpoints } = createCheckpoints({
    config,
    logger,
    run: spawner.run,
    launcher,
    deps: { conversations: store, log, recorder, isRunning: (conversationId) => Boolean(sessions.peek(conversationId)?.active), maskText: (conversationId, text) => secrets.maskText(conversationId, text), ...(pausePoint && { pausePoint }) },
  });

  // The agent, and the conversations' service in front of it.
  const agent = new AgentRuntime({
    mcp,
    checkpoints,
    readImage: imageReader((conversationId, ...args) => files.readSmallFile(conversationId, ...args)),
    catalog: catalogOf,
    maxSubagentDepth: config.subagentMaxDepth,
    subagentModels: config.subagentModels,
    conversations: store,
    sessions,
    recorder,
    runs,
    llm,
    tools,
    workdirFs,
    projectFiles,
    shellParser: new TreeSitterShellParser(),
    shells: shells.factory,
    shellEnv: (record) => secrets.environment(record),
    idleTimeoutMs: config.idleTimeoutMs,
    // With its shell and history, a released conversation lets go of its event log's open files (else closed a minute after their last use), its checkpoint records and its project catalog.
    onReleased: (conversationId) => {
      log.release?.(conversationId);
      checkpointStore.release(conversationId);
      catalogs.forget(conversationId);
    },
    hookTransport: hooks.transport,
    onError: (error, context) => logger.error({ err: error, ...context }, 'agent run failed'),
    onLlmRetry: (retry, context) =>
      logger.warn({ ...context, attempt: retry.attempt, code: retry.code, status: retry.status, retry_in_ms: retry.delayMs }, `LLM attempt ${retry.attempt} failed, retrying: ${retry.message}`),
    condenserMaxTokens: config.condenserMaxTokens,
    spending: config.spending,
    spendCheck: access.spendCheck,
    maskText: (conversationId, text) => secrets.maskText(conversationId, text),
    onRunFailed: (failure, context) => logger.error({ ...context, code: failure.code }, `run ended in agent_error: ${failure.message}`),
  });
  const conversations = new ConversationService({
    readImage: (conversationId, imagePath, options) => files.readSmallFile(conversationId, imagePath, options),
    store,
    workdirs,
    log,
    recorder,
    runtime: agent,
    ...(shells.warm && { warmShells: shells.warm }),
    // What a deleted conversation leaves behind elsewhere: its secrets, webhooks, checkpoints and sandbox state.
    onDeleted: [
      (conversationId) => secrets.forget(conversationId),
      (conversationId) => webhooks.callbacks.removeConversation(conversationId),
      (conversationId) => checkpointStore.forget(conversationId),
      (conversationId) => checkpoints.forget(conversationId),
      (_, record) => launcher.forget?.(record.workdir),
    ],
    defaults: {
      llm: config.defaultLlm ? normalizeLlmConfig(config.defaultLlm) : null,
      workdirBase: config.workdirBase,
      toolNames,
      network: config.sandbox.network,
    },
  });
  const commands = new CommandService({ conversations: store, secrets, runner: commandRunner, workdirFs });
  const forks = new ConversationForks({ conversations, store, log, checkpoints, intents, ...(pausePoint && { pausePoint }) });
  const schedules = createSchedules({ timezone: config.scheduleTimezone, clock: overrides.clock ?? systemClock, store: storage.schedules, owner: storage.instanceId, leaseMs: config.cluster?.leaseTtlMs, deps: { conversations, store, events, ...(pg && { stored: (id: string) => pg.repository.load(id) }) }, pausePoint, ...(pg && { servesHere: async (id: string) => !ownership || (await ownership.route(id)).local }), onError: (error, context) => logger.error({ err: error, ...context }, 'schedule fire failed') });

  // Several instances: who serves each conversation. One instance: its runs resume here.
  if (storage.postgres && config.cluster) {
    // The cluster layer (and its HTTP client) loads only for several instances.
    const { createOwnership } = await import('./adapters/cluster/index.js');
    ownership = createOwnership({
      cluster: config.cluster,
      metrics,
      deps: {
        pg: storage.postgres,
        store,
        agent,
        webhooks,
        logger,
        checkpoints: {
          adopt: async (conversationId) => {
            checkpointStore.evict(conversationId);
            await checkpoints.recover(conversationId);
          },
        },
      },
    });
    await ownership.start();
  } else {
    await agent.recoverAfterRestart();
  }
  // Forks and rewinds a crash interrupted: undone (a fork without its record) or finished (a rewind).
  await forks.recover();
  // Several instances: a rewind is finished by whichever instance takes its conversation over.
  if (!config.checkpoints.shared) await checkpoints.recover();
  await schedules.start();
  const quarantined = () => ({ conversations: store.quarantined(), callbacks: webhooks.damaged(), schedules: storage.schedules.damaged() });
  const startedAt = Date.now();

  return {
    config,
    logger,
    version: VERSION,
    startedAt,
    masterKeys: keys.masterKeys,
    access: access.services,
    toolNames,
    masterKeyFile: keys.masterKeyFile,
    masterKeyCreated: keys.masterKeyCreated,
    sandbox,
    conversations,
    store,
    agent,
    mcp,
    secrets,
    commands,
    metrics,
    events,
    streams,
    recorder,
    deltas,
    callbacks: webhooks.callbacks,
    checkpoints,
    forks,
    schedules: schedules.service,
    files,
    disk,
    storage,
    quarantined,
    status: new ServerStatus({
      version: VERSION,
      startedAt,
      toolNames,
      conversations: store,
      dataDirWritable: () => disk.check(),
      quarantined,
      sseSubscribers: () => streams.size,
      firehoseHead: () => events.firehoseHead(),
      storageChecks: () => storage.checks(),
      settings: config,
      sandbox: sandboxReport(sandbox),
      sandboxNote: () => sandbox.idmapRefused(),
    }),
    ownership,
    warmShells: shells.warm,
    killShellsForExit: () => {
      shells.killAllForExit();
      launcher.removeCgroupsAfterExit?.();
    },
    async close(options = {}) {
      await schedules.close();
      await shells.stopWarm();
      await agent.stopAll(options);
      // A process about to exit keeps it: it goes with the process, and takes the shells with it.
      if (!options.exiting) spawner.close();
      shells.close();
      await ownership?.close();
      await webhooks.close();
      await hooks.close();
      await mcpConnector.close();
      await closeTools();
      streams.closeAll('server_shutting_down');
      access.flush();
      await storage.close();
      checkpointStore.close();
      metrics.stop();
      // A process about to exit leaves that to removeCgroupsAfterExit: waiting here would hold its exit on its dying sandboxes.
      if (!options.exiting) await launcher.removeCgroups?.();
      await saveForNextStart({ store, storage, logger });
    },
  };
}

function logQuarantined(logger: Logger, conversationId: string, error: DamagedDataError): void {
  logger.error({ conversation_id: conversationId, file: error.path, line: error.damage.line }, `conversation quarantined: ${describeDamage(error.damage)}; its files are kept as found, the others are served`);
}
