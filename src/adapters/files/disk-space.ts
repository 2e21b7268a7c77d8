import fs from 'node:fs';
import path from 'node:path';
import { StorageFullError } from '../../core/errors.js';

const OUT_OF_SPACE = new Set(['ENOSPC', 'EDQUOT']);
/** After running out of space, the data dir counts as writable again once this much can be written. */
const RECOVERY_PROBE_BYTES = 256 * 1024;

/** ENOSPC / EDQUOT: the filesystem is full, nothing about the data is wrong. */
export function isOutOfSpace(error: unknown): boolean {
  return OUT_OF_SPACE.has((error as NodeJS.ErrnoException | undefined)?.code ?? '');
}

/**
 * Whether the data dir can take writes. Stores report running out of space here (and get the
 * domain error to throw); `/health` asks `check()`, which probes with a small write, or with a
 * larger one while the disk was last seen full, so that readiness comes back only once appends fit.
 */
export class DiskSpace {
  private fullSince: number | null = null;

  constructor(private readonly dataDir: string) {}

  /** The error a store throws for a failed write: StorageFullError when the disk is full, else the error itself. */
  storageError(error: unknown): unknown {
    if (!isOutOfSpace(error)) return error;
    this.fullSince ??= Date.now();
    return new StorageFullError();
  }

  get full(): boolean {
    return this.fullSince !== null;
  }

  check(): { ok: boolean; detail: string | null } {
    const probe = path.join(this.dataDir, `.health-${process.pid}`);
    try {
      fs.writeFileSync(probe, this.fullSince === null ? 'ok' : Buffer.alloc(RECOVERY_PROBE_BYTES));
      this.fullSince = null;
      return { ok: true, detail: null };
    } catch (error) {
      if (isOutOfSpace(error)) this.fullSince ??= Date.now();
      const code = (error as NodeJS.ErrnoException).code ?? 'error';
      return { ok: false, detail: isOutOfSpace(error) ? `data dir is out of space (${code})` : `data dir not writable (${code})` };
    } finally {
      fs.rmSync(probe, { force: true });
    }
  }
}
