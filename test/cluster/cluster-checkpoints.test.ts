/**
 * Workdir checkpoints with several instances: they live beside the workdirs on the storage the
 * instances share (`<AGENTD_WORKDIR_BASE>/.agentd-checkpoints`), so the instance that takes a
 * conversation over can rewind it. Two built servers on one database: a run on A takes
 * checkpoints; a rewind asked of A is cut by kill -9 after restoring the files and before
 * recording its event (AGENTD_TEST_PAUSE_AT); B, taking the conversation over, finishes it, and
 * then rewinds again (undo) from checkpoints A took.
 */
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startFakeLlm, type FakeLlm } from '../fake-llm/fake-llm-server.js';
import { tempDir, type SpawnedServer } from '../support/agentd.js';
import { findPostgres, startPostgres, type PostgresCluster } from '../support/postgres-cluster.js';
import { clusterRequest as api, eventually as until, startInstance } from '../support/cluster-instances.js';

const pg = findPostgres();
const skipReason = 'missing' in pg ? pg.missing : null;
if (skipReason) console.warn(`test/cluster/cluster-checkpoints.test.ts: skipped (${skipReason})`);



describe.skipIf(skipReason !== null)('checkpoints on the shared storage', () => {
  let cluster: PostgresCluster;
  let llm: FakeLlm;
  const servers: SpawnedServer[] = [];

  beforeAll(async () => {
    cluster = await startPostgres(pg as Exclude<typeof pg, { missing: string }>);
  }, 60_000);

  afterAll(async () => {
    for (const server of servers) server.child.kill('SIGKILL');
    await llm?.close();
    await cluster?.stop();
  }, 60_000);

  it('a rewind cut by kill -9 of its instance is finished by the one taking over, which rewinds from checkpoints the dead one took', { timeout: 120_000 }, async () => {
    const databaseUrl = await cluster.createDatabase();
    const workdirs = tempDir('agentd-cluster-checkpoints-');
    llm = await startFakeLlm([
      { text: 'first', toolCalls: [{ name: 'bash', arguments: { command: 'printf one > notes.txt' } }] },
      { text: 'second', toolCalls: [{ name: 'bash', arguments: { command: 'printf two > notes.txt' } }] },
      { text: 'done' },
    ]);
    const start = async (env: Record<string, string> = {}) => {
      const server = await startInstance({ databaseUrl, workdirs, leaseTtlS: 3 }, { dataDir: tempDir(), env });
      servers.push(server);
      return server;
    };
    const [a, b] = await Promise.all([start({ AGENTD_TEST_PAUSE_AT: 'rewind_before_event' }), start()]);

    // No conversation may work inside the checkpoints of the others (or in a directory holding them).
    for (const workdir of [workdirs, path.join(workdirs, '.agentd-checkpoints'), path.join(workdirs, '.agentd-checkpoints', 'peek')]) {
      const refused = await api(b!.url, '/conversations', { method: 'POST', body: JSON.stringify({ workdir }) });
      expect(refused.status).toBe(422);
      expect(refused.body.error).toBe('invalid_workdir');
    }
    const created = await api(a!.url, '/conversations', { method: 'POST', body: JSON.stringify({ llm: { model: 'fake', base_url: llm.url, api_key: 'k' }, initial_message: 'write notes' }) });
    expect(created.status).toBe(201);
    const id = created.body.id as string;
    await until('the run ended', 30_000, async () => ['finished', 'idle'].includes((await api(a!.url, `/conversations/${id}`)).body.status));
    expect((await api(b!.url, `/conversations/${id}/files/notes.txt`)).text).toBe('two');
    // Beside the workdirs, not in A's data dir.
    expect(fs.existsSync(path.join(workdirs, '.agentd-checkpoints', id, 'shadow.git'))).toBe(true);
    const checkpoints = (await api(b!.url, `/conversations/${id}/checkpoints?limit=100`)).body.items as { id: string; seq: number; files_changed: string[] }[];
    // The first checkpoint that saw notes.txt: taken before the second command, the file says "one".
    const target = checkpoints.find((checkpoint) => checkpoint.files_changed.includes('notes.txt'))!;
    expect(target).toBeDefined();

    // Asked through B, run on A: A restores the files, then stops before recording the rewind.
    const rewinding = api(b!.url, `/conversations/${id}/rewind`, { method: 'POST', body: JSON.stringify({ checkpoint_id: target.id, files: true, conversation: true }) }).catch((error: unknown) => error);
    await until('A paused inside the rewind', 30_000, async () => a!.output().includes('AGENTD_TEST_PAUSED rewind_before_event'));
    a!.child.kill('SIGKILL');
    await a!.exited;
    const cut = await rewinding;
    expect(cut).toMatchObject({ status: 503 });

    // B takes the conversation over (A is dead) and finishes the rewind: its event is recorded once.
    const rewound = await until('B finished the rewind', 30_000, async () => {
      const events = (await api(b!.url, `/conversations/${id}/events?kind=rewind&limit=10`)).body.items as { checkpoint_id: string; undo_checkpoint_id: string }[];
      return events.length === 1 ? events[0] : undefined;
    });
    expect(rewound.checkpoint_id).toBe(target.id);
    expect((await api(b!.url, `/conversations/${id}/files/notes.txt`)).text).toBe('one');

    // B rewinds from a checkpoint A took (the undo checkpoint, taken just before A's rewind).
    const undo = await api(b!.url, `/conversations/${id}/rewind`, { method: 'POST', body: JSON.stringify({ checkpoint_id: rewound.undo_checkpoint_id, files: true }) });
    expect(undo.status).toBe(200);
    expect((await api(b!.url, `/conversations/${id}/files/notes.txt`)).text).toBe('two');
    const events = (await api(b!.url, `/conversations/${id}/events?limit=1000`)).body.items as { seq: number; kind: string }[];
    expect(events.map((event) => event.seq)).toEqual(events.map((_, i) => i + 1));
    expect(events.filter((event) => event.kind === 'rewind')).toHaveLength(2);

    // Deleted: its checkpoints go from the shared storage too.
    expect((await api(b!.url, `/conversations/${id}`, { method: 'DELETE' })).status).toBe(204);
    expect(fs.existsSync(path.join(workdirs, '.agentd-checkpoints', id))).toBe(false);
  });
});
