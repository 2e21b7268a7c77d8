/**
 * How AGENTD_NATS_URL, AGENTD_NATS_CREDS and AGENTD_NATS_TLS_CA become the client's options: the
 * server without its credentials (so no client error or log line can carry them), one
 * authenticator per credential, TLS for tls:// or a CA; a credentials file that is neither a
 * .creds file nor an NKey user seed is refused without quoting it.
 */
import fs from 'node:fs';
import path from 'node:path';
import { createUser } from '@nats-io/nkeys';
import { describe, expect, it } from 'vitest';
import { natsConnectionOptions } from '../../src/adapters/cluster/nats-options.js';
import { tempDir } from '../support/agentd.js';

describe('NATS connection options', () => {
  it('takes a user and password, or a token, out of the URL', () => {
    const withPassword = natsConnectionOptions({ url: 'nats://agentd:s%40cret@nats.internal:4333' });
    expect(withPassword.servers).toBe('nats://nats.internal:4333');
    expect(JSON.stringify(withPassword)).not.toContain('cret');
    expect(withPassword.authenticator).toHaveLength(1);
    const auth = (withPassword.authenticator as ((nonce?: string) => unknown)[])[0]!();
    expect(auth).toEqual({ user: 'agentd', pass: 's@cret' });

    const withToken = natsConnectionOptions({ url: 'nats://t0ken@127.0.0.1' });
    expect(withToken.servers).toBe('nats://127.0.0.1:4222');
    expect((withToken.authenticator as ((nonce?: string) => unknown)[])[0]!()).toEqual({ auth_token: 't0ken' });

    expect(natsConnectionOptions({ url: 'nats://127.0.0.1:4222' })).toEqual({ servers: 'nats://127.0.0.1:4222' });
    expect(() => natsConnectionOptions({ url: 'nats://:secret@127.0.0.1:4222' })).toThrow('no user');
  });

  it('asks for TLS with tls:// or a CA file', () => {
    expect(natsConnectionOptions({ url: 'tls://nats.internal:4222' })).toEqual({ servers: 'tls://nats.internal:4222', tls: {} });
    expect(natsConnectionOptions({ url: 'nats://nats.internal:4222', tlsCaFile: '/etc/ca.pem' })).toEqual({ servers: 'tls://nats.internal:4222', tls: { caFile: '/etc/ca.pem' } });
  });

  it('reads a .creds file or an NKey user seed from AGENTD_NATS_CREDS, and refuses anything else', () => {
    const dir = tempDir('agentd-nats-creds-');
    const user = createUser();
    const seedFile = path.join(dir, 'user.nk');
    fs.writeFileSync(seedFile, `${new TextDecoder().decode(user.getSeed())}\n`);
    const seeded = natsConnectionOptions({ url: 'nats://127.0.0.1:4222', credsFile: seedFile });
    const signed = (seeded.authenticator as ((nonce?: string) => { nkey?: string; sig?: string })[])[0]!('nonce');
    expect(signed.nkey).toBe(user.getPublicKey());
    expect(signed.sig).toEqual(expect.any(String));

    const credsFile = path.join(dir, 'user.creds');
    fs.writeFileSync(credsFile, `-----BEGIN NATS USER JWT-----\neyJ0eXAiOiJKV1QifQ.e30.c2ln\n------END NATS USER JWT------\n\n-----BEGIN USER NKEY SEED-----\n${new TextDecoder().decode(user.getSeed())}\n------END USER NKEY SEED------\n`);
    expect(natsConnectionOptions({ url: 'nats://127.0.0.1:4222', credsFile }).authenticator).toHaveLength(1);

    const junk = path.join(dir, 'junk');
    fs.writeFileSync(junk, 'hunter2');
    expect(() => natsConnectionOptions({ url: 'nats://127.0.0.1:4222', credsFile: junk })).toThrow(/neither a \.creds file/);
    try {
      natsConnectionOptions({ url: 'nats://127.0.0.1:4222', credsFile: junk });
    } catch (error) {
      expect((error as Error).message).not.toContain('hunter2');
    }
  });
});
