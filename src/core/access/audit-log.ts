import { z } from 'zod';
import { Timestamp } from '../schemas/common.js';
import type { Page } from '../pagination.js';

/** One line of the audit log: who did what, to what, with which result. */
export const AuditEntry = z
  .object({
    id: z.uuid(),
    seq: z.int().min(1).describe('Position in the log (entries are only ever appended).'),
    at: Timestamp,
    key_id: z.string().nullable().describe('The key used (`master`, a key id, `jwt:<subject>`); null when no known key was presented.'),
    owner: z.string().nullable(),
    method: z.string(),
    route: z.string().describe('The route pattern, e.g. `/conversations/:id/messages`.'),
    resource: z.string().nullable().describe('The resource acted on: a conversation or key id.'),
    status: z.int().nullable().describe('The answer; null for the entry written as a request is let in (the use of a rotated secret: a stream answers much later).'),
    client: z.string().describe("The client's address."),
    note: z.string().nullable().describe('Why it is recorded when it is not a plain write: `refused:<code>`, `rotated_key`.'),
  })
  .meta({ id: 'AuditEntry' });
export type AuditEntry = z.infer<typeof AuditEntry>;

export type NewAuditEntry = Omit<AuditEntry, 'id' | 'seq'>;

export interface AuditQuery {
  /** After this seq (the cursor of the previous page). */
  afterSeq: number;
  limit: number;
  owner?: string | undefined;
  keyId?: string | undefined;
}

/** The append-only audit log (files or PostgreSQL, beside the event log). */
export interface AuditLog {
  append(entry: NewAuditEntry): Promise<void>;
  page(query: AuditQuery): Promise<Page<AuditEntry>>;
}
