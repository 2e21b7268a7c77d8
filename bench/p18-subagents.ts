import fs from 'node:fs';
import path from 'node:path';
import type { AgentEvent } from '../src/core/schemas/event.js';
import { startFakeLlm, type FakeLlm, type FakeTurn } from '../test/fake-llm/fake-llm-server.js';
import { startServer, type TestServer } from '../test/support/agentd.js';
import type { Benchmark } from './support/benchmark.js';
import { EventTap } from './support/instrumented.js';
import { fmt, ratio } from './support/stats.js';

const ROUNDS = 4;
/** How old the catalog's files are when runs are timed (see catalog-cache.ts's RACY_MS). */
const CATALOG_SETTLED_MS = 2100;
/** What a subagent's LLM takes to answer each request: the wait that concurrency overlaps. */
const LLM_DELAY_MS = 300;

/**
 * P18: what the project catalog costs a run, and what running subagents side by side saves.
 * (a) A one-answer run in an empty workdir against the same in a workdir with 60 skills, 20
 * slash commands and 10 agent files (read and parsed at every run start). (b) Two subagents
 * whose every LLM answer takes 300 ms, started by one reply with two `task` calls against two
 * replies of one `task` call each.
 */
export const p18Subagents: Benchmark = {
  id: 'P18',
  title: 'project catalog and concurrent subagents',
  measures:
    'ms per run start with a catalog of 60 skills, 20 commands and 10 agents (unchanged between runs) versus an empty workdir; and the wall time of two subagents (300 ms per LLM answer) started in one reply versus one after the other.',
  async run({ quick }) {
    const runs = quick ? 12 : 60;
    const fake = await startFakeLlm({ whenExhausted: { text: 'done' } });
    const tap = new EventTap();
    const server = await startServer({ overrides: { readers: [tap] } });
    try {
      const empty = await create(server, fake);
      const full = await create(server, fake);
      fillCatalog((await get(server, `/conversations/${full}`)).workdir);
      const filled = performance.now();
      for (const id of [empty, full]) await timed(server, tap, fake, id, [{ text: 'warm' }]);
      // The subagent pairs run while the catalog's files age (they take longer than the wait),
      // so that wait is not idle time; the catalog is not timed until it is over.
      const pairs = quick ? 2 : 6;
      const subagentTurn = (word: string): FakeTurn[] => [{ delayMs: LLM_DELAY_MS, toolCalls: [{ name: 'glob', arguments: { pattern: `none-${word}` } }] }, { delayMs: LLM_DELAY_MS, text: `${word} done` }];
      const wall = { together: 0, apart: 0 };
      const conversation = await create(server, fake);
      for (let i = 0; i < pairs; i++) {
        for (const mode of ['together', 'apart'] as const) {
          const a = `PAIR-A-${mode}-${i}`;
          const b = `PAIR-B-${mode}-${i}`;
          fake.route({ when: a, script: subagentTurn('a') });
          fake.route({ when: b, script: subagentTurn('b') });
          const call = (marker: string) => ({ name: 'task', arguments: { description: marker, prompt: marker } });
          wall[mode] += await timed(
            server,
            tap,
            fake,
            conversation,
            mode === 'together' ? [{ toolCalls: [call(a), call(b)] }, { text: 'both done' }] : [{ toolCalls: [call(a)] }, { toolCalls: [call(b)] }, { text: 'both done' }],
          );
        }
      }
      const per = { together: wall.together / pairs, apart: wall.apart / pairs };

      // A project's catalog files are older than a moment: one changed in the last 2 s is read
      // again at every run start (core/catalog/catalog-cache.ts), as a file changed within the
      // filesystem's timestamp tick could otherwise go unseen.
      await new Promise((resolve) => setTimeout(resolve, Math.max(0, CATALOG_SETTLED_MS - (performance.now() - filled))));
      await timed(server, tap, fake, full, [{ text: 'warm' }]);
      const catalog = { empty: 0, full: 0 };
      for (let round = 0; round < ROUNDS; round++) {
        for (let i = 0; i < runs / ROUNDS; i++) catalog.empty += await timed(server, tap, fake, empty, [{ text: 'ok' }]);
        for (let i = 0; i < runs / ROUNDS; i++) catalog.full += await timed(server, tap, fake, full, [{ text: 'ok' }]);
      }
      const perRun = { empty: catalog.empty / runs, full: catalog.full / runs };
      return {
        sizes: `${runs} runs per workdir in ${ROUNDS} alternating rounds; ${pairs} pairs of subagents each way, each subagent answering twice after ${LLM_DELAY_MS} ms`,
        tables: [
          {
            caption: 'A run of one LLM answer (fake LLM answering at once)',
            columns: ['workdir', 'ms/run', 'vs baseline', 'added ms'],
            rows: [
              ['no .claude directory (baseline)', fmt(perRun.empty), '×1', ''],
              ['60 skills, 20 commands, 10 agents', fmt(perRun.full), ratio(perRun.full, perRun.empty), fmt(perRun.full - perRun.empty)],
            ],
          },
          {
            caption: `Two subagents, each LLM answer taking ${LLM_DELAY_MS} ms`,
            columns: ['started', 'ms wall', 'vs one after the other'],
            rows: [
              ['one after the other (two replies, baseline)', fmt(per.apart), '×1'],
              ['in one reply (concurrently)', fmt(per.together), ratio(per.together, per.apart)],
            ],
          },
        ],
        notes: [
          `A catalog of 90 files, unchanged since the previous run (checked by its files' stamps, read and parsed only when one changed), adds ${fmt(perRun.full - perRun.empty)} ms to a run (${ratio(perRun.full, perRun.empty)}).`,
          `Two subagents started in one reply take ${fmt(per.together)} ms against ${fmt(per.apart)} ms one after the other (${ratio(per.together, per.apart)}): their LLM waits overlap.`,
        ],
      };
    } finally {
      await server.close();
      await fake.close();
    }
  },
};

function fillCatalog(workdir: string): void {
  const write = (name: string, text: string) => {
    fs.mkdirSync(path.dirname(path.join(workdir, name)), { recursive: true });
    fs.writeFileSync(path.join(workdir, name), text);
  };
  const body = 'Step one: read the code.\n'.repeat(80);
  for (let i = 0; i < 60; i++) write(`.claude/skills/skill-${i}/SKILL.md`, `---\nname: skill-${i}\ndescription: "Skill number ${i}: does one thing well"\n---\n${body}`);
  for (let i = 0; i < 20; i++) write(`.claude/commands/command-${i}.md`, `---\ndescription: Command ${i}\nargument-hint: FILE\n---\nDo $1 now.\n`);
  for (let i = 0; i < 10; i++) write(`.claude/agents/agent-${i}.md`, `---\nname: agent-${i}\ndescription: Agent ${i}\ntools: Read, Grep, Glob\n---\nYou are agent ${i}.\n${body}`);
}

async function get(server: TestServer, route: string): Promise<any> {
  return (await fetch(`${server.url}${route}`, { headers: server.auth })).json();
}

async function create(server: TestServer, fake: FakeLlm): Promise<string> {
  const response = await fetch(`${server.url}/conversations`, { method: 'POST', headers: { ...server.auth, 'content-type': 'application/json' }, body: JSON.stringify({ llm: { model: 'fake-model', base_url: fake.url, api_key: 'sk-bench' } }) });
  if (response.status !== 201) throw new Error(`POST /conversations: ${response.status} ${await response.text()}`);
  return ((await response.json()) as { id: string }).id;
}

/** ms from POST /messages to the run's end, the main agent following `script`. */
async function timed(server: TestServer, tap: EventTap, fake: FakeLlm, id: string, script: FakeTurn[]): Promise<number> {
  fake.setScript(script);
  let ended!: (status: string) => void;
  const runEnded = new Promise<string>((resolve) => (ended = resolve));
  const unsubscribe = tap.on(({ event }: { event: AgentEvent }) => {
    if (event.conversation_id === id && event.kind === 'state_update' && event.status !== 'running') ended(event.status);
  });
  const started = performance.now();
  const posted = await fetch(`${server.url}/conversations/${id}/messages`, { method: 'POST', headers: { ...server.auth, 'content-type': 'application/json' }, body: JSON.stringify({ content: 'go' }) });
  if (posted.status !== 202) throw new Error(`POST /messages: ${posted.status} ${await posted.text()}`);
  const status = await runEnded;
  const elapsed = performance.now() - started;
  unsubscribe();
  if (status !== 'idle') throw new Error(`the run ended ${status}`);
  return elapsed;
}
