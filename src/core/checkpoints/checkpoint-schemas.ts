import { z } from 'zod';
import { PageQuery, Timestamp, pageOf } from '../schemas/common.js';
import { RewindEvent } from '../schemas/event.js';

export const CheckpointTrigger = z.enum(['run_start', 'tool', 'run_end', 'rewind', 'fork']).meta({ id: 'CheckpointTrigger' });
export type CheckpointTrigger = z.infer<typeof CheckpointTrigger>;

/** What GET /checkpoints shows of a checkpoint. */
export const Checkpoint = z
  .object({
    id: z.uuid(),
    seq: z.int().min(1).describe('The event it was taken before: rewinding the conversation to it keeps the events before this seq.'),
    run_id: z.uuid().nullable(),
    created_at: Timestamp,
    files_changed: z.array(z.string()).describe('Workdir paths that differ from the previous checkpoint (what changed in between).'),
    trigger: CheckpointTrigger.describe('`run_start`, `run_end`, `tool` (before a file_editor write or a bash call), `rewind` (the undo point of a rewind), `fork` (a fork\'s copied workdir).'),
  })
  .meta({ id: 'Checkpoint' });
export type Checkpoint = z.infer<typeof Checkpoint>;

/** As stored: the public fields and the shadow repository's tree and commit. */
export const CheckpointRecord = Checkpoint.extend({ conversation_id: z.uuid(), tree: z.string(), commit: z.string() });
export type CheckpointRecord = z.infer<typeof CheckpointRecord>;

export const CheckpointPage = pageOf(Checkpoint, 'CheckpointPage');
export const CheckpointListQuery = PageQuery.extend({ order: z.enum(['asc', 'desc']).default('asc') });

export const RewindBody = z
  .object({
    checkpoint_id: z.uuid(),
    files: z.boolean().default(true).describe('Restore the workdir to the checkpoint.'),
    conversation: z.boolean().default(true).describe('Truncate the LLM history to the events before the checkpoint (the log keeps them).'),
  })
  .strict()
  .meta({ id: 'RewindRequest' });
export type RewindBody = z.infer<typeof RewindBody>;

export const RewindResult = z
  .object({
    event: RewindEvent,
    undo_checkpoint: Checkpoint.describe('Taken just before the rewind: rewind to it to undo this one.'),
  })
  .meta({ id: 'RewindResult' });

export const FileChange = z
  .object({
    path: z.string(),
    status: z.enum(['added', 'modified', 'deleted']),
    diff: z.string().describe('Unified diff (git format; `Binary files ... differ` for binary files); secret values masked, cut past 256 KiB.'),
  })
  .meta({ id: 'FileChange' });
export type FileChange = z.infer<typeof FileChange>;

export const ChangesQuery = PageQuery.extend({
  since_checkpoint: z.uuid().optional().describe('Compare with this checkpoint instead of the first one (the state before the conversation\'s first run).'),
});
export const ChangesPage = pageOf(FileChange, 'ChangesPage');

export const ForkBody = z
  .object({
    at_seq: z.int().min(1).optional().describe('Copy the events up to this seq (default: all).'),
    title: z.string().max(500).nullable().optional(),
    copy_workdir: z.boolean().default(false).describe('Give the fork its own workdir: a copy of this one as of the matching checkpoint. Without it the fork works in the same workdir.'),
    copy_secrets: z.boolean().default(false).describe('Copy the secrets too (they are not copied otherwise).'),
  })
  .strict()
  .meta({ id: 'ForkRequest' });
export type ForkBody = z.infer<typeof ForkBody>;
