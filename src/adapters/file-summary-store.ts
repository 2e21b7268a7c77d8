import fs from 'node:fs';
import { randomBytes } from 'node:crypto';
import { ConversationSummary, SummaryFile, type SummaryStore } from '../core/conversations/summary-store.js';

/** `<dataDir>/summaries.json`: written at a clean shutdown, removed when start-up reads it. */
export class FileSummaryStore implements SummaryStore {
  constructor(private readonly file: string) {}

  async take(): Promise<Map<string, ConversationSummary> | null> {
    let text: string;
    try {
      text = await fs.promises.readFile(this.file, 'utf8');
    } catch {
      return null;
    }
    // Gone before anything can be appended: a crash from now on leaves no stale summaries behind.
    await fs.promises.rm(this.file, { force: true });
    let parsed: ReturnType<typeof SummaryFile.safeParse>;
    try {
      parsed = SummaryFile.safeParse(JSON.parse(text));
    } catch {
      return null;
    }
    return parsed.success ? new Map(Object.entries(parsed.data.summaries)) : null;
  }

  async save(summaries: ReadonlyMap<string, ConversationSummary>): Promise<void> {
    const temp = `${this.file}.${randomBytes(6).toString('hex')}.tmp`;
    try {
      await fs.promises.writeFile(temp, JSON.stringify({ version: 1, summaries: Object.fromEntries(summaries) }), { mode: 0o600 });
      await fs.promises.rename(temp, this.file);
    } catch (error) {
      await fs.promises.rm(temp, { force: true });
      throw error;
    }
  }
}
