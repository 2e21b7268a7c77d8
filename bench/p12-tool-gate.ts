import path from 'node:path';
import { PermissionPolicy } from '../src/core/permissions/permission-policy.js';
import { TreeSitterShellParser } from '../src/adapters/shell-syntax/index.js';
import { NodeWorkdirFileSystem } from '../src/adapters/workspace/index.js';
import type { AgentEvent } from '../src/core/schemas/event.js';
import { startFakeLlm, type FakeLlm, type FakeTurn } from '../test/fake-llm/fake-llm-server.js';
import { startServer, type TestServer } from '../test/support/agentd.js';
import type { Benchmark } from './support/benchmark.js';
import { EventTap } from './support/instrumented.js';
import { ROOT } from './support/processes.js';
import { fmt, ratio, summarize } from './support/stats.js';

const ROUNDS = 4;
// The benchmarks run from dist/bench/: node_modules is the project root's.
const NODE_MODULES = path.join(ROOT, 'node_modules');
const EVERYTHING = path.join(NODE_MODULES, '@modelcontextprotocol/server-everything/dist/index.js');

/** 30 rules of the kinds users write: what a busy rule set costs each call. */
const RULES = {
  default: 'ask' as const,
  deny: ['bash(rm -rf*)', 'bash(sudo *)', 'bash(curl * | sh*)', 'file_editor(.git/**)', 'file_editor(**/.env)', 'mcp__prod__*', 'bash(git push --force*)', 'bash(dd *)', 'bash(mkfs*)', 'bash(shutdown*)'],
  ask: ['bash(git push*)', 'bash(npm publish*)', 'bash(docker *)', 'file_editor(package.json)', 'file_editor(.github/**)', 'bash(kubectl *)', 'bash(terraform *)', 'mcp__github__create_*', 'bash(psql *)', 'bash(ssh *)'],
  allow: ['bash(npm test*)', 'bash(npm run *)', 'bash(git status*)', 'bash(git diff*)', 'bash(ls*)', 'file_editor(src/**)', 'glob', 'grep', 'task_tracker', 'mcp__everything__*'],
};

/**
 * P12: what the tool gate and MCP cost per agent step. Three conversations on one server run the
 * same number of steps, alternating in rounds: each step is one `glob` of a name that matches
 * nothing in an empty workdir (a cheap built-in) with no rules; the same with 30 permission rules; and one
 * call of `echo` on the npm server-everything MCP server over stdio in the sandbox. Plus the
 * permission check alone, in a loop.
 */
export const p12ToolGate: Benchmark = {
  id: 'P12',
  title: 'permission check and MCP call per step',
  measures:
    'ms per agent step whose tool call passes 30 permission rules, and whose tool is an MCP `echo` over stdio (server-everything in the sandbox), versus the same step calling `glob` on an empty workdir with no rules; and µs per permission check alone.',
  async run({ quick }) {
    const steps = quick ? 40 : 200;
    const checks = quick ? 20_000 : 200_000;
    const fake = await startFakeLlm({ whenExhausted: { text: 'done' } });
    const tap = new EventTap();
    const server = await startServer({ env: { AGENTD_SANDBOX_RO_PATHS: NODE_MODULES }, overrides: { readers: [tap] } });
    try {
      const plain = await conversation(server, tap, fake, {}, { name: 'glob', arguments: {} });
      const ruled = await conversation(server, tap, fake, { permissions: RULES }, { name: 'glob', arguments: {} });
      const mcp = await conversation(server, tap, fake, { mcp_servers: { everything: { command: 'node', args: [EVERYTHING] } } }, { name: 'mcp__everything__echo', arguments: { message: 'ping' } });
      for (const warm of [plain, ruled, mcp]) await warm.run(5);
      const ms = { plain: [] as number[], ruled: [] as number[], mcp: [] as number[] };
      for (let round = 0; round < ROUNDS; round++) {
        ms.plain.push(await plain.run(steps / ROUNDS));
        ms.ruled.push(await ruled.run(steps / ROUNDS));
        ms.mcp.push(await mcp.run(steps / ROUNDS));
      }
      const perStep = (values: number[]) => values.reduce((sum, value) => sum + value, 0) / steps;
      const base = perStep(ms.plain);
      const withRules = perStep(ms.ruled);
      const withMcp = perStep(ms.mcp);

      const policy = new PermissionPolicy({ conversation: RULES, confirmationMode: false, readers: { shellParser: new TreeSitterShellParser(), resolvePath: (workdir, userPath) => new NodeWorkdirFileSystem().resolve(workdir, userPath, { allowAbsolute: true }) } });
      const calls = [
        { name: 'bash', args: { command: 'npm test -- --run && git status; ls -la | grep src' } },
        { name: 'file_editor', args: { command: 'create', path: '/w/src/deep/file.ts' } },
        { name: 'mcp__everything__echo', args: { message: 'ping' } },
      ];
      const samples: number[] = [];
      for (let batch = 0; batch < 10; batch++) {
        const started = performance.now();
        for (let i = 0; i < checks / 10; i++) {
          const call = calls[i % calls.length]!;
          await policy.check(call.name, call.args, '/w');
        }
        samples.push(((performance.now() - started) * 1000) / (checks / 10));
      }
      const check = summarize(samples);
      return {
        sizes: `${steps} steps per configuration in ${ROUNDS} alternating rounds (after 5 warm-up steps each); ${checks} permission checks in 10 batches`,
        tables: [
          {
            caption: 'One agent step (fake LLM answering at once with one tool call)',
            columns: ['step', 'ms/step', 'vs baseline', 'added ms'],
            rows: [
              ['`glob` in an empty workdir, no rules (baseline)', fmt(base), '×1', ''],
              ['the same through 30 permission rules', fmt(withRules), ratio(withRules, base), fmt(withRules - base)],
              ['MCP `echo` over stdio (server-everything, sandboxed)', fmt(withMcp), ratio(withMcp, base), fmt(withMcp - base)],
            ],
          },
          {
            caption: 'The permission check alone (30 rules; a compound bash command, a file path, an MCP name in turn)',
            columns: ['', 'µs p50', 'µs mean'],
            rows: [['PermissionPolicy.check', fmt(check.p50), fmt(check.mean)]],
          },
        ],
        notes: [
          `A step through 30 permission rules takes ${fmt(withRules)} ms against ${fmt(base)} ms without (${ratio(withRules, base)}); the check itself is ${fmt(check.mean)} µs, so a difference of milliseconds is noise between runs.`,
          `A step whose tool is an MCP echo over stdio (one JSON-RPC round trip to a Node process in the sandbox) takes ${fmt(withMcp)} ms against ${fmt(base)} ms for the glob step (${ratio(withMcp, base)}).`,
        ],
      };
    } finally {
      await server.close();
      await fake.close();
    }
  },
};

/** A conversation whose every run is `steps` calls of one tool and an answer; run() gives its ms. */
async function conversation(server: TestServer, tap: EventTap, fake: FakeLlm, body: Record<string, unknown>, call: { name: string; arguments: Record<string, unknown> }) {
  const headers = { ...server.auth, 'content-type': 'application/json' };
  const created = await fetch(`${server.url}/conversations`, { method: 'POST', headers, body: JSON.stringify({ llm: { model: 'fake-model', base_url: fake.url, api_key: 'sk-bench' }, max_iterations_per_run: 100_000, ...body }) });
  if (created.status !== 201) throw new Error(`POST /conversations: ${created.status} ${await created.text()}`);
  const { id } = (await created.json()) as { id: string };
  let counter = 0;
  return {
    async run(steps: number): Promise<number> {
      // Arguments differ at each step, or the run would end as stuck (the same call, the same result).
      const vary = (n: number) => (call.name === 'glob' ? { pattern: `none-${n}` } : { message: `ping ${n}` });
      const script: FakeTurn[] = Array.from({ length: steps }, () => ({ toolCalls: [{ name: call.name, arguments: { ...call.arguments, ...vary(++counter) } }] }));
      fake.setScript([...script, { text: 'done' }]);
      let ended!: (status: string) => void;
      const runEnded = new Promise<string>((resolve) => (ended = resolve));
      let lastResult = '';
      const unsubscribe = tap.on((appended) => {
        const event: AgentEvent = appended.event;
        if (event.conversation_id !== id) return;
        if (event.kind === 'observation' || event.kind === 'agent_error') lastResult = JSON.stringify(event).slice(0, 600);
        if (event.kind === 'state_update' && event.status !== 'running') ended(event.status);
      });
      const started = performance.now();
      const posted = await fetch(`${server.url}/conversations/${id}/messages`, { method: 'POST', headers, body: JSON.stringify({ content: 'Run the tool.' }) });
      if (posted.status !== 202) throw new Error(`POST /messages: ${posted.status} ${await posted.text()}`);
      const status = await runEnded;
      const elapsed = performance.now() - started;
      unsubscribe();
      if (status !== 'idle') {
        const mcp = await fetch(`${server.url}/conversations/${id}/mcp`, { headers }).then((response) => response.text());
        throw new Error(`the run of ${call.name} ended ${status}; the last tool result: ${lastResult}; MCP: ${mcp}`);
      }
      return elapsed;
    },
  };
}
