import { z } from 'zod';

export const ErrorResponse = z
  .object({
    error: z.string().describe('Stable machine-readable code, e.g. `conversation_not_found`.'),
    message: z.string().describe('A human sentence saying what went wrong.'),
    details: z.record(z.string(), z.unknown()).nullable(),
  })
  .loose()
  .meta({ id: 'Error' });

export const Timestamp = z.iso.datetime({ offset: false }).describe('ISO 8601 UTC timestamp with milliseconds.');

export const Uuid = z.uuid();

export const PageQuery = z.object({
  page_id: z.string().max(512).optional().describe('Opaque cursor from a previous page\'s `next_page_id`.'),
  limit: z.coerce.number().int().min(1).max(1000).default(100),
});

export function pageOf<T extends z.ZodType>(item: T, id: string) {
  return z
    .object({
      items: z.array(item),
      next_page_id: z.string().nullable().describe('Pass as `page_id` to get the next page; null on the last page.'),
    })
    .meta({ id });
}

export const CountResponse = z.object({ count: z.int().min(0) }).meta({ id: 'Count' });

/** A query flag that accepts true/false/1/0 as strings (zod's coerce.boolean treats "false" as true). */
export const QueryBoolean = z
  .enum(['true', 'false', '1', '0'])
  .transform((value) => value === 'true' || value === '1');
