import fs from 'node:fs';
import { randomUUID } from 'node:crypto';
import { AuditEntry, type AuditLog, type AuditQuery, type NewAuditEntry } from '../../core/access/audit-log.js';
import type { Page } from '../../core/pagination.js';

/**
 * The audit log as one line of JSON per entry in the data dir (`audit.log`, mode 0600), only ever
 * appended to. Entries are read back from the file for each page (a page scans from the start:
 * the log is read by operators, rarely).
 */
export class FileAuditLog implements AuditLog {
  private seq = 0;

  constructor(
    private readonly file: string,
    private readonly options: { fsync: boolean },
  ) {
    for (const entry of this.read()) this.seq = Math.max(this.seq, entry.seq);
  }

  async append(entry: NewAuditEntry): Promise<void> {
    const line = JSON.stringify({ id: randomUUID(), seq: ++this.seq, ...entry }) + '\n';
    const fd = fs.openSync(this.file, 'a', 0o600);
    try {
      fs.writeSync(fd, line);
      if (this.options.fsync) fs.fsyncSync(fd);
    } finally {
      fs.closeSync(fd);
    }
  }

  async page(query: AuditQuery): Promise<Page<AuditEntry>> {
    const items: AuditEntry[] = [];
    let more = false;
    for (const entry of this.read()) {
      if (entry.seq <= query.afterSeq) continue;
      if (query.owner !== undefined && entry.owner !== query.owner) continue;
      if (query.keyId !== undefined && entry.key_id !== query.keyId) continue;
      if (items.length === query.limit) {
        more = true;
        break;
      }
      items.push(entry);
    }
    return { items, next_page_id: more ? String(items[items.length - 1]!.seq) : null };
  }

  private *read(): Generator<AuditEntry> {
    let text: string;
    try {
      text = fs.readFileSync(this.file, 'utf8');
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') return;
      throw error;
    }
    for (const line of text.split('\n')) {
      if (line.length === 0) continue;
      // A line cut short by a crash is skipped: the entries around it stand.
      const parsed = AuditEntry.safeParse(safeJson(line));
      if (parsed.success) yield parsed.data;
    }
  }
}

function safeJson(line: string): unknown {
  try {
    return JSON.parse(line);
  } catch {
    return undefined;
  }
}
