import type { AccessServices } from '../core/access/access-services.js';
import type { AgentRuntime } from '../core/agent/agent-runtime.js';
import type { CheckpointService } from '../core/checkpoints/checkpoint-service.js';
import type { CommandService } from '../core/commands/command-service.js';
import type { ConversationForks } from '../core/conversations/conversation-fork.js';
import type { ConversationService } from '../core/conversations/conversation-service.js';
import type { ConversationStore } from '../core/conversations/conversation-store.js';
import type { EventQueries } from '../core/events/event-queries.js';
import type { EventStreams } from '../core/events/event-streams.js';
import type { ServerStatus } from '../core/health/server-status.js';
import type { McpRegistry } from '../core/mcp/mcp-registry.js';
import type { SecretService } from '../core/secrets/secret-service.js';
import type { CallbackService } from '../core/webhooks/callback-service.js';
import type { WorkspaceFiles } from '../core/workspace/workspace-files.js';
import type { ScheduleService } from '../core/schedules/schedule-service.js';

/** The settings the routes read; the server's whole config satisfies it. */
export interface HttpSettings {
  maxBodyBytes: number;
  maxUploadBytes: number;
  publicMetrics: boolean;
}

/** Prometheus's registry as the metrics route reads it. */
export interface MetricsText {
  registry: { metrics(): Promise<string>; contentType: string };
}

/** What the routes call: declared here so that http/ depends on core/ and on nothing that wires it. */
export interface HttpServices {
  config: HttpSettings;
  version: string;
  conversations: ConversationService;
  store: ConversationStore;
  agent: AgentRuntime;
  mcp: McpRegistry;
  secrets: SecretService;
  commands: CommandService;
  metrics: MetricsText;
  events: EventQueries;
  streams: EventStreams;
  callbacks: CallbackService;
  files: WorkspaceFiles;
  checkpoints: CheckpointService;
  forks: ConversationForks;
  schedules: ScheduleService;
  status: ServerStatus;
  access: AccessServices;
}
