import { z } from 'zod';
import { Timestamp } from '../schemas/common.js';
import { AgentEvent, EventKind } from '../schemas/event.js';

/** The HTTP shapes of callbacks (webhook subscriptions) and of their delivery log. */

export const CallbackState = z
  .enum(['active', 'failing'])
  .describe('`failing`: retries ran out on one event; nothing more is sent until `POST .../enable`.')
  .meta({ id: 'CallbackState' });
export type CallbackState = z.infer<typeof CallbackState>;

export const CallbackOrigin = z
  .enum(['api', 'server'])
  .describe('`api`: created with POST /conversations/{id}/callbacks; `server`: configured by AGENTD_WEBHOOK_URLS for every conversation.')
  .meta({ id: 'CallbackOrigin' });
export type CallbackOrigin = z.infer<typeof CallbackOrigin>;

export const Callback = z
  .object({
    id: z.uuid(),
    conversation_id: z.uuid(),
    owner: z.string().nullable().describe("The owner of its conversation (read-only)."),
    url: z.string(),
    events: z.array(EventKind).nullable().describe('Only these kinds are sent; null: every kind.'),
    has_secret: z.boolean().describe('Deliveries carry `webhook-signature`. The secret itself is never shown.'),
    origin: CallbackOrigin,
    state: CallbackState,
    failing_since: Timestamp.nullable(),
    created_at: Timestamp,
    cursor_seq: z.int().min(0).describe('Every event up to this seq was delivered (or skipped by the `events` filter).'),
    pending_count: z.int().min(0).describe('Events after the cursor waiting to be delivered (the one being retried included).'),
    delivered_count: z.int().min(0),
    failed_attempt_count: z.int().min(0).describe('Attempts that got a non-2xx status, a timeout or a connection error.'),
    last_delivered_at: Timestamp.nullable(),
    last_error: z.string().nullable().describe('What went wrong on the latest failed attempt.'),
  })
  .meta({ id: 'Callback' });
export type Callback = z.infer<typeof Callback>;

export const CreateCallbackBody = z
  .object({
    url: z.string().min(1).max(2048).describe('An http(s) URL; redirects are not followed.'),
    events: z.array(EventKind).min(1).optional().describe('Only send these kinds (default: every kind).'),
    secret: z
      .string()
      .min(1)
      .max(1024)
      .optional()
      .describe('Signing secret: `whsec_<base64>` (Standard Webhooks) or any string (its UTF-8 bytes). Never shown again.'),
    from: z
      .enum(['start', 'now'])
      .optional()
      .describe('`start` (default): the conversation\'s whole history is delivered first, from seq 1, then new events; `now`: only events appended after the callback is created.'),
    after_seq: z.int().min(0).optional().describe('Start after this seq instead (cannot be combined with `from: "now"`).'),
  })
  .strict()
  .refine((body) => !(body.from === 'now' && body.after_seq !== undefined), { message: '`from: "now"` and `after_seq` cannot be combined', path: ['from'] })
  .meta({ id: 'CreateCallbackBody' });
export type CreateCallbackBody = z.infer<typeof CreateCallbackBody>;

export const DeliveryState = z
  .enum(['pending', 'delivered', 'retrying', 'failed'])
  .describe('`failed`: retries ran out and the callback is `failing`; it is sent again after `enable`.')
  .meta({ id: 'DeliveryState' });
export type DeliveryState = z.infer<typeof DeliveryState>;

export const CallbackDelivery = z
  .object({
    event_id: z.uuid(),
    seq: z.int().min(1),
    kind: EventKind,
    state: DeliveryState,
    attempts: z.int().min(0),
    last_status: z.int().nullable().describe('HTTP status of the latest attempt; null before any or when no response came.'),
    last_error: z.string().nullable(),
    last_attempt_at: Timestamp.nullable(),
    next_retry_at: Timestamp.nullable(),
  })
  .meta({ id: 'CallbackDelivery' });
export type CallbackDelivery = z.infer<typeof CallbackDelivery>;

/** The body of every webhook delivery (the delivery worker writes exactly this shape). Named in the AsyncAPI document. */
export const WebhookPayload = z.object({ conversation_id: z.uuid(), event: AgentEvent });

/** The Standard Webhooks headers of a delivery. */
export const WebhookHeaders = z
  .looseObject({
    'webhook-id': z.uuid().describe('The event id: the same on every retry of that event; deduplicate on it.'),
    'webhook-timestamp': z.string().regex(/^\d+$/).describe('Unix seconds when this attempt was signed.'),
    'webhook-signature': z
      .string()
      .optional()
      .describe('`v1,<base64 HMAC-SHA256 of "<webhook-id>.<webhook-timestamp>.<body>">` when the callback has a secret; `whsec_` secrets sign with their base64-decoded bytes.'),
    'content-type': z.literal('application/json'),
    'user-agent': z.string().describe('`agentd/<version>`.'),
  });
