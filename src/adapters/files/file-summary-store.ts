import fs from 'node:fs';
import path from 'node:path';
import { syncDirectory } from './sync-directory.js';
import type { ConversationSummary, SavedSummaries, SummaryStore } from '../../core/conversations/summary-store.js';
import { writeFileAtomicAsync } from './atomic-write.js';

/**
 * `<dataDir>/summaries.json`: written at a clean shutdown, removed when start-up reads it. Either
 * `{version: 2, snapshot: <token>}`, when the records snapshot written at the same shutdown holds
 * the summaries (record-snapshot.ts), or (the snapshot not saved, or a data dir of an older server)
 * `{version: 1, summaries: {<id>: {updated_at, event_count, usage}}}` (usage: of newer servers only).
 */
export class FileSummaryStore implements SummaryStore {
  constructor(
    private readonly file: string,
    private readonly options: { fsync?: boolean } = {},
  ) {}

  async take(): Promise<SavedSummaries | null> {
    let text: string;
    try {
      text = await fs.promises.readFile(this.file, 'utf8');
    } catch {
      return null;
    }
    // Gone before anything can be appended: a crash from now on leaves no stale summaries behind.
    await fs.promises.rm(this.file, { force: true });
    // With AGENTD_FSYNC (power loss, not only a crash), gone on disk too: summaries.json naming a
    // snapshot has the next start take its records and summaries without a look at their files.
    if (this.options.fsync) syncDirectory(path.dirname(this.file));
    try {
      return summariesOf(JSON.parse(text));
    } catch {
      return null;
    }
  }

  async save(summaries: ReadonlyMap<string, ConversationSummary>, options: { inSnapshot?: string } = {}): Promise<void> {
    const saved = options.inSnapshot === undefined ? { version: 1, summaries: Object.fromEntries(summaries) } : { version: 2, snapshot: options.inSnapshot };
    await writeFileAtomicAsync(this.file, JSON.stringify(saved), { mode: 0o600 });
  }
}

/**
 * Checked by hand: `{version: 2, snapshot}` with a string, or `{version: 1, summaries}` with one
 * summary per conversation (at start-up, when a schema library's first (cold) pass over 10,000
 * entries costs more than the file's JSON.parse). Anything else: null (each log is read instead).
 */
function summariesOf(value: unknown): SavedSummaries | null {
  const file = value as { version?: unknown; summaries?: unknown; snapshot?: unknown } | null;
  if (typeof file !== 'object' || file === null) return null;
  if (file.version === 2) return typeof file.snapshot === 'string' ? { inSnapshot: file.snapshot } : null;
  if (file.version !== 1 || typeof file.summaries !== 'object' || file.summaries === null) return null;
  const out = new Map<string, ConversationSummary>();
  for (const [id, summary] of Object.entries(file.summaries as Record<string, { updated_at?: unknown; event_count?: unknown; usage?: unknown } | null>)) {
    if (typeof summary !== 'object' || summary === null) return null;
    const { updated_at, event_count } = summary;
    if (typeof updated_at !== 'string' || typeof event_count !== 'number' || !Number.isInteger(event_count) || event_count < 0) return null;
    if (summary.usage === undefined) out.set(id, { updated_at, event_count });
    else if (isUsage(summary.usage)) out.set(id, { updated_at, event_count, usage: summary.usage });
    else return null;
  }
  return out;
}

/** Usage totals: counts that are whole and not negative, a cost not negative. */
function isUsage(value: unknown): value is NonNullable<ConversationSummary['usage']> {
  if (typeof value !== 'object' || value === null) return false;
  const usage = value as Record<string, unknown>;
  const count = (n: unknown, optional: boolean) => (optional && n === undefined) || (typeof n === 'number' && Number.isInteger(n) && n >= 0);
  return count(usage.prompt_tokens, false) && count(usage.completion_tokens, false) && typeof usage.cost === 'number' && usage.cost >= 0 && count(usage.cached_tokens, true) && count(usage.reasoning_tokens, true);
}
