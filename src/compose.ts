import fs from 'node:fs';
import path from 'node:path';
import type { Logger } from 'pino';
import type { Config } from './config.js';
import { loadOrCreateKeyFile } from './adapters/files/key-file.js';
import { holdingYoungGeneration } from './perf/young-generation.js';
import { ConversationService } from './core/conversations/conversation-service.js';
import { ConversationStore } from './core/conversations/conversation-store.js';
import { AgentSessions } from './core/agent/agent-sessions.js';
import { DeltaChannel } from './core/events/delta-channel.js';
import { EventQueries } from './core/events/event-queries.js';
import { EventRecorder, type EventReader } from './core/events/event-recorder.js';
import { EventStreams } from './core/events/event-streams.js';
import { SecretBox } from './core/secrets/secret-box.js';
import { normalizeLlmConfig } from './core/schemas/llm-config.js';
import { VERSION } from './version.js';
import { composeStorage, type Storage } from './adapters/storage/index.js';
import { testPausePoint } from './adapters/process/test-pause-point.js';
import type { Ownership } from './adapters/cluster/ownership.js';
import { OpenAiLlmClient } from './adapters/llm/openai-llm.js';
import { BashShellFactory } from './adapters/shell/bash-shell.js';
import { composeWarmShells } from './adapters/shell/warm-shells.js';
import { composeCheckpoints } from './adapters/git/index.js';
import type { CheckpointService } from './core/checkpoints/checkpoint-service.js';
import { ShellLedger } from './adapters/shell/shell-ledger.js';
import { ProcessSpawner } from './adapters/process/process-spawner.js';
import { Metrics } from './adapters/metrics/prometheus-metrics.js';
import { ExecaCommandRunner } from './adapters/process/execa-command-runner.js';
import { UndiciHookClient } from './adapters/webhooks/undici-hook-client.js';
import { SdkMcpConnector } from './adapters/mcp/mcp-sdk-connector.js';
import { McpRegistry } from './core/mcp/mcp-registry.js';
import { WebhookTargets } from './core/webhooks/webhook-targets.js';
import { CommandService } from './core/commands/command-service.js';
import { AgentRuntime } from './core/agent/agent-runtime.js';
import { SecretService } from './core/secrets/secret-service.js';
import type { LlmClient } from './core/agent/llm.js';
import type { ShellFactory } from './core/tools/shell-session.js';
import { CatalogCache } from './core/catalog/catalog-cache.js';
import { mayHoldProjectCatalog } from './core/catalog/project-catalog.js';
import { workspaceCatalogFiles } from './core/catalog/workspace-catalog-files.js';
import { WorkspaceFiles } from './core/workspace/workspace-files.js';
import { NodeWorkdirFileSystem } from './adapters/workspace/node-workdir-file-system.js';
import { HostProjectFiles } from './adapters/workspace/host-project-files.js';
import { MAX_IMAGE_BYTES, sniffImageType } from './core/schemas/message-content.js';
import { imageTooLarge } from './core/conversations/message-images.js';
import type { CallbackService } from './core/webhooks/callback-service.js';
import { composeWebhooks } from './adapters/webhooks/index.js';
import { composeTools } from './adapters/tools/index.js';
import { composeSandbox, sandboxReport, type SandboxInfo } from './adapters/sandbox/index.js';
import { detectRipgrep } from './adapters/search/ripgrep-searcher.js';
import { DiskSpace } from './adapters/files/disk-space.js';
import { HostWorkdirs } from './adapters/files/host-workdirs.js';
import { describeDamage, type Damage } from './core/errors.js';
import { ConversationForks } from './core/conversations/conversation-fork.js';
import { ServerStatus } from './core/health/server-status.js';

/** Everything the HTTP layer calls: built once, in one place (the composition root). */
export interface Services {
  config: Config;
  logger: Logger;
  version: string;
  startedAt: number;
  masterKeys: readonly string[];
  toolNames: readonly string[];
  /** Set when the master key was generated or read from the data dir (not from the environment). */
  masterKeyFile: string | null;
  masterKeyCreated: boolean;
  /** How agent processes run (bwrap or none) and their limits. */
  sandbox: SandboxInfo;
  conversations: ConversationService;
  /** The conversation records, their one owner (read by most services). */
  store: ConversationStore;
  agent: AgentRuntime;
  mcp: McpRegistry;
  secrets: SecretService;
  commands: CommandService;
  metrics: Metrics;
  events: EventQueries;
  streams: EventStreams;
  recorder: EventRecorder;
  /** Streaming-only deltas, beside the log. */
  deltas: DeltaChannel;
  callbacks: CallbackService;
  files: WorkspaceFiles;
  /** Workdir checkpoints, rewind and changes. */
  checkpoints: CheckpointService;
  forks: ConversationForks;
  /** Whether the data dir takes writes (out of space, read-only). */
  disk: DiskSpace;
  /** Several instances: who serves each conversation (null on files). */
  ownership: Ownership | null;
  /** Files or PostgreSQL: `durable()` is the barrier every HTTP response waits for. */
  storage: Storage;
  /** Stored data found damaged at start-up and quarantined (kept as found, never written). */
  quarantined(): { conversations: { id: string; damage: Damage }[]; callbacks: { id: string; damage: Damage }[] };
  /** What /health and /info report. */
  status: ServerStatus;
  /** `exiting`: the process exits next; the shells are left to killShellsForExit (see AgentRuntime.stopAll). */
  close(options?: { exiting?: boolean }): Promise<void>;
  /** Every shell made to end with the process, nothing waited for: the last step before it exits (ShellFactory.killAllForExit). */
  killShellsForExit(): void;
}

/** Replacements for the outside world, for tests and benchmarks. */
export interface ServiceOverrides {
  llm?: LlmClient;
  shells?: ShellFactory;
  /** Wraps the server's own shells (`shells`, or else its sandbox's through its spawner): benchmarks time them as they are. */
  wrapShells?: (shells: ShellFactory) => ShellFactory;
  /** More in-process readers of every stored event, after the server's own (benchmarks time appends with one). */
  readers?: readonly EventReader[];
}

export async function composeServices(config: Config, logger: Logger, overrides: ServiceOverrides = {}): Promise<Services> {
  fs.mkdirSync(config.dataDir, { recursive: true, mode: 0o700 });
  fs.mkdirSync(config.workdirBase, { recursive: true });
  // The sandbox probe (a bwrap process or two, mostly waiting) runs while the records load: start-up
  // takes the longer of the two, not their sum. Awaited below, where a failure is thrown.
  const sandboxReady = composeSandbox(config, logger);
  sandboxReady.catch(() => {});
  // So does grep's look for ripgrep (`rg --version`, remembered for composeTools below): spawned
  // from a process that has not yet grown by the records, and waited for beside their load.
  void detectRipgrep();

  let masterKeys = config.masterKeys;
  let masterKeyFile: string | null = null;
  let masterKeyCreated = false;
  if (masterKeys.length === 0) {
    masterKeyFile = path.join(config.dataDir, 'master.key');
    const { key, created } = loadOrCreateKeyFile(masterKeyFile);
    masterKeys = [key];
    masterKeyCreated = created;
  }
  const secretKeyText = config.secretKey ?? loadOrCreateKeyFile(path.join(config.dataDir, 'secret.key')).key;
  const box = new SecretBox(SecretBox.keyFromText(secretKeyText));

  const disk = new DiskSpace(config.dataDir);
  const storageError = (error: unknown) => disk.storageError(error);
  const storage = await composeStorage({
    config,
    logger,
    box,
    storageError,
    onDamaged: (conversationId, error) => {
      if (!store.quarantineFound(conversationId, error)) return;
      // Found in its runs (first read after a clean stop): its log is written no more either, as when found at start-up.
      log.quarantine(conversationId, error);
      logger.error({ conversation_id: conversationId, file: error.path, line: error.damage.line }, `conversation quarantined: ${describeDamage(error.damage)}; its files are kept as found, the others are served`);
    },
  });
  const { log, runs } = storage;
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
  const llm = overrides.llm ?? new OpenAiLlmClient(config.llmClient);
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
    readers: [store.summaryReader, sessions, { name: 'metrics', read: ({ event }) => metrics.observeEvent(event) }, ...(overrides.readers ?? [])],
  });
  const events = new EventQueries(log, (id) => void store.record(id));
  const summaries = storage.summaries;
  // Everything loaded is kept: the young generation need not grow for it (young-generation.ts).
  const saved = await summaries.take();
  for (const { id, error } of await holdingYoungGeneration(() => store.load(saved))) {
    logger.error({ conversation_id: id, file: error.path, line: error.damage.line }, `conversation quarantined: ${describeDamage(error.damage)}; its files are kept as found, the others are served`);
  }
  const { launcher, info: sandbox } = await sandboxReady;
  let ownership: Ownership | null = null;
  const webhooks = await composeWebhooks({ config, logger, log, conversations: store, store: storage.webhooks, version: VERSION, ...(storage.postgres && { owns: (id: string) => ownership?.holds(id) ?? false }) });

  const shellLedger = new ShellLedger(path.join(config.dataDir, 'shells.jsonl'), path.join(config.dataDir, 'shells.json'));
  const reaped = shellLedger.reapOrphans();
  if (reaped > 0) logger.warn({ reaped }, 'stopped shells left running by a previous server process');
  const spawner = new ProcessSpawner();
  const { tools, close: closeTools } = await composeTools(config, launcher, spawner.spawn);
  const ownShells = overrides.shells ?? new BashShellFactory({ launcher, spawn: spawner.spawn, ...config.agentEnv });
  const trackedShells = shellLedger.track(overrides.wrapShells ? overrides.wrapShells(ownShells) : ownShells);
  const workdirs = new HostWorkdirs({ dataDir: config.dataDir, workdirBase: config.workdirBase, ...(config.checkpoints.shared && { checkpointsDir: config.checkpoints.dir }) });
  const warmShells = config.warmShells > 0 && config.idleTimeoutMs > 0 ? composeWarmShells({ config, shells: trackedShells, workdirs, inUse: (workdir) => [...store.all()].some((record) => record.workdir === workdir) }) : null;
  const shells = warmShells?.factory ?? trackedShells;
  const toolNames: readonly string[] = tools.map((tool) => tool.name);
  const commandRunner = new ExecaCommandRunner({ launcher, ...config.agentEnv });
  const hookClient = new UndiciHookClient({ targets: new WebhookTargets({ allowPrivate: config.webhooks.allowPrivate, allowCidrs: config.webhooks.allowCidrs }), userAgent: `agentd/${VERSION}` });
  const projectFiles = new HostProjectFiles();
  const mcp = new McpRegistry({
    projectFiles,
    connector: new SdkMcpConnector({ launcher, targets: new WebhookTargets({ allowPrivate: config.webhooks.allowPrivate, allowCidrs: config.webhooks.allowCidrs }), version: VERSION, ...config.agentEnv }),
    serverDefaults: config.mcpServers,
    secretsOf: (record) => secrets.environment(record),
    sandboxOf: (record) => store.sandboxOf(record),
    mask: (conversationId, text) => secrets.maskText(conversationId, text),
  });
  const pausePoint = testPausePoint(config.testPauseAt, logger);
  const { intents, store: checkpointStore, checkpoints } = composeCheckpoints({
    config,
    logger,
    run: spawner.run,
    deps: { conversations: store, log, recorder, isRunning: (conversationId) => Boolean(sessions.peek(conversationId)?.active), maskText: (conversationId, text) => secrets.maskText(conversationId, text), ...(pausePoint && { pausePoint }) },
  });
  const workdirFs = new NodeWorkdirFileSystem();
  const files = new WorkspaceFiles({ workdirFs, workdirOf: (id) => store.record(id).workdir, maskText: (id, text) => secrets.maskText(id, text) });
  const skillsDir = config.skillsDir;
  const catalogs = new CatalogCache({ stamp: (file) => projectFiles.stamp(file), now: () => Date.now(), server: skillsDir ? workspaceCatalogFiles({ files: new WorkspaceFiles({ workdirFs, workdirOf: () => skillsDir }), key: 'server', root: skillsDir }) : null });
  const agent = new AgentRuntime({
    mcp,
    checkpoints,
    readImage: async (conversationId, imagePath) => {
      const read = await files.readSmallFile(conversationId, imagePath, { maxBytes: MAX_IMAGE_BYTES, tooLarge: (size) => imageTooLarge(size, imagePath) });
      if (!sniffImageType(read.bytes)) throw new Error('not an image any more');
      return read.bytes.toString('base64');
    },
    catalog: (record) =>
      catalogs.load(record.id, {
        project: (record.setting_sources ?? ['project']).includes('project') && mayHoldProjectCatalog(projectFiles, record.workdir) ? workspaceCatalogFiles({ files, key: record.id, root: record.workdir }) : null,
        agents: record.agents,
      }),
    maxSubagentDepth: config.subagentMaxDepth,
    conversations: store,
    sessions,
    recorder,
    runs,
    llm,
    tools,
    workdirFs,
    projectFiles,
    shells,
    shellEnv: (record) => secrets.environment(record),
    idleTimeoutMs: config.idleTimeoutMs,
    // With its shell and history, a released conversation lets go of its event log's open files (else closed a minute after their last use), its checkpoint records and its project catalog.
    onReleased: (conversationId) => {
      log.release?.(conversationId);
      checkpointStore.release(conversationId);
      catalogs.forget(conversationId);
    },
    hookTransport: (record) => ({
      command: async (hook) => {
        const result = await commandRunner.run({ command: hook.command, cwd: record.workdir, workdir: record.workdir, env: { ...secrets.environment(record), CLAUDE_PROJECT_DIR: record.workdir, AGENTD_CONVERSATION_ID: record.id }, timeoutMs: hook.timeoutMs, sandbox: store.sandboxOf(record), stdin: hook.stdin });
        return { exitCode: result.exit_code, stdout: result.stdout, stderr: result.stderr, timedOut: result.timed_out };
      },
      http: (hook) => hookClient.post(hook),
    }),
    onError: (error, context) => logger.error({ err: error, ...context }, 'agent run failed'),
    onLlmRetry: (retry, context) =>
      logger.warn({ ...context, attempt: retry.attempt, code: retry.code, status: retry.status, retry_in_ms: retry.delayMs }, `LLM attempt ${retry.attempt} failed, retrying: ${retry.message}`),
    condenserMaxTokens: config.condenserMaxTokens,
    onRunFailed: (failure, context) => logger.error({ ...context, code: failure.code }, `run ended in agent_error: ${failure.message}`),
  });
  const conversations = new ConversationService({
    readImage: (conversationId, imagePath, options) => files.readSmallFile(conversationId, imagePath, options),
    store,
    workdirs,
    log,
    recorder,
    runtime: agent,
    ...(warmShells && { warmShells }),
    onDeleted: [(conversationId) => secrets.forget(conversationId), (conversationId) => webhooks.callbacks.removeConversation(conversationId), (conversationId) => checkpointStore.forget(conversationId), (conversationId) => checkpoints.forget(conversationId), (_, record) => launcher.forget?.(record.workdir)],
    defaults: {
      llm: config.defaultLlm ? normalizeLlmConfig(config.defaultLlm) : null,
      workdirBase: config.workdirBase,
      toolNames,
      network: config.sandbox.network,
    },
  });
  const commands = new CommandService({ conversations: store, secrets, runner: commandRunner, workdirFs });
  const forks = new ConversationForks({ conversations, store, log, checkpoints, intents, ...(pausePoint && { pausePoint }) });
  if (storage.postgres && config.cluster) {
    // The cluster layer (and its HTTP client) loads only for several instances.
    const { composeOwnership } = await import('./adapters/cluster/index.js');
    ownership = composeOwnership({
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
  const quarantined = () => ({ conversations: store.quarantined(), callbacks: webhooks.damaged() });
  const startedAt = Date.now();

  return {
    config,
    logger,
    version: VERSION,
    startedAt,
    masterKeys,
    toolNames,
    masterKeyFile,
    masterKeyCreated,
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
      limits: {
        max_body_bytes: config.maxBodyBytes,
        max_upload_bytes: config.maxUploadBytes,
        max_page_limit: 1000,
        default_max_iterations_per_run: 500,
        sse_heartbeat_s: config.sseHeartbeatMs / 1000,
        sse_max_buffered_events: config.sseMaxBuffered,
        max_connections: config.connections.max || null,
        max_connections_per_client: config.connections.perClient || null,
      },
      sandbox: sandboxReport(sandbox),
    }),
    ownership,
    killShellsForExit: () => shells.killAllForExit?.(),
    async close(options = {}) {
      await warmShells?.close();
      await agent.stopAll(options);
      // A process about to exit keeps it: it goes with the process, and takes the shells with it.
      if (!options.exiting) spawner.close();
      shellLedger.close();
      await ownership?.close();
      await webhooks.close();
      await hookClient.close();
      await closeTools();
      streams.closeAll('server_shutting_down');
      await storage.close();
      checkpointStore.close();
      metrics.stop();
      // The next start reads no logs: each conversation's summary is saved once nothing appends any
      // more; and (files) no record file: the records in one snapshot, with the summaries (then
      // summaries.json only names that snapshot).
      const held = store.summaries();
      const inSnapshot = await storage.repository.saveSnapshot?.(store.all(), held).catch((error: unknown) => {
        logger.warn({ err: error }, 'conversation records snapshot not saved: the next start reads each record');
        return undefined;
      });
      await summaries.save(held, inSnapshot === undefined ? {} : { inSnapshot }).catch((error: unknown) => logger.warn({ err: error }, 'conversation summaries not saved: the next start reads each log'));
    },
  };
}
