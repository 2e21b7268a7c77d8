import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { PassThrough } from 'node:stream';
import v8 from 'node:v8';
import { afterEach, describe, expect, it } from 'vitest';
import { CreateConversationBody } from '../../src/core/schemas/conversation.js';
import { CLI, startServer, tempDir, type TestServer } from '../support/agentd.js';

// V8's own view of two objects: whether they share one hidden class (a "map").
v8.setFlagsFromString('--allow-natives-syntax');
const sameMap = new Function('a', 'b', 'return %HaveSameMap(a, b)') as (a: object, b: object) => boolean;

/** More conversations, each with a secret of its own name, than V8 keeps transitions for from `{}`'s hidden class (about 1,500). */
const CONVERSATIONS = 1_700;
const PROBE = path.join(import.meta.dirname, '..', 'support', 'v8-map-probe.mjs');
const valueOf = (i: number) => `value-${i}-${'x'.repeat(12)}`;

function probe(dataDir: string, mode: 'held' | 'raw'): { records: number; shared: number; of: number } {
  const args = ['--allow-natives-syntax', '--expose-gc', PROBE, path.join(dataDir, 'conversations'), path.join(dataDir, 'secret.key'), mode];
  return JSON.parse(execFileSync(process.execPath, args, { encoding: 'utf8', timeout: 60_000 })) as { records: number; shared: number; of: number };
}

let server: TestServer | undefined;
afterEach(async () => {
  await server?.close();
  server = undefined;
});

describe('conversations holding secrets under names of their own', () => {
  it("are held on hidden classes that do not descend from {}'s, so V8's hidden classes of plain objects stay shared (P5: /alive cost ×3-4 with 10,000 of them); their secrets stay masked in request log lines", { timeout: 180_000 }, async () => {
    if (!fs.existsSync(CLI)) throw new Error('dist/ is missing: run `npm run build`');
    const dataDir = tempDir();
    const lines: string[] = [];
    const logStream = new PassThrough();
    logStream.on('data', (chunk: Buffer) => lines.push(...chunk.toString().split('\n').filter(Boolean)));
    server = await startServer({ dataDir, listen: false, logStream });
    const ids: string[] = [];
    for (let i = 0; i < CONVERSATIONS; i++) {
      const body = CreateConversationBody.parse({ title: `c${i}`, secrets: { [`TOKEN_${i}`]: valueOf(i) } });
      ids.push((await server.services.conversations.create(body)).record.id);
    }
    // And three whose secret and metadata keys have the same names, as most conversations' do.
    const alike: string[] = [];
    for (let i = 0; i < 3; i++) {
      const body = CreateConversationBody.parse({ title: `alike ${i}`, secrets: { GITHUB_TOKEN: valueOf(10_000 + i) }, metadata: { ticket: `T-${i}` } });
      alike.push((await server.services.conversations.create(body)).record.id);
    }
    /** Records with the same user keys share one hidden class (a small object each, no hash table and map apiece). */
    const shareHiddenClasses = (which: readonly string[]) => {
      const [first, ...others] = which.map((id) => server!.services.store.record(id));
      return others.every((other) => sameMap(first!.secrets, other.secrets) && sameMap(first!.metadata, other.metadata));
    };
    // Created one by one, the key lists are shared from their second sight on; loaded together (below), from the first.
    expect(shareHiddenClasses(alike.slice(1))).toBe(true);
    // Held as copies, and as before for whoever reads them: the same keys and values, an ordinary object.
    const record = server.services.store.record(ids[7]!);
    expect(record.secrets).toEqual({ TOKEN_7: valueOf(7) });
    expect(Object.getPrototypeOf(record.secrets)).toBe(Object.prototype);
    expect(Object.getPrototypeOf(record.metadata)).toBe(Object.prototype);
    const put = await server.app.inject({ method: 'PUT', url: `/conversations/${ids[7]}/secrets`, headers: server.auth, payload: { secrets: { RENAMED_7: 'renamed-value-7' } } });
    expect(put.statusCode).toBe(200);
    expect(server.services.secrets.names(ids[7]!)).toEqual(expect.arrayContaining(['RENAMED_7']));
    expect(Object.getPrototypeOf(server.services.store.record(ids[7]!).secrets)).toBe(Object.prototype);

    // Masking did not change: a secret value in a request's URL is masked in its log line, old and new values alike.
    lines.length = 0;
    for (const value of [valueOf(1_234), 'renamed-value-7', valueOf(7)]) {
      const answer = await server.app.inject({ method: 'GET', url: `/alive?probe=${value}` });
      expect(answer.statusCode).toBe(200);
    }
    const logged = lines.filter((line) => line.includes('request completed')).map((line) => JSON.parse(line) as { url: string });
    expect(logged.map((line) => line.url)).toEqual(['/alive?probe=<secret:TOKEN_1234>', '/alive?probe=<secret:RENAMED_7>', '/alive?probe=<secret:TOKEN_7>']);
    expect(lines.join('\n')).not.toMatch(/value-/);
    await server.close();
    server = undefined;

    // Loaded at a start (from the snapshot a clean stop leaves, and from the record files after a crash): held the same way.
    for (const start of ['after a clean stop', 'without a snapshot'] as const) {
      if (start === 'without a snapshot') fs.rmSync(path.join(dataDir, 'conversations.snapshot'), { force: true });
      server = await startServer({ dataDir, listen: false });
      const loaded = server.services.store.record(ids[7]!);
      expect({ start, secrets: loaded.secrets, prototype: Object.getPrototypeOf(loaded.secrets), shared: shareHiddenClasses(alike) }).toEqual({ start, secrets: { TOKEN_7: valueOf(7), RENAMED_7: 'renamed-value-7' }, prototype: Object.prototype, shared: true });
      await server.close();
      server = undefined;
    }

    // What it is for, in a plain node process over the built code: held as the store holds them,
    // the records as loaded at a start leave `{}` + a property on a shared hidden class, for each of
    // 64 new property names; held as parsed, they leave it for next to none (one, measured: an
    // entry of an object of the load itself, garbage by the probe).
    expect(probe(dataDir, 'held')).toEqual({ records: CONVERSATIONS + 3, shared: 64, of: 64 });
    const raw = probe(dataDir, 'raw');
    expect(raw.records).toBe(CONVERSATIONS + 3);
    expect(raw.shared).toBeLessThan(8);
  });
});
