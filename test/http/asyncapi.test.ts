import fs from 'node:fs';
import path from 'node:path';
import { Ajv } from 'ajv';
import addFormats from 'ajv-formats';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EVENT_KINDS } from '../../src/core/schemas/event.js';
import { generateAsyncApi } from '../../src/http/asyncapi-document.js';
import { VERSION } from '../../src/version.js';
import { startServer, type TestServer } from '../support/agentd.js';
import { WebhookReceiver } from '../support/webhook-receiver.js';

const ROOT = path.resolve(import.meta.dirname, '../..');
const COMMITTED = path.join(ROOT, 'openapi', 'asyncapi.json');
const SPEC = path.join(ROOT, 'node_modules', '@asyncapi', 'specs', 'schemas', '3.0.0-without-$id.json');

let generated: any;
let server: TestServer;
beforeAll(async () => {
  generated = generateAsyncApi({ version: VERSION });
  server = await startServer();
});
afterAll(async () => server?.close());

/** A validator for one component schema of the document (its `$ref`s resolved inside the document). */
function payloadValidator(schemaName: string) {
  const ajv = new Ajv({ strict: false, allErrors: true });
  addFormats.default(ajv);
  ajv.addSchema({ $id: 'asyncapi.json', components: { schemas: generated.components.schemas } });
  const validate = ajv.getSchema(`asyncapi.json#/components/schemas/${schemaName}`);
  if (!validate) throw new Error(`no schema ${schemaName}`);
  return validate;
}

describe('openapi/asyncapi.json', () => {
  it('is committed and equals what the code generates', () => {
    const stale = 'openapi/asyncapi.json is out of date with the event schemas: run `npm run openapi` and commit the result';
    expect(fs.existsSync(COMMITTED), 'openapi/asyncapi.json is missing: run `npm run openapi`').toBe(true);
    expect(fs.readFileSync(COMMITTED, 'utf8'), stale).toBe(`${JSON.stringify(generated, null, 2)}\n`);
  });

  it('is served at /asyncapi.json without a key, and listed in the OpenAPI document', async () => {
    const response = await fetch(`${server.url}/asyncapi.json`);
    expect(response.status).toBe(200);
    expect(await response.json()).toEqual(generated);
    const openapi = (await (await fetch(`${server.url}/openapi.json`)).json()) as { paths: Record<string, unknown> };
    expect(openapi.paths['/asyncapi.json']).toBeDefined();
  });

  it('is a valid AsyncAPI 3.0 document (the official JSON Schema)', () => {
    const ajv = new Ajv({ strict: false, allErrors: true, validateFormats: false });
    const validate = ajv.compile(JSON.parse(fs.readFileSync(SPEC, 'utf8')));
    const ok = validate(generated);
    expect(validate.errors ?? [], JSON.stringify(validate.errors?.slice(0, 5), null, 2)).toEqual([]);
    expect(ok).toBe(true);
    expect(generated.asyncapi).toBe('3.0.0');
  });
});

describe('what it describes', () => {
  it('every event kind is a message of both SSE channels and a possible webhook event; ids and Last-Event-ID are explained', () => {
    for (const channel of ['conversationEvents', 'firehose']) {
      const names = Object.keys(generated.channels[channel].messages);
      for (const kind of [...EVENT_KINDS, 'message_delta', 'stream_overflow']) expect(names, `${channel} lacks ${kind}`).toContain(kind);
      expect(generated.channels[channel].description).toMatch(/Last-Event-ID/);
    }
    expect(generated.channels.conversationEvents.address).toBe('/conversations/{id}/events/stream');
    expect(generated.channels.firehose.address).toBe('/events/stream');
    const union = generated.components.schemas.Event.oneOf.map((entry: { $ref: string }) => entry.$ref);
    expect(union).toHaveLength(EVENT_KINDS.length);
    expect(generated.components.schemas.WebhookPayload.properties.event).toEqual({ $ref: '#/components/schemas/Event' });
    expect(generated.info.description).toMatch(/from: "now"/);
    for (const header of ['webhook-id', 'webhook-timestamp', 'webhook-signature']) expect(Object.keys(generated.components.schemas.WebhookHeaders.properties)).toContain(header);
  });

  it('real events, SSE items and a real webhook delivery validate against its schemas', async () => {
    const auth = { ...server.auth, 'content-type': 'application/json' };
    const id = ((await (await fetch(`${server.url}/conversations`, { method: 'POST', headers: auth, body: '{}' })).json()) as { id: string }).id;
    const receiver = await WebhookReceiver.start();
    try {
      await fetch(`${server.url}/conversations/${id}/callbacks`, { method: 'POST', headers: auth, body: JSON.stringify({ url: receiver.url }) });
      await fetch(`${server.url}/conversations/${id}/messages`, { method: 'POST', headers: auth, body: JSON.stringify({ content: 'hello', run: false }) });
      await receiver.waitFor(() => receiver.delivered.length >= 1, 'a delivery');
      const payload = payloadValidator('WebhookPayload');
      for (const delivery of receiver.delivered) expect(payload(delivery.json), JSON.stringify(payload.errors)).toBe(true);
      const headers = payloadValidator('WebhookHeaders');
      expect(headers(receiver.delivered[0]!.headers), JSON.stringify(headers.errors)).toBe(true);
      const bad = structuredClone(receiver.delivered[0]!.json) as any;
      bad.event.seq = 0;
      expect(payload(bad)).toBe(false);

      const events = ((await (await fetch(`${server.url}/conversations/${id}/events`, { headers: auth })).json()) as { items: unknown[] }).items;
      const event = payloadValidator('Event');
      expect(events.length).toBeGreaterThan(0);
      for (const item of events) expect(event(item), JSON.stringify(event.errors)).toBe(true);
      expect(payloadValidator('MessageDelta')({ kind: 'message_delta', conversation_id: id, run_id: null, content_delta: 'he' })).toBe(true);
      expect(payloadValidator('StreamOverflowNotice')({ reason: 'subscriber_too_slow', resume_after: '12' })).toBe(true);
    } finally {
      await receiver.close();
    }
  });
});
