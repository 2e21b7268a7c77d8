import { Readable } from 'node:stream';
import { z } from 'zod';
import fastifyMultipart from '@fastify/multipart';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import type { HttpServices } from '../services.js';
import { HttpError } from '../http-error.js';
import { FileEntry } from '../../core/schemas/file-entry.js';
import { parseRange } from '../byte-range.js';
import { contentDisposition, contentTypeFor } from '../download-headers.js';
import { receiveUpload } from '../multipart-upload.js';
import { routeDoc } from '../openapi-route-doc.js';
import { FileEntryPage, FileListQuery, FilePathParams, FileSearchQuery, UploadQuery, UploadedFiles } from '../contract/files.js';
import { ConversationParams, errors } from '../route-schemas.js';
import { requires } from '../route-scopes.js';

const Binary = z.string().meta({ format: 'binary' });
const fileBody = (description: string) => ({ description, content: { 'application/octet-stream': { schema: Binary } } });
const pathParamDoc = routeDoc({ wildcardParam: { name: 'path', description: "Path relative to the conversation's workdir." } });

const MULTIPART_BODY = {
  type: 'object',
  description:
    'multipart/form-data with one or more file parts (any field name). A part\'s filename is a path below the target directory ' +
    '(`a/b.txt` creates `a/`); names that are absolute, contain `..` climbing out, encoded forms, NUL bytes or backslashes are refused.',
  properties: { file: { type: 'array', items: { type: 'string', format: 'binary' } } },
  required: ['file'],
};

export function fileRoutes(services: Pick<HttpServices, 'config' | 'files'>): FastifyPluginAsyncZod {
  const files = services.files;
  const maxFileBytes = services.config.maxUploadBytes;
  const tags = ['files'];
  return async (app) => {
    // Scoped to these routes: everywhere else multipart/form-data stays a 415.
    await app.register(fastifyMultipart, { limits: { fileSize: maxFileBytes, files: 1000, fields: 100, fieldSize: 64 * 1024, parts: 1100 } });

    app.post(
      '/conversations/:id/files/upload',
      {
        schema: {
          tags,
          operationId: 'files.upload',
          security: requires('files:write'),
          summary: `Upload one or more files (multipart/form-data) into a directory of the workdir; each file at most AGENTD_MAX_UPLOAD_BYTES (413 past it, nothing written)`,
          params: ConversationParams,
          querystring: UploadQuery,
          response: { 201: UploadedFiles, ...errors(400, 403, 404, 409, 413, 415) },
        },
        config: { swaggerTransform: routeDoc({ multipartBody: MULTIPART_BODY }) },
      },
      async (request, reply) => {
        const batch = await files.beginUpload(request.params.id, request.query.path);
        const items = await receiveUpload({ request, batch, maxFileBytes });
        return reply.code(201).send({ items });
      },
    );

    app.get(
      '/conversations/:id/files',
      {
        schema: {
          tags,
          operationId: 'files.list',
          security: requires('files:read'),
          summary: 'List a directory (paginated, sorted by name; `recursive` walks depth-first; symlinks are listed, never followed)',
          params: ConversationParams,
          querystring: FileListQuery,
          response: { 200: FileEntryPage, ...errors(400, 403, 404) },
        },
      },
      async (request) => {
        const { path, recursive, page_id, limit } = request.query;
        return files.list(request.params.id, { path, recursive, pageId: page_id, limit });
      },
    );

    app.get(
      '/conversations/:id/files/*',
      {
        schema: {
          tags,
          operationId: 'files.download',
          security: requires('files:read'),
          summary: 'Download a file: streamed with Content-Length, Content-Type by extension, attachment Content-Disposition; one `Range: bytes=` range gives 206, an unsatisfiable one 416',
          params: FilePathParams,
          response: { 200: fileBody('The file.'), 206: fileBody('The requested range.'), ...errors(400, 403, 404, 416) },
        },
        config: { swaggerTransform: pathParamDoc },
      },
      async (request, reply) => {
        const file = await files.open(request.params.id, request.params['*']);
        const range = parseRange(request.headers.range, file.size);
        if (range.kind === 'unsatisfiable') {
          await file.handle.close();
          reply.header('content-range', `bytes */${file.size}`);
          throw new HttpError({ code: 'range_not_satisfiable', status: 416, message: `The range is outside the file (${file.size} bytes).`, details: { size: file.size } });
        }
        const { start, end } = range.kind === 'partial' ? range : { start: 0, end: file.size - 1 };
        reply
          .header('content-type', contentTypeFor(file.name))
          .header('content-disposition', contentDisposition(file.name))
          .header('content-length', String(Math.max(end - start + 1, 0)))
          .header('accept-ranges', 'bytes')
          .header('last-modified', new Date(file.mtimeMs).toUTCString())
          .header('x-content-type-options', 'nosniff');
        if (range.kind === 'partial') reply.code(206).header('content-range', `bytes ${start}-${end}/${file.size}`);
        if (file.size === 0 || request.method === 'HEAD') {
          await file.handle.close();
          return reply.send(Readable.from([]) as never); // a stream: Fastify keeps our Content-Length
        }
        return reply.send(file.handle.stream({ start, end }) as never);
      },
    );

    app.delete(
      '/conversations/:id/files/*',
      {
        schema: {
          tags,
          operationId: 'files.delete',
          security: requires('files:write'),
          summary: 'Delete a file, a directory (with its contents) or a symlink itself; the workdir root cannot be deleted (400)',
          params: FilePathParams,
          response: { 204: z.null().describe('Deleted.'), ...errors(400, 403, 404) },
        },
        config: { swaggerTransform: pathParamDoc },
      },
      async (request, reply) => {
        await files.delete(request.params.id, request.params['*']);
        return reply.code(204).send(null);
      },
    );

    app.post(
      '/conversations/:id/dirs/*',
      {
        schema: {
          tags,
          operationId: 'files.mkdir',
          security: requires('files:write'),
          summary: 'Create a directory and its missing parents (mkdir -p): 201 when created, 200 when it already existed',
          params: FilePathParams,
          response: { 200: FileEntry, 201: FileEntry, ...errors(400, 403, 404, 409) },
        },
        config: { swaggerTransform: pathParamDoc },
      },
      async (request, reply) => {
        const { entry, created } = await files.mkdir(request.params.id, request.params['*']);
        return reply.code(created ? 201 : 200).send(entry);
      },
    );

    app.get(
      '/conversations/:id/files-search',
      {
        schema: {
          tags,
          operationId: 'files.search',
          security: requires('files:read'),
          summary: 'Find paths matching a glob relative to the workdir (`**/*.ts`, `src/{a,b}/*`); paginated, depth-first by name; a page examines at most 50,000 entries, so it may hold fewer than `limit` items while `next_page_id` is set',
          params: ConversationParams,
          querystring: FileSearchQuery,
          response: { 200: FileEntryPage, ...errors(400, 403, 404) },
        },
      },
      async (request) => {
        const { pattern, page_id, limit } = request.query;
        return files.search(request.params.id, { pattern, pageId: page_id, limit });
      },
    );
  };
}
