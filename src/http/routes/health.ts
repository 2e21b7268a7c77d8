import { z } from 'zod';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import type { Services } from '../../compose.js';
import { generateAsyncApi } from '../asyncapi-document.js';
import { errors } from '../route-schemas.js';
import { Alive, Health, Info } from '../contract/health.js';

const LIMIT_NAMES = { cpu_s: 'cpuSeconds', memory_mb: 'memoryMb', processes: 'processes', file_mb: 'fileMb', tmp_mb: 'tmpMb', workdir_mb: 'workdirMb' } as const;

export function healthRoutes(services: Pick<Services, 'config' | 'conversations' | 'disk' | 'events' | 'quarantined' | 'sandbox' | 'startedAt' | 'streams' | 'toolNames' | 'version'>): FastifyPluginAsyncZod {
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
          firehose_cursor: await services.events.firehoseHead(),
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
