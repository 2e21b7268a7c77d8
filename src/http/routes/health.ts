import { z } from 'zod';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import type { Services } from '../../compose.js';
import { ConversationStatus } from '../../core/schemas/event.js';
import { SandboxNetwork } from '../../core/schemas/conversation.js';
import { generateAsyncApi } from '../asyncapi-document.js';
import { errors } from '../route-schemas.js';

const Alive = z.object({ status: z.literal('ok') }).meta({ id: 'Alive' });

const Check = z.object({ ok: z.boolean(), detail: z.string().nullable() });
const QuarantineCheck = Check.extend({
  conversations: z.array(z.string()).describe('Conversations quarantined (status `error`, see their `quarantine`).'),
  callbacks: z.array(z.string()).describe('Callback subscriptions left out because their stored state is damaged.'),
});
const Health = z
  .object({
    status: z
      .enum(['ok', 'degraded', 'unavailable'])
      .describe('`degraded` (still 200): the server is ready, but some stored data is damaged and quarantined; the rest is served.'),
    checks: z.object({ state_loaded: Check, data_dir_writable: Check, quarantined: QuarantineCheck }),
  })
  .meta({ id: 'Health' });

const Limit = z.int().nullable();
const SandboxLimit = z
  .object({
    value: z.int().nullable().describe('The configured value; null: no limit.'),
    enforced_by: z
      .enum(['cgroup', 'rlimit', 'tmpfs', 'server', 'none'])
      .describe('cgroup: one limit for the whole sandbox; rlimit: a limit on each process; tmpfs: the size of the private /tmp and /dev/shm (each); server: the server stops the command past it; none: not enforced here.'),
  })
  .meta({ id: 'SandboxLimit' });
const SandboxInfo = z
  .object({
    mode: z.enum(['bwrap', 'none']).describe('bwrap: every agent process runs in a bubblewrap sandbox; none: unsandboxed on the host.'),
    network: z
      .object({
        default: SandboxNetwork.describe('`sandbox.network` of conversations created without one (AGENTD_SANDBOX_NETWORK).'),
        user_mode: z
          .enum(['pasta', 'slirp4netns'])
          .nullable()
          .describe('The user-mode network stack behind `network: true`; null: `true` gets no network (none works here, or mode is none).'),
        host_allowed: z.boolean().describe('Whether conversations may ask for `network: "host"` (AGENTD_SANDBOX_NETWORK_HOST).'),
        note: z.string().nullable().describe('Why the policy in force differs from the one configured, if it does.'),
      })
      .describe('The network policy actually in force for agent processes.'),
    limits: z
      .object({ cpu_s: SandboxLimit, memory_mb: SandboxLimit, processes: SandboxLimit, file_mb: SandboxLimit, tmp_mb: SandboxLimit, workdir_mb: SandboxLimit })
      .describe('Limits of agent processes and what enforces each here: CPU seconds per process, memory, processes and threads, largest file, size of /tmp, disk usage of the workdir.'),
  })
  .meta({ id: 'SandboxInfo' });

const LIMIT_NAMES = { cpu_s: 'cpuSeconds', memory_mb: 'memoryMb', processes: 'processes', file_mb: 'fileMb', tmp_mb: 'tmpMb', workdir_mb: 'workdirMb' } as const;

const Info = z
  .object({
    name: z.literal('agentd'),
    version: z.string(),
    runtime: z
      .object({ name: z.literal('node'), version: z.string().describe('Without the leading v, e.g. `24.21.0`.') })
      .describe('The JavaScript runtime the server runs on (the single executable carries its own).'),
    uptime_s: z.number(),
    conversations: z.object({ total: z.int(), by_status: z.record(ConversationStatus, z.int()) }),
    tools: z.array(z.string()),
    sse_subscribers: z.int(),
    firehose_cursor: z
      .int()
      .min(0)
      .describe("The firehose's last cursor: `GET /events/stream?after_seq=<firehose_cursor>` sends only events that happen next, without replaying the history."),
    limits: z.object({
      max_body_bytes: z.int(),
      max_upload_bytes: z.int(),
      max_page_limit: z.int(),
      default_max_iterations_per_run: z.int(),
      sse_heartbeat_s: z.number(),
      sse_max_buffered_events: z.int(),
      max_connections: Limit.describe('Open HTTP connections in all (AGENTD_MAX_CONNECTIONS); null: no cap.'),
      max_connections_per_client: Limit.describe('Open HTTP connections per remote address (AGENTD_MAX_CONNECTIONS_PER_CLIENT); null: no cap.'),
    }),
    sandbox: SandboxInfo,
  })
  .meta({ id: 'Info' });

export function healthRoutes(services: Services): FastifyPluginAsyncZod {
  return async (app) => {
    app.get(
      '/alive',
      { config: { public: true }, schema: { tags: ['health'], operationId: 'health.alive', summary: 'Liveness: 200 as long as the process serves HTTP', security: [], response: { 200: Alive } } },
      async () => ({ status: 'ok' as const }),
    );

    app.get(
      '/health',
      {
        config: { public: true },
        schema: {
          tags: ['health'],
          operationId: 'health.ready',
          summary: 'Readiness: state loaded and data dir writable (not out of space); damaged data is reported, not fatal',
          security: [],
          response: { 200: Health, 503: Health },
        },
      },
      async (_request, reply) => {
        const stateLoaded = services.conversations.isLoaded;
        const writable = services.disk.check();
        const ready = stateLoaded && writable.ok;
        const { conversations, callbacks } = services.quarantined();
        const damaged = conversations.length + callbacks.length;
        const quarantined = {
          ok: damaged === 0,
          detail: damaged === 0 ? null : `stored data damaged: ${conversations.length} conversation(s) and ${callbacks.length} callback(s) quarantined, files kept as found`,
          conversations: conversations.map((entry) => entry.id),
          callbacks: callbacks.map((entry) => entry.id),
        };
        return reply.code(ready ? 200 : 503).send({
          status: !ready ? 'unavailable' : damaged > 0 ? 'degraded' : 'ok',
          checks: { state_loaded: { ok: stateLoaded, detail: stateLoaded ? null : 'loading' }, data_dir_writable: writable, quarantined },
        });
      },
    );

    app.get(
      '/info',
      { schema: { tags: ['health'], operationId: 'health.info', summary: 'Version, uptime, conversation counts, tools and limits', response: { 200: Info, ...errors() } } },
      async () => {
        const byStatus = services.conversations.countsByStatus();
        return {
          name: 'agentd' as const,
          version: services.version,
          runtime: { name: 'node' as const, version: process.versions.node },
          uptime_s: Math.round((Date.now() - services.startedAt) / 100) / 10,
          conversations: { total: services.conversations.count(), by_status: byStatus },
          tools: [...services.toolNames],
          sse_subscribers: services.streams.size,
          firehose_cursor: services.events.firehoseHead(),
          limits: {
            max_body_bytes: services.config.maxBodyBytes,
            max_upload_bytes: services.config.maxUploadBytes,
            max_page_limit: 1000,
            default_max_iterations_per_run: 500,
            sse_heartbeat_s: services.config.sseHeartbeatMs / 1000,
            sse_max_buffered_events: services.config.sseMaxBuffered,
            max_connections: services.config.connections.max || null,
            max_connections_per_client: services.config.connections.perClient || null,
          },
          sandbox: {
            mode: services.sandbox.mode,
            network: services.sandbox.network,
            limits: Object.fromEntries(
              Object.entries(LIMIT_NAMES).map(([name, key]) => [name, { value: services.sandbox.limits[key], enforced_by: services.sandbox.enforcement[key] }]),
            ) as Record<keyof typeof LIMIT_NAMES, { value: number | null; enforced_by: 'cgroup' | 'rlimit' | 'tmpfs' | 'server' | 'none' }>,
          },
        };
      },
    );

    app.get(
      '/openapi.json',
      {
        config: { public: true },
        schema: { tags: ['health'], operationId: 'health.openapi', summary: 'This OpenAPI 3.1 document', security: [], response: { 200: z.record(z.string(), z.unknown()) } },
      },
      async () => app.swagger() as unknown as Record<string, unknown>,
    );

    let asyncApi: Record<string, unknown> | undefined;
    app.get(
      '/asyncapi.json',
      {
        config: { public: true },
        schema: {
          tags: ['health'],
          operationId: 'health.asyncapi',
          summary: 'The AsyncAPI 3.0 document of the SSE streams and webhook payloads (every event kind, ids, Last-Event-ID)',
          security: [],
          response: { 200: z.record(z.string(), z.unknown()) },
        },
      },
      async () => (asyncApi ??= generateAsyncApi({ version: services.version })),
    );
  };
}
