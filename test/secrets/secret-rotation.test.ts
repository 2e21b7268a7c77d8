/**
 * Issue: after a PUT rotated a secret, its old value was no longer masked (and was stored plain
 * in events). A conversation keeps masking the values its secrets had before, sealed at rest
 * like the secrets themselves, across a restart.
 */
import fs from 'node:fs';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { startServer, tempDir, type TestServer } from '../support/agentd.js';
import { requestJson } from '../support/json-api.js';

const OLD = 'old-value-rotated-away-4242';
const NEW = 'new-value-after-rotation-77';
const GONE = 'deleted-value-still-secret-99';
let server: TestServer | undefined;

afterEach(async () => {
  await server?.close();
  server = undefined;
});

const call = (method: string, route: string, body?: unknown) => requestJson(server!, method, route, body);

function filesUnder(dir: string): string[] {
  return fs.readdirSync(dir, { withFileTypes: true }).flatMap((entry) => (entry.isDirectory() ? filesUnder(path.join(dir, entry.name)) : [path.join(dir, entry.name)]));
}

describe('rotated and deleted secret values stay masked', () => {
  it('in command output, after a restart too, and are never stored in plain text', async () => {
    const dataDir = tempDir();
    server = await startServer({ dataDir });
    const created = await call('POST', '/conversations', { secrets: { TOKEN: OLD, OTHER: GONE } });
    const { id, workdir } = created.body as { id: string; workdir: string };
    // The old values end up in the workdir (a config file, a shell history...).
    fs.writeFileSync(path.join(workdir, 'leftover.txt'), `token=${OLD}\nother=${GONE}\n`);
    expect((await call('PUT', `/conversations/${id}/secrets`, { secrets: { TOKEN: NEW } })).status).toBe(200);
    expect((await call('DELETE', `/conversations/${id}/secrets/OTHER`)).status).toBe(204);
    expect((await call('GET', `/conversations/${id}/secrets`)).body).toEqual({ names: ['TOKEN'] });

    const print = 'cat leftover.txt; echo "now=$TOKEN"';
    const before = (await call('POST', `/conversations/${id}/commands`, { command: print })).body.stdout as string;
    expect(before).toBe('token=<secret:TOKEN>\nother=<secret:OTHER>\nnow=<secret:TOKEN>\n');

    await server.close();
    server = await startServer({ dataDir });
    const after = (await call('POST', `/conversations/${id}/commands`, { command: print })).body.stdout as string;
    expect(after).toBe(before);
    for (const file of filesUnder(dataDir)) {
      if (file.startsWith(`${workdir}/`)) continue; // the agent's own files hold what it wrote
      const bytes = fs.readFileSync(file);
      for (const value of [OLD, NEW, GONE]) expect(bytes.includes(value), `${file} holds ${value}`).toBe(false);
    }
    // Responses never show them either.
    expect(JSON.stringify((await call('GET', `/conversations/${id}`)).body)).not.toMatch(/old-value|deleted-value|retired/);
  });
});
