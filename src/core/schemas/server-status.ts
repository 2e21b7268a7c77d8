import { z } from 'zod';
import { SandboxNetwork } from './conversation.js';
import { ConversationStatus } from './event.js';

/** What the server reports of itself: readiness (`/health`) and figures (`/info`). */
export const Check = z.object({ ok: z.boolean(), detail: z.string().nullable() });
const QuarantineCheck = Check.extend({
  conversations: z.array(z.string()).describe('Conversations quarantined (status `error`, see their `quarantine`).'),
  callbacks: z.array(z.string()).describe('Callback subscriptions left out because their stored state is damaged.'),
  schedules: z.array(z.string()).describe('Schedules left out because their stored record is damaged (they do not fire; their files are kept as found).'),
});
export const Health = z
  .object({
    status: z
      .enum(['ok', 'degraded', 'unavailable'])
      .describe('`degraded` (still 200): the server is ready, but some stored data is damaged and quarantined, NATS does not answer, or the agent runs unsandboxed (sandbox mode `none`).'),
    checks: z.object({
      state_loaded: Check,
      data_dir_writable: Check,
      quarantined: QuarantineCheck,
      sandbox: Check.describe("Agent processes run in the bubblewrap sandbox; not ok when they run unsandboxed on the host (sandbox mode `none`). Still ok, with a detail, when a workdir the client brought could not be id-mapped (the agent then runs there as the workdir's owner)."),
      database: Check.optional().describe('With AGENTD_DATABASE_URL: PostgreSQL answers.'),
      nats: Check.optional().describe('With AGENTD_NATS_URL: the NATS server answers (events still flow through the database without it).'),
    }),
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
export const SandboxInfo = z
  .object({
    mode: z.enum(['bwrap', 'none']).describe('bwrap: every agent process runs in a bubblewrap sandbox; none: unsandboxed on the host.'),
    network: z
      .object({
        default: SandboxNetwork.describe('`sandbox.network` of conversations created without one (AGENTD_SANDBOX_NETWORK).'),
        user_mode: z
          .enum(['pasta', 'slirp4netns'])
          .nullable()
          .describe('The user-mode network stack behind `network: true` (AGENTD_SANDBOX_NETWORK_HELPER: slirp4netns, else pasta, by default); null: `true` gets no network (none works here, or mode is none).'),
        host_allowed: z.boolean().describe('Whether conversations may ask for `network: "host"` (AGENTD_SANDBOX_NETWORK_HOST).'),
        note: z.string().nullable().describe('Why the policy in force differs from the one configured, if it does.'),
      })
      .describe('The network policy actually in force for agent processes.'),
    limits: z
      .object({ cpu_s: SandboxLimit, memory_mb: SandboxLimit, processes: SandboxLimit, file_mb: SandboxLimit, tmp_mb: SandboxLimit, workdir_mb: SandboxLimit })
      .describe('Limits of agent processes and what enforces each here: CPU seconds per process, memory, processes and threads, largest file, size of /tmp, disk usage of the workdir.'),
  })
  .meta({ id: 'SandboxInfo' });

export const Info = z
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

export type Check = z.infer<typeof Check>;
export type Health = z.infer<typeof Health>;
export type Info = z.infer<typeof Info>;
export type SandboxInfo = z.infer<typeof SandboxInfo>;
