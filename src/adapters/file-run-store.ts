import fs from 'node:fs';
import path from 'node:path';
import type { Run, RunStore } from '../core/agent/run-record.js';

/**
 * `<conversationsDir>/<id>/runs.jsonl`: one line per saved state of a run, appended; loading
 * keeps the newest state of each run. Loaded lazily and cached per conversation.
 */
export class FileRunStore implements RunStore {
  private readonly cache = new Map<string, Map<string, Run>>();

  constructor(private readonly conversationsDir: string) {}

  save(run: Run): void {
    const runs = this.load(run.conversation_id);
    const file = this.fileOf(run.conversation_id);
    fs.mkdirSync(path.dirname(file), { recursive: true });
    fs.appendFileSync(file, `${JSON.stringify(run)}\n`);
    runs.set(run.id, { ...run });
  }

  list(conversationId: string): Run[] {
    return [...this.load(conversationId).values()];
  }

  drop(conversationId: string): void {
    this.cache.delete(conversationId);
    fs.rmSync(this.fileOf(conversationId), { force: true });
  }

  private load(conversationId: string): Map<string, Run> {
    let runs = this.cache.get(conversationId);
    if (runs) return runs;
    runs = new Map();
    let text = '';
    try {
      text = fs.readFileSync(this.fileOf(conversationId), 'utf8');
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
    }
    for (const line of text.split('\n')) {
      if (!line) continue;
      try {
        const run = JSON.parse(line) as Run;
        runs.set(run.id, run);
      } catch {
        // a torn last line from a crash: that state was never acknowledged
      }
    }
    this.cache.set(conversationId, runs);
    return runs;
  }

  private fileOf(conversationId: string): string {
    return path.join(this.conversationsDir, conversationId, 'runs.jsonl');
  }
}
