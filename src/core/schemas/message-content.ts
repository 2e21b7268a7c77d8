import { z } from 'zod';

export const IMAGE_MEDIA_TYPES = ['image/png', 'image/jpeg', 'image/gif', 'image/webp'] as const;
export const ImageMediaType = z.enum(IMAGE_MEDIA_TYPES);
export type ImageMediaType = z.infer<typeof ImageMediaType>;

/** The largest image a message may carry (each), decoded. */
export const MAX_IMAGE_BYTES = 5 * 1024 * 1024;
/** Images per message. */
export const MAX_IMAGES = 10;

export const TextPart = z.object({ type: z.literal('text'), text: z.string().min(1).max(1_000_000) }).strict().meta({ id: 'TextPart' });
export const ImagePathPart = z
  .object({ type: z.literal('image'), path: z.string().min(1).max(4096).describe('An image file in the workdir (relative, or absolute inside it): PNG, JPEG, GIF or WebP.') })
  .strict()
  .meta({ id: 'ImagePathPart' });
export const ImageDataPart = z
  .object({
    type: z.literal('image'),
    data: z.string().min(1).describe(`The image, base64-encoded (at most ${MAX_IMAGE_BYTES / 1024 / 1024} MiB decoded).`),
    media_type: ImageMediaType,
  })
  .strict()
  .meta({ id: 'ImageDataPart' });
export const ContentPart = z.union([TextPart, ImagePathPart, ImageDataPart]).meta({ id: 'ContentPart' });
export type ContentPart = z.infer<typeof ContentPart>;

export const MessageContent = z
  .union([z.string().min(1).max(1_000_000), z.array(ContentPart).min(1).max(50)])
  .describe(`Text, or an array of text and image parts (at most ${MAX_IMAGES} images; the images go to the LLM as image inputs).`);

/**
 * A part as the message event stores it: a workdir image is kept as its path (the bytes are read
 * again when the LLM needs them), an inline one with its data.
 */
export const StoredPart = z.union([
  z.object({ type: z.literal('text'), text: z.string() }).strict(),
  z.object({ type: z.literal('image'), path: z.string(), media_type: ImageMediaType, size_bytes: z.int().min(0) }).strict(),
  z.object({ type: z.literal('image'), data: z.string(), media_type: ImageMediaType, size_bytes: z.int().min(0) }).strict(),
]);
export type StoredPart = z.infer<typeof StoredPart>;

/** The media type the bytes say they are (magic numbers), or null for anything else. */
export function sniffImageType(bytes: Uint8Array): ImageMediaType | null {
  const starts = (...values: number[]) => values.every((value, index) => bytes[index] === value);
  if (starts(0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a)) return 'image/png';
  if (starts(0xff, 0xd8, 0xff)) return 'image/jpeg';
  if (starts(0x47, 0x49, 0x46, 0x38)) return 'image/gif';
  if (starts(0x52, 0x49, 0x46, 0x46) && bytes[8] === 0x57 && bytes[9] === 0x45 && bytes[10] === 0x42 && bytes[11] === 0x50) return 'image/webp';
  return null;
}

/** The text a message's parts read as where only text fits (the event's `content`, hooks, the CLI). */
export function partsAsText(parts: readonly StoredPart[]): string {
  return parts.map((part) => (part.type === 'text' ? part.text : 'path' in part ? `[image: ${part.path}]` : `[image: ${part.media_type}, ${part.size_bytes} bytes]`)).join('\n\n');
}
