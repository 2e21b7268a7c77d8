import { z } from 'zod';
import { Usage, UsageCounts } from '../core/schemas/usage.js';
import { WebhookHeaders, WebhookPayload } from '../core/webhooks/callback-schemas.js';
import { AgentEvent, ConversationStatus, EVENT_KINDS, EventKind, EventSource, MessageDelta, MultitaskStrategy, ReasoningDelta, StreamClosedNotice, StreamOverflowNotice } from '../core/schemas/event.js';

/**
 * The AsyncAPI 3.0 document of what agentd pushes: the SSE streams and the webhook deliveries.
 * Payloads come from the same zod schemas as the OpenAPI document (core/schemas/event.ts and
 * the callback schemas); this file only arranges them into channels, messages and operations.
 */

const STREAM_DESCRIPTION = [
  'Server-Sent Events (`Content-Type: text/event-stream`). Each persisted event is one SSE message:',
  '`id: <cursor>`, `event: <kind>`, `data: <the event as JSON>`. On a conversation\'s stream the cursor is the event\'s `seq`',
  '(1, 2, 3… with no gaps); on the firehose it is a global cursor over every conversation.',
  'A new subscriber first receives every event after its start cursor (default 0: the whole history), in order, then live events.',
  'To resume after a drop, reconnect with the header `Last-Event-ID: <last id received>` (browsers\' EventSource does it by itself)',
  'or `?after_seq=<cursor>`: every event after it arrives, in order, with no duplicates. `Last-Event-ID` wins over `after_seq`.',
  'The stream starts with `retry: 2000` and sends a comment line (`:`) as a heartbeat at least every AGENTD_SSE_HEARTBEAT_S seconds (15 by default).',
  '`message_delta`, `reasoning_delta`, `stream_overflow` and `stream_closed` carry no `id`: they are never stored and do not move the cursor.',
  'Authenticate with `Authorization: Bearer <key>`, or `?access_token=<key>` where headers cannot be set (EventSource).',
].join(' ');

const WEBHOOK_DESCRIPTION = [
  'Each event is POSTed as JSON `{"conversation_id", "event"}` to the callback URL, in `seq` order per callback:',
  'event N+1 is not sent before event N was answered with a 2xx. Anything else (redirects included), a timeout or a connection',
  'error is retried with exponential backoff and jitter for at least AGENTD_WEBHOOK_RETRY_WINDOW_S (24 h by default), then the',
  'callback is marked `failing` until `POST /conversations/{id}/callbacks/{callback_id}/enable`. Pending deliveries survive restarts.',
  'A callback created with `from: "start"` (the default) first receives the conversation\'s whole history from seq 1;',
  '`from: "now"` only events appended after it was created; `after_seq: N` events after seq N. `events` filters by kind.',
  'Headers follow Standard Webhooks (https://www.standardwebhooks.com/): `webhook-id` (the event id: deduplicate on it),',
  '`webhook-timestamp` and, with a secret, `webhook-signature`.',
].join(' ');

const KIND_SUMMARIES: Record<EventKind, string> = {
  system_prompt: 'The system prompt and the tool schemas sent to the LLM (first event of a conversation).',
  message: 'A user message or an assistant answer.',
  action: 'A tool call the agent made (with the assistant text of that turn).',
  observation: 'A tool call\'s result: the text the LLM sees and tool-specific data.',
  rejection: 'A tool call was not run: the user rejected it, a permission rule denied it, or a hook blocked it.',
  state_update: 'The conversation\'s status changed.',
  agent_error: 'A run ended on an error (e.g. the LLM failed after its retries).',
  usage: 'Tokens and cost of one LLM call, with the conversation\'s totals.',
  condensation: 'Older events were summarized and are no longer sent to the LLM.',
  hook: 'A lifecycle hook ran (its point, what it decided, how long it took).',
  rewind: 'The workdir and/or the LLM history went back to a checkpoint (POST /rewind); the log keeps every event.',
  fork: 'First event a fork records itself: the parent conversation and the seq its copied events end at.',
  question: 'The agent asked the user a question (`ask_user`): the run waits until POST /answer or a message answers it.',
  interrupt: 'A message sent with multitask_strategy `interrupt` stopped the current tool call or LLM turn of the run.',
  rollback: 'A message sent with multitask_strategy `rollback` canceled the run: its events left the LLM history (they stay in the log).',
  reasoning: 'What the model reasoned before its answer or its calls (masked; `provider_data` is opaque and sent back to the provider as it came).',
  mcp_refused: 'An MCP server was not connected to because a policy refused it (the conversation has no network, or the address is private); its tools are missing for the run.',
  llm_fallback: 'A request moved to the next model of `llm.fallbacks`: the previous one failed (or is cooling down after failing).',
  llm_retry: 'A failed LLM request is tried again on the same model after `wait_s`.',
  budget_exceeded: 'The run or the conversation reached its `budget`: the run paused, stopped, or went on (notify).',
  schedule_fire: 'A schedule fired into this conversation: its message follows (GET /schedules/{id}/fires has the fire\'s outcome).',
};

/** Schemas named only here (a global meta id would put them in the OpenAPI document too). */
const LOCAL_IDS = new Map<z.ZodType, string>([
  [MessageDelta, 'MessageDelta'],
  [ReasoningDelta, 'ReasoningDelta'],
  [StreamOverflowNotice, 'StreamOverflowNotice'],
  [StreamClosedNotice, 'StreamClosedNotice'],
  [WebhookPayload, 'WebhookPayload'],
  [WebhookHeaders, 'WebhookHeaders'],
]);

function schemaId(schema: z.ZodType): string {
  const id = LOCAL_IDS.get(schema) ?? z.globalRegistry.get(schema)?.id;
  if (typeof id !== 'string') throw new Error('every schema in the AsyncAPI document needs an id');
  return id;
}

/** JSON Schema (draft-07, the AsyncAPI schema format's base) for each named schema, with `$ref`s between them. */
function componentSchemas(): Record<string, unknown> {
  const registry = z.registry<{ id: string }>();
  const named = [...AgentEvent.options, AgentEvent, ConversationStatus, EventSource, EventKind, MultitaskStrategy, Usage, UsageCounts, ...LOCAL_IDS.keys()];
  for (const schema of named) registry.add(schema, { id: schemaId(schema) });
  const { schemas } = z.toJSONSchema(registry, { target: 'draft-7', uri: (id) => `#/components/schemas/${id}` });
  if ('__shared' in schemas) throw new Error(`schemas without an id are shared: ${Object.keys((schemas.__shared as { definitions?: object }).definitions ?? {}).join(', ')}`);
  return Object.fromEntries(
    Object.entries(schemas).map(([id, schema]) => {
      const { $schema: _schema, $id: _id, ...rest } = schema as Record<string, unknown>;
      return [id, rest];
    }),
  );
}

const ref = (path: string) => ({ $ref: `#/${path}` });

function messages(): Record<string, unknown> {
  const result: Record<string, unknown> = {};
  for (const option of AgentEvent.options) {
    const kind = option.shape.kind.value as EventKind;
    result[kind] = {
      name: kind,
      title: kind,
      summary: KIND_SUMMARIES[kind],
      description: `SSE: \`id: <cursor>\`, \`event: ${kind}\`, \`data:\` this payload. Webhooks: the \`event\` of a delivery.`,
      contentType: 'application/json',
      payload: ref(`components/schemas/${schemaId(option)}`),
      'x-sse-event': kind,
      'x-sse-id': 'seq on a conversation stream, the global cursor on the firehose',
    };
  }
  result.message_delta = {
    name: 'message_delta',
    title: 'message_delta',
    summary: 'A piece of assistant text while the LLM streams (SSE only; never stored, no id).',
    contentType: 'application/json',
    payload: ref('components/schemas/MessageDelta'),
    'x-sse-event': 'message_delta',
  };
  result.reasoning_delta = {
    name: 'reasoning_delta',
    title: 'reasoning_delta',
    summary: 'A piece of the model\'s reasoning while the LLM streams (SSE only; never stored, no id; none when `llm.reasoning.show` is false).',
    contentType: 'application/json',
    payload: ref('components/schemas/ReasoningDelta'),
    'x-sse-event': 'reasoning_delta',
  };
  result.stream_overflow = {
    name: 'stream_overflow',
    title: 'stream_overflow',
    summary: 'The subscriber fell more than AGENTD_SSE_MAX_BUFFERED events (or AGENTD_SSE_MAX_BUFFERED_BYTES bytes) behind: the stream ends after this; reconnect with Last-Event-ID.',
    contentType: 'application/json',
    payload: ref('components/schemas/StreamOverflowNotice'),
    'x-sse-event': 'stream_overflow',
  };
  result.stream_closed = {
    name: 'stream_closed',
    title: 'stream_closed',
    summary: 'The stream ends after this: its conversation was deleted (for good), or the server is shutting down (reconnect with Last-Event-ID once it is back).',
    contentType: 'application/json',
    payload: ref('components/schemas/StreamClosedNotice'),
    'x-sse-event': 'stream_closed',
  };
  result.webhook_delivery = {
    name: 'webhook_delivery',
    title: 'Webhook delivery',
    summary: 'One event, POSTed to a callback URL.',
    contentType: 'application/json',
    headers: ref('components/schemas/WebhookHeaders'),
    payload: ref('components/schemas/WebhookPayload'),
    correlationId: { description: 'The event id, repeated on every retry.', location: '$message.header#/webhook-id' },
  };
  return result;
}

const streamMessageNames = [...EVENT_KINDS, 'message_delta', 'reasoning_delta', 'stream_overflow'];

export function generateAsyncApi(options: { version: string }): Record<string, unknown> {
  const streamMessages = (names: readonly string[]) => Object.fromEntries(names.map((name) => [name, ref(`components/messages/${name}`)]));
  const operationMessages = (channel: string, names: readonly string[]) => names.map((name) => ref(`channels/${channel}/messages/${name}`));
  const conversationNames = [...streamMessageNames, 'stream_closed'];
  return {
    asyncapi: '3.0.0',
    info: {
      title: 'agentd events',
      version: options.version,
      description: `What agentd pushes to clients: every conversation event over Server-Sent Events and as webhook deliveries. The request/response API is in /openapi.json.\n\n${STREAM_DESCRIPTION}\n\n${WEBHOOK_DESCRIPTION}`,
      license: { name: 'MIT' },
    },
    defaultContentType: 'application/json',
    servers: {
      agentd: {
        host: 'localhost:8000',
        protocol: 'http',
        description: 'The agentd server (AGENTD_HOST:AGENTD_PORT).',
        security: [ref('components/securitySchemes/bearerAuth'), ref('components/securitySchemes/accessToken')],
      },
    },
    channels: {
      conversationEvents: {
        address: '/conversations/{id}/events/stream',
        title: 'A conversation\'s events (SSE)',
        description: STREAM_DESCRIPTION,
        servers: [ref('servers/agentd')],
        parameters: { id: { description: 'Conversation id.' } },
        messages: streamMessages(conversationNames),
        bindings: { http: { method: 'GET' } },
      },
      firehose: {
        address: '/events/stream',
        title: 'Every conversation\'s events (SSE firehose)',
        description: `${STREAM_DESCRIPTION} On the firehose, \`id\` is a global cursor; use it as Last-Event-ID.`,
        servers: [ref('servers/agentd')],
        messages: streamMessages(streamMessageNames),
        bindings: { http: { method: 'GET' } },
      },
      webhook: {
        address: null,
        title: 'Webhook deliveries',
        description: `Sent to the callback's URL (POST /conversations/{id}/callbacks, or AGENTD_WEBHOOK_URLS for every conversation). ${WEBHOOK_DESCRIPTION}`,
        messages: { webhook_delivery: ref('components/messages/webhook_delivery') },
        bindings: { http: { method: 'POST' } },
      },
    },
    operations: {
      streamConversationEvents: {
        action: 'send',
        channel: ref('channels/conversationEvents'),
        title: 'Stream a conversation\'s events',
        summary: 'History after the start cursor, then live events; GET /conversations/{id}/events/stream.',
        messages: operationMessages('conversationEvents', conversationNames),
      },
      streamAllEvents: {
        action: 'send',
        channel: ref('channels/firehose'),
        title: 'Stream every conversation\'s events',
        summary: 'GET /events/stream.',
        messages: operationMessages('firehose', streamMessageNames),
      },
      deliverWebhook: {
        action: 'send',
        channel: ref('channels/webhook'),
        title: 'Deliver an event to a callback URL',
        summary: 'POST, signed, ordered per callback, retried with backoff.',
        messages: operationMessages('webhook', ['webhook_delivery']),
      },
    },
    components: {
      schemas: componentSchemas(),
      messages: messages(),
      securitySchemes: {
        bearerAuth: { type: 'http', scheme: 'bearer', description: 'A key from AGENTD_MASTER_KEY (or the generated key file).' },
        accessToken: { type: 'httpApiKey', name: 'access_token', in: 'query', description: 'The same key as a query parameter, for EventSource.' },
      },
    },
  };
}
