import { z } from 'zod';
import { AuditEntry } from '../../core/access/audit-log.js';
import { PageQuery, pageOf } from '../../core/schemas/common.js';
import { ApiKey } from '../../core/access/api-key.js';

/** The query strings and pages of /keys and /audit. */
export const KeyParams = z.object({ id: z.uuid().describe('Key id') });
export const KeyPage = pageOf(ApiKey, 'KeyPage');
export const KeyListQuery = PageQuery.extend({ owner: z.string().min(1).max(200).optional().describe("Only this owner's keys.") });
export const AuditQuery = PageQuery.extend({
  owner: z.string().min(1).max(200).optional().describe("An admin's filter (other keys see their own owner's entries)."),
  key_id: z.string().min(1).max(200).optional(),
});
export const AuditPage = pageOf(AuditEntry, 'AuditPage');
