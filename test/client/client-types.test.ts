import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { tempDir } from '../support/agentd.js';

/**
 * A TypeScript project of its own that depends on this package (a symlink, as a file: dependency
 * installs it) and imports `agentd/client`: the built declarations resolve through the package's
 * "exports", typecheck for a browser (DOM lib, no Node types), and refuse a body the server would
 * refuse (the types come from the server's zod schemas).
 */
const ROOT = path.resolve(import.meta.dirname, '../..');
const dir = tempDir('agentd-client-types-');

afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

const CONSUMER = `
import { AgentdClient, AgentdError, type Conversation, type RunResult } from 'agentd/client';

const client = new AgentdClient({ url: 'http://127.0.0.1:8000', apiKey: 'key' });

export async function example(): Promise<RunResult> {
  const conversation: Conversation = await client.conversations.create({ title: 'typed', confirmation_mode: true });
  // @ts-expect-error a field the server does not accept
  await client.conversations.create({ titel: 'typo' });
  // @ts-expect-error a status that does not exist
  await client.conversations.list({ status: 'sleeping' });
  for await (const event of client.query({ prompt: 'hi', conversation_id: conversation.id })) {
    if (event.kind === 'action') event.tool_name.toUpperCase();
    if (event.kind === 'message_delta') event.content_delta.trim();
    if (event.kind === 'reasoning_delta') event.content_delta.trim();
    if (event.kind === 'reasoning') event.content.trim();
  }
  try {
    await client.events.get(conversation.id, 'x');
  } catch (error) {
    if (error instanceof AgentdError) error.code.toUpperCase();
  }
  return client.run({ prompt: 'and then?', conversation_id: conversation.id });
}
`;

describe('agentd/client for TypeScript users', () => {
  it('typechecks in a browser project (DOM, no Node types) through the package exports', { timeout: 60_000 }, () => {
    fs.mkdirSync(path.join(dir, 'node_modules'));
    fs.symlinkSync(ROOT, path.join(dir, 'node_modules', 'agentd'));
    fs.writeFileSync(path.join(dir, 'package.json'), JSON.stringify({ type: 'module', private: true }));
    fs.writeFileSync(path.join(dir, 'main.ts'), CONSUMER);
    fs.writeFileSync(
      path.join(dir, 'tsconfig.json'),
      JSON.stringify({ compilerOptions: { strict: true, module: 'NodeNext', moduleResolution: 'NodeNext', target: 'ES2022', lib: ['ES2023', 'DOM'], types: [], skipLibCheck: true, noEmit: true }, files: ['main.ts'] }),
    );
    const tsc = spawnSync(process.execPath, [path.join(ROOT, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', dir], { encoding: 'utf8' });
    expect(tsc.stdout + tsc.stderr).toBe('');
    expect(tsc.status).toBe(0);
  });
});
