import { z } from 'zod';
import { Timestamp } from './common.js';

export const FileType = z.enum(['file', 'directory', 'symlink']).meta({ id: 'FileType' });
export type FileType = z.infer<typeof FileType>;

export const FileEntry = z
  .object({
    name: z.string().describe('Base name.'),
    path: z.string().describe("Path relative to the conversation's workdir, '/'-separated ('.' for the workdir itself)."),
    type: FileType.describe('A symlink is reported as such (never followed in listings); its size is the length of its target.'),
    size: z.int().min(0).describe('Bytes (0 or the block size for directories, as the filesystem reports).'),
    modified_at: Timestamp,
  })
  .meta({ id: 'FileEntry' });
export type FileEntry = z.infer<typeof FileEntry>;
