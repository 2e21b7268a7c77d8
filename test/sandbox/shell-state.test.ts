import { execFileSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { EXPORTS_COMMAND, shellStateFrom } from '../../src/adapters/shell/shell-state.js';

describe('shellStateFrom', () => {
  it("reads bash's own `export -p`: changed and new values (quotes, newlines, $, backslashes), unsets; unchanged server values are left out", () => {
    const tricky = 'a "quoted" $HOME `tick` back\\slash \x27single\x27\nsecond\tline é';
    const exports = execFileSync('bash', ['--norc', '--noprofile', '-c', `unset GONE; export TRICKY="$1" CHANGED=new EMPTY=; ${EXPORTS_COMMAND}`, 'x', tricky], {
      encoding: 'utf8',
      env: { PATH: process.env.PATH ?? '/usr/bin:/bin', SAME: 'same', CHANGED: 'old', GONE: 'x' },
    });
    const state = shellStateFrom({ cwd: '/w/sub', exports, serverEnv: { SAME: 'same', CHANGED: 'old', GONE: 'x', PATH: process.env.PATH ?? '/usr/bin:/bin' } });
    expect(state.cwd).toBe('/w/sub');
    expect(state.env).toEqual({ TRICKY: tricky, CHANGED: 'new', EMPTY: '' });
    expect(state.unset).toEqual(['GONE']);
  });
});
