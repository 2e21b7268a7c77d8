import fs from 'node:fs';
import path from 'node:path';
import { UnprocessableError } from '../../core/errors.js';
import type { Workdirs } from '../../core/conversations/workdirs.js';

/** Workdirs on the host's file system, kept out of the server's data dir (and out of a checkpoints dir beside them). */
export class HostWorkdirs implements Workdirs {
  constructor(private readonly options: { dataDir: string; workdirBase: string; checkpointsDir?: string }) {}

  prepare(requested: string, options: { isDefault: boolean }): { workdir: string; created: boolean } {
    if (!path.isAbsolute(requested) || requested.includes('\0')) {
      throw new UnprocessableError('invalid_workdir', 'workdir must be an absolute path.', { workdir: requested });
    }
    const existed = fs.existsSync(requested);
    if (existed && !fs.statSync(requested).isDirectory()) {
      throw new UnprocessableError('invalid_workdir', 'workdir exists and is not a directory.', { workdir: requested });
    }
    const dataDir = fs.realpathSync(this.options.dataDir);
    if (!options.isDefault) {
      const nearest = realpathOfNearest(requested);
      const workdirBase = realpathOfNearest(this.options.workdirBase);
      const underBase = isInside(nearest, workdirBase) && nearest !== workdirBase;
      if ((isInside(nearest, dataDir) && !underBase) || isInside(dataDir, nearest)) {
        throw new UnprocessableError('invalid_workdir', "workdir may not contain or lie inside the server's data directory.", { workdir: requested });
      }
      const checkpoints = this.options.checkpointsDir === undefined ? null : realpathOfNearest(this.options.checkpointsDir);
      if (checkpoints !== null && (isInside(nearest, checkpoints) || isInside(checkpoints, nearest))) {
        throw new UnprocessableError('invalid_workdir', "workdir may not contain or lie inside the server's checkpoints directory.", { workdir: requested });
      }
    }
    fs.mkdirSync(requested, { recursive: true });
    return { workdir: fs.realpathSync(requested), created: !existed };
  }

  async remove(workdir: string): Promise<void> {
    await fs.promises.rm(workdir, { recursive: true, force: true });
  }
}

function isInside(child: string, parent: string): boolean {
  const relative = path.relative(parent, child);
  return relative === '' || (!relative.startsWith('..') && !path.isAbsolute(relative));
}

/** realpath of the path, or of its nearest existing ancestor joined with the rest. */
function realpathOfNearest(target: string): string {
  let current = target;
  const rest: string[] = [];
  while (!fs.existsSync(current)) {
    rest.unshift(path.basename(current));
    const parent = path.dirname(current);
    if (parent === current) break;
    current = parent;
  }
  return path.join(fs.realpathSync(current), ...rest);
}
