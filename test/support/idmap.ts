import fs from 'node:fs';
import { sandboxUid } from '../../src/adapters/sandbox/identity.js';
import { sandboxPrograms } from '../../src/adapters/sandbox/mounts.js';
import { WorkdirIdmaps } from '../../src/adapters/sandbox/workdir-idmap.js';
import { tempDir } from './agentd.js';

/**
 * Why this kernel (and the temp dir's filesystem) refuses a workdir's id-mapped mount, or null
 * when it takes one: the server's own check (src/adapters/sandbox/workdir-idmap.ts), as root, on
 * a scratch directory.
 */
export async function idmapRefusal(): Promise<string | null> {
  const scratch = fs.realpathSync(tempDir('agentd-idmap-check-'));
  let refusal: string | null = null;
  try {
    const idmaps = new WorkdirIdmaps({ ...sandboxPrograms(process.env.PATH ?? ''), onRefused: (_, reason) => (refusal = reason) });
    await idmaps.check(scratch, { uid: sandboxUid(scratch), gid: sandboxUid(scratch) });
  } finally {
    fs.rmSync(scratch, { recursive: true, force: true });
  }
  return refusal;
}
