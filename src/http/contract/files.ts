import { z } from 'zod';
import { PageQuery, QueryBoolean, pageOf } from '../../core/schemas/common.js';
import { FileEntry } from '../../core/schemas/file-entry.js';
import { ConversationParams } from '../route-schemas.js';

/** The query strings, path parameters and answers of the file routes. */
const UserPath = z.string().max(4096);
export const FilePathParams = ConversationParams.extend({ '*': UserPath });
const FilePageQuery = PageQuery.extend({ page_id: z.string().max(16_384).optional().describe("Opaque cursor from a previous page's `next_page_id`.") });
export const FileEntryPage = pageOf(FileEntry, 'FileEntryPage');
export const UploadedFiles = z.object({ items: z.array(FileEntry).describe('The files written, in request order.') }).meta({ id: 'UploadedFiles' });
export const UploadQuery = z.object({ path: UserPath.default('.').describe('Target directory, relative to the workdir (created when missing).') });
export const FileListQuery = FilePageQuery.extend({
  path: UserPath.default('.').describe('Directory to list, relative to the workdir.'),
  recursive: QueryBoolean.default(false),
});
export const FileSearchQuery = FilePageQuery.extend({ pattern: z.string().min(1).max(4096).describe('Glob: `*`, `?`, `**`, `[...]`, `{a,b}`; wildcards skip dot-files.') });
