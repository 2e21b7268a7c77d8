/** Where a conversation's checkpoints live: a git directory of the server's, and the workdir it records. */
export interface ShadowTarget {
  /** The shadow repository (in the data dir, never the user's own `.git`). */
  gitDir: string;
  workdir: string;
}

export type ChangeStatus = 'added' | 'modified' | 'deleted';

export interface ChangedPath {
  path: string;
  status: ChangeStatus;
}

/** The tree of a workdir with nothing in it. */
export const EMPTY_TREE = '4b825dc642cb6eb9a060e54bf8d69288fbee4904';

/**
 * The workdir's states as trees in a shadow git repository (an adapter runs git; core only
 * names trees). Every call on one target must be serialised by the caller (the index is shared).
 */
export interface ShadowRepository {
  /** Whether the repository tool is installed (else checkpoints are off and say why). */
  available(): Promise<{ ok: true } | { ok: false; reason: string }>;
  /** Record the workdir's current state; returns its tree. Cost follows what changed since the last call. */
  snapshot(target: ShadowTarget): Promise<string>;
  /** Keep a tree reachable (a commit on the shadow's own branch); returns the commit. */
  keep(target: ShadowTarget, tree: string, message: string): Promise<string>;
  /** Paths that differ between two trees. */
  changes(target: ShadowTarget, from: string, to: string): Promise<ChangedPath[]>;
  /** Unified diffs of the given paths between two trees, by path. */
  diffs(target: ShadowTarget, from: string, to: string, paths: readonly string[]): Promise<Map<string, string>>;
  /**
   * Make the workdir hold `to` (it holds `from`, just snapshotted): changed and deleted files are
   * written or removed; files the snapshot skipped (ignored, too large) are left alone.
   */
  restore(target: ShadowTarget, from: string, to: string): Promise<void>;
  /** Write `tree` into `intoDir` (an empty directory), e.g. the workdir of a fork. */
  exportTree(gitDir: string, tree: string, intoDir: string): Promise<void>;
  /** The conversation is deleted: what is kept in memory about its repository goes. */
  forget?(gitDir: string): void;
}
