import { UnprocessableError } from '../errors.js';

/** A schedule that cannot fire as written: 422 `invalid_schedule`, naming the field and why. */
export class InvalidScheduleError extends UnprocessableError {
  constructor(field: string, reason: string) {
    super('invalid_schedule', `Invalid schedule: \`${field}\` ${reason}.`, { field, reason });
  }
}
