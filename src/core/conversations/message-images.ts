import { AppError, InvalidRequestError } from '../errors.js';
import { MAX_IMAGE_BYTES, MAX_IMAGES, partsAsText, sniffImageType, type ContentPart, type StoredPart } from '../schemas/message-content.js';

/** Reads a workdir file for a message (the workspace's safe resolution: nothing outside the workdir). */
export type ReadWorkdirImage = (path: string, options: { maxBytes: number; tooLarge: (size: number) => Error }) => Promise<{ bytes: Buffer; path: string }>;

const BASE64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;

export function imageTooLarge(size: number, where: string): AppError {
  return new AppError({ code: 'image_too_large', kind: 'too_large', message: `${where} is ${size} bytes; an image may have at most ${MAX_IMAGE_BYTES} bytes (${MAX_IMAGE_BYTES / 1024 / 1024} MiB).`, details: { size, limit: MAX_IMAGE_BYTES } });
}

/**
 * A message's parts checked and made storable: workdir images are read once (inside the workdir,
 * at most 5 MiB, PNG/JPEG/GIF/WebP by their bytes) and kept as their path; inline images are
 * decoded, checked the same way and kept with their data. `content` is the parts as text.
 */
export async function prepareMessageParts(parts: readonly ContentPart[], readImage: ReadWorkdirImage): Promise<{ content: string; parts: StoredPart[] | null }> {
  const images = parts.filter((part) => part.type === 'image').length;
  if (images > MAX_IMAGES) throw new InvalidRequestError('too_many_images', `A message may carry at most ${MAX_IMAGES} images; this one has ${images}.`, { images, limit: MAX_IMAGES });
  const stored: StoredPart[] = [];
  for (const [index, part] of parts.entries()) {
    if (part.type === 'text') {
      stored.push(part);
      continue;
    }
    if ('path' in part) {
      const read = await readImage(part.path, { maxBytes: MAX_IMAGE_BYTES, tooLarge: (size) => imageTooLarge(size, `content[${index}] (${part.path})`) });
      const mediaType = sniffImageType(read.bytes);
      if (!mediaType) throw new InvalidRequestError('unsupported_image', `content[${index}]: ${JSON.stringify(part.path)} is not a PNG, JPEG, GIF or WebP image.`, { index, path: part.path });
      stored.push({ type: 'image', path: read.path, media_type: mediaType, size_bytes: read.bytes.length });
      continue;
    }
    if (part.data.length > Math.ceil(MAX_IMAGE_BYTES / 3) * 4 + 4) throw imageTooLarge(Math.floor((part.data.length * 3) / 4), `content[${index}]`);
    if (!BASE64.test(part.data)) throw new InvalidRequestError('invalid_image_data', `content[${index}].data is not base64 (standard alphabet, padded, no line breaks).`, { index });
    const bytes = Buffer.from(part.data, 'base64');
    if (bytes.length > MAX_IMAGE_BYTES) throw imageTooLarge(bytes.length, `content[${index}]`);
    const mediaType = sniffImageType(bytes);
    if (!mediaType) throw new InvalidRequestError('unsupported_image', `content[${index}] is not a PNG, JPEG, GIF or WebP image.`, { index });
    if (mediaType !== part.media_type) throw new InvalidRequestError('image_type_mismatch', `content[${index}] says ${part.media_type} but its bytes are ${mediaType}.`, { index, media_type: part.media_type, detected: mediaType });
    stored.push({ type: 'image', data: part.data, media_type: mediaType, size_bytes: bytes.length });
  }
  const text = partsAsText(stored);
  if (text.trim() === '') throw new InvalidRequestError('empty_message', 'The message has no text and no image.');
  return { content: text, parts: images > 0 ? stored : null };
}

/**
 * A workdir image of an earlier message, read again for an LLM request (its bytes as base64): still
 * inside the workdir, still small enough, and still an image, or the request says it is gone.
 */
export function imageReader(readSmallFile: (conversationId: string, ...args: Parameters<ReadWorkdirImage>) => ReturnType<ReadWorkdirImage>): (conversationId: string, imagePath: string) => Promise<string> {
  return async (conversationId, imagePath) => {
    const read = await readSmallFile(conversationId, imagePath, { maxBytes: MAX_IMAGE_BYTES, tooLarge: (size) => imageTooLarge(size, imagePath) });
    if (!sniffImageType(read.bytes)) throw new Error('not an image any more');
    return read.bytes.toString('base64');
  };
}
