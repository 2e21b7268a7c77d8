import fs from 'node:fs';
import path from 'node:path';
import type { Logger } from 'pino';
import type { Config } from './config.js';
import { FileConversationRepository } from './adapters/file-conversation-repository.js';
import { FileEventLog } from './adapters/file-event-log/file-event-log.js';
import { loadOrCreateKeyFile } from './adapters/key-file.js';
import { ConversationService } from './core/conversations/conversation-service.js';
import { EventBus } from './core/events/event-bus.js';
import { EventQueries } from './core/events/event-queries.js';
import { EventRecorder } from './core/events/event-recorder.js';
import { EventStreams } from './core/events/event-streams.js';
import { SecretBox } from './core/secrets/secret-box.js';
import { normalizeLlmConfig } from './core/schemas/llm-config.js';
import { VERSION } from './version.js';

export const BUILTIN_TOOL_NAMES = ['bash', 'file_editor', 'glob', 'grep', 'task_tracker', 'finish'] as const;

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
  conversations: ConversationService;
  events: EventQueries;
  streams: EventStreams;
  recorder: EventRecorder;
  bus: EventBus;
  close(): Promise<void>;
}

export async function composeServices(config: Config, logger: Logger): Promise<Services> {
  fs.mkdirSync(config.dataDir, { recursive: true, mode: 0o700 });
  fs.mkdirSync(config.workdirBase, { recursive: true });

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

  const conversationsDir = path.join(config.dataDir, 'conversations');
  const log = new FileEventLog({ conversationsDir, firehoseFile: path.join(config.dataDir, 'firehose.idx'), fsync: config.fsync });
  const bus = new EventBus();
  const recorder = new EventRecorder(log, bus);
  const conversations = new ConversationService({
    repository: new FileConversationRepository(conversationsDir, box, { fsync: config.fsync }),
    log,
    recorder,
    defaults: {
      llm: config.defaultLlm ? normalizeLlmConfig(config.defaultLlm) : null,
      workdirBase: config.workdirBase,
      dataDir: config.dataDir,
      toolNames: BUILTIN_TOOL_NAMES,
    },
  });
  const events = new EventQueries(log, (id) => void conversations.record(id));
  const streams = new EventStreams({ log, bus, maxBuffered: config.sseMaxBuffered });
  await conversations.load();

  return {
    config,
    logger,
    version: VERSION,
    startedAt: Date.now(),
    masterKeys,
    toolNames: BUILTIN_TOOL_NAMES,
    masterKeyFile,
    masterKeyCreated,
    conversations,
    events,
    streams,
    recorder,
    bus,
    async close() {
      streams.closeAll('server_shutting_down');
      log.close();
    },
  };
}
