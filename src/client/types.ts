/**
 * The client's types, derived from the server's own zod schemas (type-only imports: nothing of
 * the server, not even zod, reaches a client bundle). Request types are what the server accepts
 * (`z.input`), answers what it sends (`z.output`); query strings are their parsed shape, made
 * optional, which the client writes back as strings.
 */
import type { z } from 'zod';
import type { Run as RunSchema } from '../core/agent/run-record.js';
import type { RunCommandBody, CommandResult as CommandResultSchema } from '../core/commands/command-runner.js';
import type { CountResponse, ErrorResponse, PageQuery as PageQuerySchema } from '../core/schemas/common.js';
import type {
  Conversation as ConversationSchema,
  CreateConversationBody,
  PendingAction as PendingActionSchema,
  PostMessageBody,
  UpdateConversationConfigBody,
  Usage as UsageSchema,
  CondenseAccepted as CondenseAcceptedSchema,
  CondenseBody,
} from '../core/schemas/conversation.js';
import type { AgentEvent as AgentEventSchema, ConversationStatus as StatusSchema, EventKind as EventKindSchema, MessageDelta as MessageDeltaSchema, ReasoningDelta as ReasoningDeltaSchema } from '../core/schemas/event.js';
import type { FileEntry as FileEntrySchema } from '../core/schemas/file-entry.js';
import type { McpStatusList as McpStatusListSchema } from '../core/schemas/mcp-servers.js';
import type { SkillCatalog as SkillCatalogSchema } from '../core/schemas/catalog.js';
import type { Callback as CallbackSchema, CallbackDelivery as CallbackDeliverySchema, CreateCallbackBody } from '../core/webhooks/callback-schemas.js';
import type { CallbackDeliveryPage, CallbackPage } from '../http/contract/callbacks.js';
import type { ApiKey as ApiKeySchema, CreateKeyBody, CreatedApiKey as CreatedApiKeySchema, RotateKeyBody, UpdateKeyBody } from '../core/access/api-key.js';
import type { AuditEntry as AuditEntrySchema } from '../core/access/audit-log.js';
import type { AuditQuery as AuditQuerySchema, KeyListQuery as KeyListQuerySchema } from '../http/contract/keys.js';
import type {
  CreateConversationScheduleBody,
  CreateScheduleBody,
  ListSchedulesQuery,
  Preview as PreviewSchema,
  PreviewQuery,
  Schedule as ScheduleSchema,
  ScheduleFire as ScheduleFireSchema,
  UpdateScheduleBody,
} from '../core/schedules/schedule-schemas.js';
import type { ConversationListQuery as ConversationListQuerySchema, ConversationPage as ConversationPageSchema, DeleteConversationQuery } from '../http/contract/conversations.js';
import type { EventFilters as EventFiltersSchema, EventListQuery as EventListQuerySchema, EventPage as EventPageSchema } from '../http/contract/events.js';
import type { FileEntryPage, FileListQuery as FileListQuerySchema, FileSearchQuery as FileSearchQuerySchema, UploadedFiles as UploadedFilesSchema } from '../http/contract/files.js';
import type { Alive as AliveSchema, Health as HealthSchema, Info as InfoSchema } from '../http/contract/health.js';
import type { AnswerAccepted as AnswerAcceptedSchema, AnswerBody, MessageAccepted as MessageAcceptedSchema, RejectBody, RunListQuery as RunListQuerySchema, RunPage as RunPageSchema, RunStarted as RunStartedSchema } from '../http/contract/runs.js';
import type { PutSecrets, SecretNames as SecretNamesSchema } from '../http/contract/secrets.js';
import type {
  ChangesPage as ChangesPageSchema,
  ChangesQuery as ChangesQuerySchema,
  Checkpoint as CheckpointSchema,
  CheckpointListQuery as CheckpointListQuerySchema,
  CheckpointPage as CheckpointPageSchema,
  FileChange as FileChangeSchema,
  ForkBody,
  RewindBody,
  RewindResult as RewindResultSchema,
} from '../core/checkpoints/checkpoint-schemas.js';

/** Every field optional: the server fills in its defaults. */
type QueryOf<T extends z.ZodType> = Partial<z.output<T>>;

export type ErrorBody = z.output<typeof ErrorResponse>;
export type Count = z.output<typeof CountResponse>;
export type Page<T> = { items: T[]; next_page_id: string | null };
export type PageQuery = QueryOf<typeof PageQuerySchema>;

export type Alive = z.output<typeof AliveSchema>;
export type Health = z.output<typeof HealthSchema>;
export type Info = z.output<typeof InfoSchema>;

export type Conversation = z.output<typeof ConversationSchema>;
export type ConversationStatus = z.output<typeof StatusSchema>;
export type PendingAction = z.output<typeof PendingActionSchema>;
export type Usage = z.output<typeof UsageSchema>;
export type CreateConversationInput = z.input<typeof CreateConversationBody>;
export type UpdateConversationConfigInput = z.input<typeof UpdateConversationConfigBody>;
export type ConversationListQuery = QueryOf<typeof ConversationListQuerySchema>;
export type ConversationPage = z.output<typeof ConversationPageSchema>;
export type DeleteConversationOptions = QueryOf<typeof DeleteConversationQuery>;

export type SendMessageInput = z.input<typeof PostMessageBody>;
export type MessageAccepted = z.output<typeof MessageAcceptedSchema>;
export type RunStarted = z.output<typeof RunStartedSchema>;
export type CondenseInput = z.input<typeof CondenseBody>;
export type CondenseAccepted = z.output<typeof CondenseAcceptedSchema>;
export type RejectInput = z.input<typeof RejectBody>;
export type AnswerInput = z.input<typeof AnswerBody>;
export type AnswerAccepted = z.output<typeof AnswerAcceptedSchema>;
export type Run = z.output<typeof RunSchema>;
export type RunListQuery = QueryOf<typeof RunListQuerySchema>;
export type RunPage = z.output<typeof RunPageSchema>;

export type AgentEvent = z.output<typeof AgentEventSchema>;
export type EventKind = z.output<typeof EventKindSchema>;
export type EventOf<K extends EventKind> = Extract<AgentEvent, { kind: K }>;
export type MessageDelta = z.output<typeof MessageDeltaSchema>;
/** A piece of the model's reasoning as it streams (never stored; its whole text is the `reasoning` event). */
export type ReasoningDelta = z.output<typeof ReasoningDeltaSchema>;
/** What a conversation's stream carries: persisted events (with a seq) and streamed text and reasoning deltas. */
export type StreamEvent = AgentEvent | MessageDelta | ReasoningDelta;
export type EventListQuery = QueryOf<typeof EventListQuerySchema>;
export type EventFilters = QueryOf<typeof EventFiltersSchema>;
export type EventPage = z.output<typeof EventPageSchema>;

export type Callback = z.output<typeof CallbackSchema>;
export type CallbackDelivery = z.output<typeof CallbackDeliverySchema>;
export type CreateCallbackInput = z.input<typeof CreateCallbackBody>;
export type CallbackList = z.output<typeof CallbackPage>;
export type CallbackDeliveryList = z.output<typeof CallbackDeliveryPage>;

export type Schedule = z.output<typeof ScheduleSchema>;
export type ScheduleFire = z.output<typeof ScheduleFireSchema>;
export type CreateScheduleInput = z.input<typeof CreateScheduleBody>;
export type CreateConversationScheduleInput = z.input<typeof CreateConversationScheduleBody>;
export type UpdateScheduleInput = z.input<typeof UpdateScheduleBody>;
export type ScheduleListQuery = QueryOf<typeof ListSchedulesQuery>;
export type ScheduleList = { items: Schedule[]; next_page_id: string | null };
export type ScheduleFireList = { items: ScheduleFire[]; next_page_id: string | null };
export type SchedulePreviewQuery = QueryOf<typeof PreviewQuery>;
export type SchedulePreview = z.output<typeof PreviewSchema>;
export type ApiKey = z.output<typeof ApiKeySchema>;
/** A key as created or rotated: its secret, answered this once. */
export type CreatedApiKey = z.output<typeof CreatedApiKeySchema>;
export type CreateKeyInput = z.input<typeof CreateKeyBody>;
export type UpdateKeyInput = z.input<typeof UpdateKeyBody>;
export type RotateKeyInput = z.input<typeof RotateKeyBody>;
export type KeyListQuery = QueryOf<typeof KeyListQuerySchema>;
export type KeyList = { items: ApiKey[]; next_page_id: string | null };
export type AuditEntry = z.output<typeof AuditEntrySchema>;
export type AuditQuery = QueryOf<typeof AuditQuerySchema>;
export type AuditList = { items: AuditEntry[]; next_page_id: string | null };

export type FileEntry = z.output<typeof FileEntrySchema>;
export type FileList = z.output<typeof FileEntryPage>;
export type FileListQuery = QueryOf<typeof FileListQuerySchema>;
export type FileSearchQuery = QueryOf<typeof FileSearchQuerySchema> & { pattern: string };
export type UploadedFiles = z.output<typeof UploadedFilesSchema>;

export type RunCommandInput = z.input<typeof RunCommandBody>;
export type CommandResult = z.output<typeof CommandResultSchema>;

export type PutSecretsInput = z.input<typeof PutSecrets>;
export type SecretNames = z.output<typeof SecretNamesSchema>;

export type McpStatusList = z.output<typeof McpStatusListSchema>;
export type SkillCatalog = z.output<typeof SkillCatalogSchema>;

export type Checkpoint = z.output<typeof CheckpointSchema>;
export type CheckpointListQuery = QueryOf<typeof CheckpointListQuerySchema>;
export type CheckpointPage = z.output<typeof CheckpointPageSchema>;
export type RewindInput = z.input<typeof RewindBody>;
export type RewindResult = z.output<typeof RewindResultSchema>;
export type FileChange = z.output<typeof FileChangeSchema>;
export type ChangesQuery = QueryOf<typeof ChangesQuerySchema>;
export type ChangesPage = z.output<typeof ChangesPageSchema>;
export type ForkInput = z.input<typeof ForkBody>;
