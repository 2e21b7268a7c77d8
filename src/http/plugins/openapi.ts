import fs from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import type { FastifyInstance } from 'fastify';
import fastifySwagger from '@fastify/swagger';
import fastifySwaggerUi from '@fastify/swagger-ui';
import { jsonSchemaTransform, jsonSchemaTransformObject } from 'fastify-type-provider-zod';
import { assetGroupDir } from '../../assets.js';
import type { HttpServices } from '../services.js';

export const API_TAGS = [
  { name: 'health', description: 'Liveness, readiness, server info' },
  { name: 'conversations', description: 'Create, list, configure and delete conversations' },
  { name: 'messages', description: 'Send messages and drive runs' },
  { name: 'events', description: 'Everything that happens, listed and streamed' },
  { name: 'callbacks', description: 'Webhooks: signed, ordered, retried deliveries of a conversation\'s events' },
  { name: 'files', description: 'Files in and out of the workdir' },
  { name: 'commands', description: 'Run commands in the workdir' },
  { name: 'secrets', description: 'Secrets the agent can use but nobody can read' },
  { name: 'checkpoints', description: 'Workdir checkpoints, rewind to one, changes since one' },
  { name: 'schedules', description: 'Messages sent on a clock: cron or intervals, once per slot, with a record of every slot' },
  { name: 'keys', description: 'API keys: scopes, owners, limits, rotation' },
  { name: 'audit', description: 'Who did what: every write and every refusal' },
  { name: 'callbacks', description: 'Webhooks: signed, ordered, retried' },
];

/** OpenAPI 3.1 generated from the routes' zod schemas; served at /openapi.json and /docs. */
export async function registerOpenApi(app: FastifyInstance, services: HttpServices): Promise<void> {
  await app.register(fastifySwagger, {
    openapi: {
      openapi: '3.1.0',
      info: {
        title: 'agentd',
        version: services.version,
        description: 'An agent server: HTTP clients create and drive coding-agent conversations.',
        license: { name: 'MIT' },
      },
      tags: API_TAGS,
      components: { securitySchemes: { bearerAuth: { type: 'http', scheme: 'bearer', description: "The master key (AGENTD_MASTER_KEY or the generated key file), an API key from POST /keys, or (AGENTD_AUTH=jwt) a token from the identity provider. Each operation's `security` names the scope it needs." } } },
      security: [{ bearerAuth: [] }],
    },
    transform: jsonSchemaTransform,
    // Component schemas in name order: the document does not depend on the order modules were loaded in.
    transformObject: (input) => sortComponentSchemas(jsonSchemaTransformObject(input)),
  });
  // Swagger UI's static files: the package's own, or, in the single executable, its assets, written
  // to a private temp dir by the first request for them. Given, not found by the package beside
  // its modules: the server's bundle holds those modules (scripts/build-server.mjs).
  const bundled = assetGroupDir('swagger-ui');
  const staticDir = bundled?.dir ?? path.join(path.dirname(createRequire(import.meta.url).resolve('@fastify/swagger-ui')), 'static');
  // Its own context: the hook that writes the files runs for Swagger UI's routes only.
  await app.register(async (docs) => {
    if (bundled) {
      docs.addHook('onRequest', (_request, _reply, done) => {
        try {
          bundled.fill();
        } catch (error) {
          return done(error as Error);
        }
        done();
      });
    }
    await docs.register(fastifySwaggerUi, {
      routePrefix: '/docs',
      uiConfig: { docExpansion: 'list', deepLinking: true },
      baseDir: staticDir,
      logo: { type: 'image/svg+xml', content: bundled ? bundled.read('logo.svg') : fs.readFileSync(path.join(staticDir, 'logo.svg')) },
    });
  });
}

function sortComponentSchemas<T>(document: T): T {
  const components = (document as { components?: { schemas?: Record<string, unknown> } }).components;
  if (components?.schemas) components.schemas = Object.fromEntries(Object.entries(components.schemas).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)));
  return document;
}
