import fs from 'node:fs';
import path from 'node:path';
import { z } from 'zod';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import type { Services } from '../../compose.js';
import { ConversationStatus } from '../../core/schemas/event.js';
import { generateAsyncApi } from '../asyncapi-document.js';
import { errors } from '../route-schemas.js';

const Alive = z.object({ status: z.literal('ok') }).meta({ id: 'Alive' });

const Check = z.object({ ok: z.boolean(), detail: z.string().nullable() });
const Health = z
  .object({ status: z.enum(['ok', 'unavailable']), checks: z.object({ state_loaded: Check, data_dir_writable: Check }) })
  .meta({ id: 'Health' });

const Limit = z.int().nullable();
const SandboxInfo = z
  .object({
    mode: z.enum(['bwrap', 'none']).describe('bwrap: every agent process runs in a bubblewrap sandbox; none: unsandboxed on the host.'),
    network_default: z.boolean().describe('Network access of conversations created without `sandbox.network`.'),
    limits: z
      .object({ cpu_s: Limit, memory_mb: Limit, processes: Limit })
      .describe('Per-process limits of agent processes (CPU seconds, address space, processes and threads); null: none.'),
  })
  .meta({ id: 'SandboxInfo' });

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
    limits: z.object({
      max_body_bytes: z.int(),
      max_upload_bytes: z.int(),
      max_page_limit: z.int(),
      default_max_iterations_per_run: z.int(),
      sse_heartbeat_s: z.number(),
      sse_max_buffered_events: z.int(),
    }),
    sandbox: SandboxInfo,
  })
  .meta({ id: 'Info' });

function dataDirWritable(dir: string): { ok: boolean; detail: string | null } {
  const probe = path.join(dir, `.health-${process.pid}`);
  try {
    fs.writeFileSync(probe, 'ok');
    fs.rmSync(probe, { force: true });
    return { ok: true, detail: null };
  } catch (error) {
    return { ok: false, detail: `data dir not writable (${(error as NodeJS.ErrnoException).code ?? 'error'})` };
  }
}

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
        schema: { tags: ['health'], operationId: 'health.ready', summary: 'Readiness: state loaded and data dir writable', security: [], response: { 200: Health, 503: Health } },
      },
      async (_request, reply) => {
        const stateLoaded = services.conversations.isLoaded;
        const writable = dataDirWritable(services.config.dataDir);
        const ok = stateLoaded && writable.ok;
        return reply.code(ok ? 200 : 503).send({
          status: ok ? 'ok' : 'unavailable',
          checks: { state_loaded: { ok: stateLoaded, detail: stateLoaded ? null : 'loading' }, data_dir_writable: writable },
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
          limits: {
            max_body_bytes: services.config.maxBodyBytes,
            max_upload_bytes: services.config.maxUploadBytes,
            max_page_limit: 1000,
            default_max_iterations_per_run: 500,
            sse_heartbeat_s: services.config.sseHeartbeatMs / 1000,
            sse_max_buffered_events: services.config.sseMaxBuffered,
          },
          sandbox: {
            mode: services.sandbox.mode,
            network_default: services.sandbox.networkDefault,
            limits: { cpu_s: services.sandbox.limits.cpuSeconds, memory_mb: services.sandbox.limits.memoryMb, processes: services.sandbox.limits.processes },
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
