import { expect } from 'vitest';

/**
 * An error answer in the contract's shape, checked in full: its status, its machine code, and a
 * message that says what went wrong (a pattern it must match), not only a status.
 */
export function expectError(response: { status: number; body: any }, expected: { status: number; error: string; message: RegExp }): void {
  const where = `${response.status} ${JSON.stringify(response.body)}`;
  expect(response.status, where).toBe(expected.status);
  expect(Object.keys(response.body ?? {}).sort(), where).toEqual(['details', 'error', 'message']);
  expect(response.body.error, where).toBe(expected.error);
  expect(response.body.message, where).toMatch(expected.message);
}
