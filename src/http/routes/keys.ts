import { z } from 'zod';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import type { HttpServices } from '../services.js';
import { ApiKey, CreatedApiKey, CreateKeyBody, RotateKeyBody, UpdateKeyBody } from '../../core/access/api-key.js';
import { decodePageId, encodePageId } from '../../core/pagination.js';
import { NotFoundError } from '../../core/errors.js';
import { AuditPage, AuditQuery, KeyListQuery, KeyPage, KeyParams } from '../contract/keys.js';
import { ownerFilter, principalOf } from '../plugins/access.js';
import { errors, optionalBody } from '../route-schemas.js';
import { anyKey, requires } from '../route-scopes.js';

const isOffset = (value: unknown): value is { o: number } => typeof value === 'object' && value !== null && Number.isInteger((value as { o: unknown }).o) && (value as { o: number }).o >= 0;
const isSeq = (value: unknown): value is { s: number } => typeof value === 'object' && value !== null && Number.isInteger((value as { s: unknown }).s) && (value as { s: number }).s >= 0;

export function keyRoutes(services: Pick<HttpServices, 'access'>): FastifyPluginAsyncZod {
  const { keys, audit } = services.access;
  const tags = ['keys'];
  const admin = requires('keys:admin');
  return async (app) => {
    app.post(
      '/keys',
      { schema: { tags, operationId: 'keys.create', summary: 'Create an API key (its secret is answered this once)', security: admin, body: CreateKeyBody, response: { 201: CreatedApiKey, ...errors(400, 403, 413, 415) } } },
      async (request, reply) => {
        const created = await keys.create(principalOf(request), request.body);
        request.audit = { ...request.audit, resource: created.id };
        return reply.code(201).send(created);
      },
    );

    app.get(
      '/keys',
      { schema: { tags, operationId: 'keys.list', summary: 'List API keys (prefixes, never secrets)', security: admin, querystring: KeyListQuery, response: { 200: KeyPage, ...errors(400, 403) } } },
      async (request) => {
        const all = await keys.list(request.query.owner);
        const offset = request.query.page_id ? decodePageId(request.query.page_id, isOffset).o : 0;
        const items = all.slice(offset, offset + request.query.limit);
        return { items, next_page_id: offset + items.length < all.length ? encodePageId({ o: offset + items.length }) : null };
      },
    );

    app.get(
      '/keys/me',
      { schema: { tags, operationId: 'keys.me', summary: 'The key this request was made with (the master key and tokens have no record: 404)', security: anyKey(), response: { 200: ApiKey, ...errors(403, 404) } } },
      async (request) => {
        const { keyId } = principalOf(request);
        // The master key and tokens from the identity provider are no stored key.
        if (!/^[0-9a-f-]{36}$/.test(keyId)) throw new NotFoundError('key', keyId);
        return keys.get(keyId);
      },
    );

    app.get(
      '/keys/:id',
      { schema: { tags, operationId: 'keys.get', summary: 'Get an API key', security: admin, params: KeyParams, response: { 200: ApiKey, ...errors(400, 403, 404) } } },
      async (request) => keys.get(request.params.id),
    );

    app.patch(
      '/keys/:id',
      { schema: { tags, operationId: 'keys.update', summary: "Change a key's name, scopes, expiry, limits or models", security: admin, params: KeyParams, body: UpdateKeyBody, response: { 200: ApiKey, ...errors(400, 403, 404, 413, 415) } } },
      async (request) => keys.update(principalOf(request), request.params.id, request.body),
    );

    app.delete(
      '/keys/:id',
      { schema: { tags, operationId: 'keys.delete', summary: 'Revoke a key (at once)', security: admin, params: KeyParams, response: { 204: z.null().describe('Revoked'), ...errors(400, 403, 404) } } },
      async (request, reply) => {
        await keys.remove(request.params.id);
        return reply.code(204).send(null);
      },
    );

    app.post(
      '/keys/:id/rotate',
      { schema: { tags, operationId: 'keys.rotate', summary: 'A new secret (answered this once); the old one works for grace_s more seconds', security: admin, params: KeyParams, body: optionalBody(RotateKeyBody), response: { 200: CreatedApiKey, ...errors(400, 403, 404, 413, 415) } } },
      async (request) => keys.rotate(request.params.id, request.body?.grace_s ?? 0),
    );

    app.get(
      '/audit',
      { schema: { tags: ['audit'], operationId: 'audit.list', summary: 'The audit log: every write, refusal and use of a rotated secret, oldest first (cursor pages)', security: requires('audit:read'), querystring: AuditQuery, response: { 200: AuditPage, ...errors(400, 403) } } },
      async (request) => {
        const { page_id, limit, owner, key_id } = request.query;
        const afterSeq = page_id ? decodePageId(page_id, isSeq).s : 0;
        const page = await audit.page({ afterSeq, limit, owner: ownerFilter(request, owner), keyId: key_id });
        return { items: page.items, next_page_id: page.next_page_id === null ? null : encodePageId({ s: Number(page.next_page_id) }) };
      },
    );
  };
}
