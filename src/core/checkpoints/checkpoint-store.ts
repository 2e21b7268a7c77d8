import type { CheckpointRecord } from './checkpoint-schemas.js';

/** Where checkpoint records persist, appended in order; a crash never leaves half a record. */
export interface CheckpointStore {
  append(record: CheckpointRecord): void;
  /** A conversation's checkpoints, oldest first (read from storage: not for every step). */
  list(conversationId: string): readonly CheckpointRecord[];
  /** Its newest checkpoint (what the next one is compared with), kept at hand. */
  last(conversationId: string): CheckpointRecord | undefined;
  /** Where the conversation's shadow repository lives. */
  gitDirOf(conversationId: string): string;
}

/**
 * Work that must be complete or absent after a crash (a rewind, a fork): written before it
 * starts, removed when it is done; start-up finishes or undoes what it finds.
 */
export interface IntentStore {
  write(id: string, intent: Record<string, unknown>): void;
  remove(id: string): void;
  list(): { id: string; intent: Record<string, unknown> }[];
}
