import { ConflictError } from '../errors.js';

/**
 * A checkpoint or a restore found the workdir changing under it (the agent's background jobs
 * still write, rename or swap): what git was reading or writing moved meanwhile. Kind
 * `conflict`, code `workdir_changed`; the same request succeeds once the workdir holds still.
 */
export class WorkdirChangedError extends ConflictError {
  constructor(step: 'checkpoint' | 'restore') {
    super('workdir_changed', `The workdir changed while its ${step === 'checkpoint' ? 'checkpoint was taken' : 'files were restored'} (a process of the agent is still changing it): stop its background jobs, then try again.`, { step });
    this.name = 'WorkdirChangedError';
  }
}
