import fs from 'node:fs';
import path from 'node:path';
import type { IntentStore } from '../../core/checkpoints/checkpoint-store.js';
import { writeFileAtomic } from '../files/index.js';

/**
 * `<dir>/<id>.json`, each written to a temp file, fsynced and renamed into place. `dir` is the
 * data dir's `intents`, or a directory several instances share (`shared`: a temp file may be
 * another instance's write in progress, so none is removed at start).
 */
export class FileIntentStore implements IntentStore {
  constructor(
    private readonly dir: string,
    options: { shared?: boolean } = {},
  ) {
    fs.mkdirSync(dir, { recursive: true, mode: 0o700 });
    if (!options.shared) for (const name of fs.readdirSync(dir)) if (name.endsWith('.tmp')) fs.rmSync(path.join(dir, name), { force: true });
  }

  write(id: string, intent: Record<string, unknown>): void {
    writeFileAtomic(path.join(this.dir, `${id}.json`), JSON.stringify(intent), { mode: 0o600, fsync: true, syncDirectory: true });
  }

  remove(id: string): void {
    fs.rmSync(path.join(this.dir, `${id}.json`), { force: true });
  }

  list(): { id: string; intent: Record<string, unknown> }[] {
    const out: { id: string; intent: Record<string, unknown> }[] = [];
    for (const name of fs.readdirSync(this.dir).sort()) {
      if (!name.endsWith('.json')) continue;
      try {
        out.push({ id: name.slice(0, -'.json'.length), intent: JSON.parse(fs.readFileSync(path.join(this.dir, name), 'utf8')) as Record<string, unknown> });
      } catch {
        // written by rename: a file that does not parse was not written by this store
      }
    }
    return out;
  }
}
