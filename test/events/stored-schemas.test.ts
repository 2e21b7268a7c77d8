// Stored JSON is read back through the one schema of its shape (issue 13, item 4): a record
// whose fields have the wrong type is quarantined with a reason naming the field, never half
// loaded; a record written before newer fields existed still loads, with those fields unset.
import fs from 'node:fs';
import path from 'node:path';
import { randomUUID } from 'node:crypto';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { FileConversationRepository } from '../../src/adapters/files/file-conversation-repository.js';
import { FileRunStore } from '../../src/adapters/files/file-run-store.js';
import { FileWebhookStore } from '../../src/adapters/files/file-webhook-store.js';
import { SecretBox } from '../../src/core/secrets/secret-box.js';
import { tempDir } from '../support/agentd.js';
import { storedRecord } from '../support/stored-record.js';

let dir: string;
const box = new SecretBox(SecretBox.keyFromText('k'.repeat(64)));
const now = '2026-11-23T01:00:00.000Z';

function record(id: string, overrides: Record<string, unknown> = {}) {
  // An LLM config written before most of today's fields existed.
  return storedRecord(id, { llm: { model: 'old-model', api_key: null, base_url: null }, ...overrides });
}

function write(file: string, value: unknown) {
  fs.mkdirSync(path.dirname(file), { recursive: true });
  fs.writeFileSync(file, typeof value === 'string' ? value : JSON.stringify(value));
}

beforeEach(() => {
  dir = tempDir('agentd-stored-');
});
afterEach(() => fs.rmSync(dir, { recursive: true, force: true }));

describe('stored conversation records', () => {
  it('load an old record with its missing fields unset, and quarantine one with a field of the wrong type', async () => {
    const good = randomUUID();
    const bad = randomUUID();
    write(path.join(dir, good, 'conversation.json'), record(good));
    write(path.join(dir, bad, 'conversation.json'), record(bad, { max_iterations_per_run: 'lots' }));
    const { records, damaged } = await new FileConversationRepository(dir, box).loadAll();
    expect(records.map((r) => r.id)).toEqual([good]);
    expect(records[0]!.llm).toMatchObject({ model: 'old-model', api_key: null, temperature: null, extra_headers: null, prompt_cache: null });
    expect(damaged).toHaveLength(1);
    expect(damaged[0]!.id).toBe(bad);
    expect(damaged[0]!.error.damage.reason).toMatch(/not a valid conversation record \(max_iterations_per_run: /);
  });

  it('drop fields no schema knows instead of carrying them into memory', async () => {
    const id = randomUUID();
    write(path.join(dir, id, 'conversation.json'), record(id, { injected: { anything: true } }));
    const { records } = await new FileConversationRepository(dir, box).loadAll();
    expect(records[0]).not.toHaveProperty('injected');
  });
});

describe('stored runs and webhook subscriptions', () => {
  it('a run line of the wrong shape is damage, named by its line', () => {
    const id = randomUUID();
    const run = { id: randomUUID(), conversation_id: id, status: 'completed', started_at: now, ended_at: now, iterations: 1, usage: { prompt_tokens: 0, completion_tokens: 0, cost: 0 }, outcome: 'idle', error: null };
    write(path.join(dir, id, 'runs.jsonl'), `${JSON.stringify(run)}\n${JSON.stringify({ ...run, id: randomUUID(), iterations: -3 })}\n`);
    expect(() => new FileRunStore(dir).list(id)).toThrow(expect.objectContaining({ code: 'data_damaged', damage: expect.objectContaining({ line: 2, reason: 'not a run of this conversation' }) }));
  });

  it('a subscription state with a wrong field is quarantined, the others load', () => {
    const webhooks = path.join(dir, 'webhooks');
    const store = new FileWebhookStore({ dir: webhooks, box });
    const state = {
      id: randomUUID(),
      conversation_id: randomUUID(),
      url: 'http://127.0.0.1:9/hook',
      events: null,
      secret: null,
      origin: 'api',
      state: 'active',
      failing_since: null,
      created_at: now,
      cursor: 0,
      attempt: null,
      delivered_count: 0,
      failed_attempt_count: 0,
      last_delivered_at: null,
      last_error: null,
    } as const;
    store.save(state);
    const broken = { ...state, id: randomUUID(), cursor: 'far' };
    write(path.join(webhooks, `${broken.id}.json`), { format: 1, ...broken });
    const reloaded = new FileWebhookStore({ dir: webhooks, box });
    expect(reloaded.loadAll().map((s) => s.id)).toEqual([state.id]);
    expect(reloaded.damaged()).toEqual([expect.objectContaining({ id: broken.id, damage: expect.objectContaining({ reason: expect.stringMatching(/^not a valid subscription state \(cursor: /) }) })]);
  });
});
