/**
 * Per-route OpenAPI adjustments for what zod cannot say: a wildcard path (`/files/*`) documented
 * as a named parameter (`/files/{path}`), and a multipart/form-data request body (plain JSON
 * Schema). Runtime validation is untouched: these only change the generated document.
 */
import type { SwaggerTransform } from '@fastify/swagger';
import { jsonSchemaTransform } from 'fastify-type-provider-zod';

interface JsonObjectSchema {
  type?: string;
  properties?: Record<string, unknown>;
  required?: string[];
}

export interface RouteDocOptions {
  /** Document the route's trailing `*` as this path parameter. */
  wildcardParam?: { name: string; description: string };
  /** Document a multipart/form-data body with this JSON Schema. */
  multipartBody?: Record<string, unknown>;
}

export function routeDoc(options: RouteDocOptions): SwaggerTransform {
  return (document) => {
    const transformed = jsonSchemaTransform(document as Parameters<typeof jsonSchemaTransform>[0]);
    const schema: Record<string, unknown> = { ...(transformed.schema as Record<string, unknown>) };
    let url = transformed.url;
    const wildcard = options.wildcardParam;
    if (wildcard && url.endsWith('*')) {
      url = `${url.slice(0, -1)}{${wildcard.name}}`;
      const params = (schema.params ?? { type: 'object', properties: {}, required: [] }) as JsonObjectSchema;
      const { '*': _wildcard, ...properties } = params.properties ?? {};
      schema.params = {
        ...params,
        properties: { ...properties, [wildcard.name]: { type: 'string', description: wildcard.description } },
        required: [...(params.required ?? []).filter((name) => name !== '*'), wildcard.name],
      };
    }
    if (options.multipartBody) {
      schema.body = options.multipartBody;
      schema.consumes = ['multipart/form-data'];
    }
    return { schema, url };
  };
}
