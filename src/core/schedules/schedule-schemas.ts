import { z } from 'zod';
import { PageQuery, Timestamp } from '../schemas/common.js';
import { NewSandboxSettings } from '../schemas/conversation.js';
import { MultitaskStrategy } from '../schemas/event.js';
import { LlmConfigInput } from '../schemas/llm-config.js';
import { MessageContent } from '../schemas/message-content.js';
import { Permissions, SettingSources } from '../schemas/tool-control.js';

const JsonObject = z.record(z.string(), z.unknown());
const Metadata = JsonObject.refine((value) => Buffer.byteLength(JSON.stringify(value)) <= 16 * 1024, { message: 'metadata is larger than 16 KiB as JSON' });

/** LLM settings a schedule keeps: no key (a schedule stores no secret; the server's default key is used). */
export const ScheduleLlm = LlmConfigInput.omit({ api_key: true }).meta({ id: 'ScheduleLlm', description: 'LLM settings without `api_key`: a schedule stores no secret (the server\'s default key applies).' });

export const ScheduleStatus = z
  .enum(['active', 'paused', 'completed', 'failing'])
  .describe('`completed`: past `end_at` or `max_fires`; `failing`: cannot fire any more (`status_reason` says why, e.g. `target_gone`).')
  .meta({ id: 'ScheduleStatus' });
export type ScheduleStatus = z.infer<typeof ScheduleStatus>;

export const Overlap = z
  .enum(['skip', 'enqueue_one', 'interrupt', 'allow'])
  .describe(
    'When the target is still running at a fire. `skip` (default): the fire is recorded `skipped_overlap`. `enqueue_one`: the message is queued into the running run (at most one fire queued per run; more are skipped). `interrupt`: the running run is interrupted and takes the message. `allow`: the message is queued into the running run every time (with `new`, a new conversation starts regardless).',
  )
  .meta({ id: 'ScheduleOverlap' });
export type Overlap = z.infer<typeof Overlap>;

export const ScheduleMessage = z
  .object({
    content: MessageContent,
    llm: ScheduleLlm.optional().describe('With a `new` target: the LLM of each fire\'s conversation (over the template\'s).'),
    tools: z.array(z.string().min(1).max(64)).max(64).optional().describe('With a `new` target: the tools of each fire\'s conversation.'),
    output_schema: JsonObject.optional().describe('A JSON Schema each fire\'s run must answer with (the run\'s `output`).'),
  })
  .strict()
  .meta({ id: 'ScheduleMessage' });

export const ConversationTemplate = z
  .object({
    title: z.string().max(500).optional(),
    llm: ScheduleLlm.optional(),
    tools: z.array(z.string().min(1).max(64)).max(64).optional(),
    workdir: z.string().min(1).max(4096).optional().describe('Absolute path shared by every fire; default: a fresh dir per fire.'),
    max_iterations_per_run: z.int().min(1).max(100_000).optional(),
    sandbox: NewSandboxSettings.optional(),
    permissions: Permissions.optional(),
    setting_sources: SettingSources.optional(),
    multitask_strategy: MultitaskStrategy.optional(),
    metadata: Metadata.optional(),
    on_complete: z.enum(['keep', 'delete']).default('keep').describe('`delete`: each fire\'s conversation is deleted once its run has ended.'),
  })
  .strict()
  .describe('Each fire starts a new conversation made from this template (it carries `metadata.schedule_id` and `metadata.fire_id`).')
  .meta({ id: 'ConversationTemplate' });
export type ConversationTemplate = z.infer<typeof ConversationTemplate>;

export const Catchup = z
  .object({
    window_s: z.int().min(0).max(366 * 86_400).default(3600),
    max: z.int().min(0).max(1000).default(1),
  })
  .strict()
  .describe('After downtime: at most `max` of the newest missed slots within `window_s` fire; the others are recorded `skipped_missed`. Default: one slot within an hour.')
  .meta({ id: 'ScheduleCatchup' });

export const Dst = z
  .object({
    gap: z.enum(['shift', 'skip']).default('shift').describe('A wall-clock time the clocks skip (spring forward): `shift` fires at the same time on the new offset (02:30 → 03:30), `skip` not at all that day.'),
    repeat: z.enum(['once', 'both']).default('once').describe('A wall-clock time that happens twice (fall back): `once` fires at the first, `both` at each.'),
  })
  .strict()
  .meta({ id: 'ScheduleDst' });

const settings = {
  overlap: Overlap,
  catchup: Catchup,
  dst: Dst,
  jitter_s: z.int().min(0).max(86_400).describe('Each fire starts up to this many seconds after its slot (fixed per slot, derived from its id).'),
  start_at: Timestamp.nullable().describe('No slot before this instant (`every` counts from it).'),
  end_at: Timestamp.nullable().describe('No slot after this instant: the schedule is then `completed`.'),
  max_fires: z.int().min(1).nullable().describe('After this many scheduled fires started, the schedule is `completed` (manual triggers are not counted).'),
  pause_after_failures: z.int().min(1).nullable().describe('After this many failed fires in a row (a fire that could not start, or whose run failed), the schedule pauses itself.'),
  metadata: Metadata,
};

export const CreateScheduleBody = z
  .object({
    cron: z.string().min(1).max(256).optional().describe('5 fields (minute hour day month weekday), 6 (seconds first), or a name such as `@hourly`, `@daily`, `@weekly`.'),
    every: z.string().min(2).max(64).optional().describe('An ISO 8601 duration: hours, minutes, seconds (`PT1H`, elapsed time) or days, weeks (`P1D`, the same wall-clock time).'),
    timezone: z.string().min(1).max(64).optional().describe('IANA time zone of the cron pattern and of `every` in days (default AGENTD_SCHEDULE_TIMEZONE, else UTC).'),
    message: ScheduleMessage,
    conversation_id: z.uuid().optional().describe('The conversation each fire sends the message to.'),
    new: ConversationTemplate.optional(),
    overlap: settings.overlap.default('skip'),
    catchup: Catchup.default({ window_s: 3600, max: 1 }),
    dst: Dst.default({ gap: 'shift', repeat: 'once' }),
    jitter_s: settings.jitter_s.default(0),
    start_at: Timestamp.optional(),
    end_at: Timestamp.optional(),
    max_fires: z.int().min(1).optional(),
    pause_after_failures: z.int().min(1).optional(),
    metadata: Metadata.optional(),
  })
  .strict()
  .meta({ id: 'CreateSchedule' });
export type CreateScheduleBody = z.infer<typeof CreateScheduleBody>;

/** The shortcut POST /conversations/{id}/schedules: the target is that conversation. */
export const CreateConversationScheduleBody = CreateScheduleBody.omit({ conversation_id: true, new: true }).meta({ id: 'CreateConversationSchedule' });

export const UpdateScheduleBody = z
  .object({
    cron: z.string().min(1).max(256).nullable().optional(),
    every: z.string().min(2).max(64).nullable().optional(),
    timezone: z.string().min(1).max(64).optional(),
    message: ScheduleMessage.optional(),
    overlap: Overlap.optional(),
    catchup: Catchup.optional(),
    dst: Dst.optional(),
    jitter_s: settings.jitter_s.optional(),
    start_at: Timestamp.nullable().optional(),
    end_at: Timestamp.nullable().optional(),
    max_fires: z.int().min(1).nullable().optional(),
    pause_after_failures: z.int().min(1).nullable().optional(),
    metadata: Metadata.optional(),
  })
  .strict()
  .describe('The fields to change (the target cannot change). Setting `cron` clears `every` and the other way round.')
  .meta({ id: 'UpdateSchedule' });
export type UpdateScheduleBody = z.infer<typeof UpdateScheduleBody>;

export const FireOutcome = z.enum(['started', 'skipped_overlap', 'skipped_missed', 'skipped_paused', 'failed']).meta({ id: 'FireOutcome' });
export type FireOutcome = z.infer<typeof FireOutcome>;

export const ScheduleFire = z
  .object({
    id: z.uuid().describe('Derived from the schedule and the slot: the same slot has the same id on every instance, so it starts at most once.'),
    schedule_id: z.uuid(),
    scheduled_for: Timestamp.describe('The slot (a manual trigger: when it was asked for).'),
    fired_at: Timestamp.nullable().describe('When the fire was handled (null while it is being claimed and started).'),
    manual: z.boolean().describe('Started by POST /schedules/{id}/trigger.'),
    outcome: FireOutcome.nullable().describe('null only between its claim and its start (finished by whoever recovers it after a crash).'),
    reason: z.string().nullable(),
    run_id: z.uuid().nullable(),
    conversation_id: z.uuid().nullable(),
  })
  .meta({ id: 'ScheduleFire' });
export type ScheduleFire = z.infer<typeof ScheduleFire>;

export const Schedule = z
  .object({
    id: z.uuid(),
    cron: z.string().nullable(),
    every: z.string().nullable(),
    timezone: z.string(),
    message: ScheduleMessage,
    conversation_id: z.uuid().nullable().describe('The target conversation (null with `new`).'),
    new: ConversationTemplate.nullable(),
    ...settings,
    owner: z.string().nullable().describe('Who the schedule belongs to: the owner of the key that created it (read-only; a `new` target\'s conversations get it too; null for schedules from before owners).'),
    status: ScheduleStatus,
    status_reason: z.string().nullable().describe('Why the schedule is `paused` (the note), `failing` (`target_gone`, …) or `completed` (`end_at`, `max_fires`).'),
    next_fire_at: Timestamp.nullable().describe('When the next slot fires (jitter included); null when nothing will fire.'),
    fires_count: z.int().min(0).describe('Scheduled fires started so far (counted against `max_fires`).'),
    consecutive_failures: z.int().min(0).describe('Failed fires in a row: fires that could not start and fires whose run ended in error (counted once the run has ended); a run that ends otherwise resets it.'),
    last_fire_at: Timestamp.nullable(),
    last_outcome: FireOutcome.nullable(),
    created_at: Timestamp,
    updated_at: Timestamp,
  })
  .meta({ id: 'Schedule' });
export type Schedule = z.infer<typeof Schedule>;

export const ListSchedulesQuery = PageQuery.extend({
  conversation_id: z.uuid().optional(),
  status: ScheduleStatus.optional(),
  owner: z.string().min(1).max(200).optional().describe("An admin key's filter: only this owner's schedules (other keys see only their own owner's)."),
});
export type ListSchedulesQuery = z.infer<typeof ListSchedulesQuery>;

export const PreviewQuery = z.object({
  cron: z.string().min(1).max(256).optional(),
  every: z.string().min(2).max(64).optional(),
  timezone: z.string().min(1).max(64).optional(),
  count: z.coerce.number().int().min(1).max(100).default(5),
  gap: z.enum(['shift', 'skip']).default('shift'),
  repeat: z.enum(['once', 'both']).default('once'),
});
export const Preview = z
  .object({ timezone: z.string(), next: z.array(Timestamp) })
  .meta({ id: 'SchedulePreview' });

export const PauseScheduleBody = z.object({ note: z.string().max(1000).optional() }).strict().meta({ id: 'PauseSchedule' });
