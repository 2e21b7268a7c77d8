import fs from 'node:fs';
import { z } from 'zod';
import { writeFileAtomic } from '../files/index.js';
import type { CounterEntry, CounterPersistence } from '../../core/access/memory-quota-counters.js';

const Entries = z.array(z.object({ name: z.string(), start: z.number(), until: z.number().nullable(), amount: z.number() }));

/**
 * The owners' spend per period in one file of the data dir (`spend.json`, mode 0600), replaced
 * whole after each LLM call that cost something, so that a restart keeps what was spent. The write
 * waits for the end of the event loop's turn (one write for the calls of that turn), so that it is
 * not made inside the `usage` event's append, on the run's path; `flush` writes a pending one at
 * once (shutdown). A file that does not parse is set aside (`spend.json.damaged`, and `onDamaged`
 * says so) rather than stopping the server.
 */
export function fileSpendLedger(file: string, options: { fsync: boolean; onDamaged: (aside: string) => void }): CounterPersistence & { flush(): void } {
  let pending: CounterEntry[] | null = null;
  const flush = () => {
    if (pending === null) return;
    const entries = pending;
    pending = null;
    writeFileAtomic(file, JSON.stringify(entries), { mode: 0o600, fsync: options.fsync, syncDirectory: options.fsync });
  };
  return {
    flush,
    load(): CounterEntry[] {
      let text: string;
      try {
        text = fs.readFileSync(file, 'utf8');
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code === 'ENOENT') return [];
        throw error;
      }
      try {
        return Entries.parse(JSON.parse(text));
      } catch {
        fs.renameSync(file, `${file}.damaged`);
        options.onDamaged(`${file}.damaged`);
        return [];
      }
    },
    save(entries) {
      if (pending === null) setImmediate(flush);
      pending = entries;
    },
  };
}
