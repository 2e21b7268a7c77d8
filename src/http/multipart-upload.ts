/**
 * Feeds the file parts of a multipart request into an upload batch, then commits it. Past the
 * size limit (busboy truncates the part and flags it), on a refused file name, or on a broken
 * body, the batch is aborted: no temp file and no partial file is left behind.
 */
import type { FastifyRequest } from 'fastify';
import { AppError, InvalidRequestError } from '../core/errors.js';
import { HttpError } from './http-error.js';
import type { FileEntry } from '../core/schemas/file-entry.js';
import type { UploadBatch } from '../core/workspace/upload-batch.js';

export async function receiveUpload(options: { request: FastifyRequest; batch: UploadBatch; maxFileBytes: number }): Promise<FileEntry[]> {
  const { request, batch, maxFileBytes } = options;
  try {
    const parts = startParts(request);
    for await (const part of parts) {
      if (part.type !== 'file') continue;
      await batch.add({ name: part.filename, content: part.file });
      if (part.file.truncated) {
        throw new HttpError({
          code: 'payload_too_large',
          status: 413,
          message: `${JSON.stringify(part.filename)} is larger than the upload limit of ${maxFileBytes} bytes; nothing was written.`,
          details: { limit_bytes: maxFileBytes, file_name: part.filename },
        });
      }
    }
    if (batch.size === 0) throw new InvalidRequestError('no_files', 'The multipart body holds no file part (a part needs a filename).');
    return await batch.commit();
  } catch (error) {
    await batch.abort();
    throw asUploadError(error);
  }
}

function startParts(request: FastifyRequest): AsyncIterableIterator<import('@fastify/multipart').Multipart> {
  if (!request.isMultipart()) {
    throw new HttpError({ code: 'unsupported_media_type', status: 415, message: 'Upload files as multipart/form-data.', details: null });
  }
  return request.parts({ preservePath: true }); // raw names: the resolver refuses '../x' instead of busboy silently reducing it to 'x'
}

/** Typed and HTTP errors pass through; whatever busboy throws about a malformed body is a 400. */
function asUploadError(error: unknown): unknown {
  if (error instanceof AppError) return error;
  const statusCode = (error as { statusCode?: unknown }).statusCode;
  if (typeof statusCode === 'number' && statusCode < 500) return error;
  if (typeof (error as NodeJS.ErrnoException).syscall === 'string') return error; // a filesystem failure: 500
  const reason = error instanceof Error ? error.message.slice(0, 200) : 'unreadable body';
  return new InvalidRequestError('invalid_multipart', `The multipart body could not be read: ${reason}.`);
}
