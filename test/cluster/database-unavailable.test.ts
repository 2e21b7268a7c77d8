/**
 * What a database outage looks like to a client, without a database: connection-level errors
 * (and only those) become 503 database_unavailable; the write barrier refuses at once while a
 * write is failing, and holds again once the writes go through.
 */
import { describe, expect, it } from 'vitest';
import { asDatabaseUnavailable, isConnectionError } from '../../src/adapters/postgres/connection-errors.js';
import { WritePipeline } from '../../src/adapters/postgres/write-pipeline.js';
import { AppError } from '../../src/core/errors.js';
import { toErrorResponse } from '../../src/http/plugins/errors.js';

const withCode = (code: string) => Object.assign(new Error(`failed: ${code}`), { code });

describe('database outages', () => {
  it('tells connection-level errors from a query the database refused', () => {
    for (const code of ['ECONNREFUSED', 'ECONNRESET', 'CONNECT_TIMEOUT', 'CONNECTION_CLOSED', 'CONNECTION_ENDED', 'CONNECTION_DESTROYED', '08006', '08001', '57P01', '57P03']) {
      expect(isConnectionError(withCode(code)), code).toBe(true);
    }
    for (const code of ['23505', '40001', '42P01', 'ENOENT']) expect(isConnectionError(withCode(code)), code).toBe(false);
    expect(isConnectionError(new Error('no code'))).toBe(false);
    expect(isConnectionError(null)).toBe(false);
  });

  it('answers a connection error 503 database_unavailable with a retry delay, and leaves other errors alone', () => {
    const translated = asDatabaseUnavailable(withCode('ECONNREFUSED'));
    expect(translated).toBeInstanceOf(AppError);
    const { status, body } = toErrorResponse(translated!);
    expect(status).toBe(503);
    expect(body).toMatchObject({ error: 'database_unavailable', details: { retry_after_s: expect.any(Number) } });
    expect(asDatabaseUnavailable(withCode('23505'))).toBeNull();
    expect(asDatabaseUnavailable(translated)).toBeNull();
  });

  it('refuses the write barrier at once while a write fails, and passes it once the write goes through', async () => {
    let down = true;
    const pipeline = new WritePipeline({ retryMs: 20, barrierMs: 60_000 });
    let attempts = 0;
    pipeline.run('conversation', async () => {
      attempts++;
      if (down) throw withCode('ECONNREFUSED');
    });
    await expect.poll(() => attempts).toBeGreaterThan(1);
    await expect(pipeline.settled()).rejects.toMatchObject({ code: 'database_unavailable' });
    down = false;
    await expect.poll(() => pipeline.pending).toBe(0);
    await expect(pipeline.settled()).resolves.toBeUndefined();
    // A new write while the database answers is waited for, not refused.
    let release!: () => void;
    pipeline.run('conversation', () => new Promise<void>((resolve) => (release = resolve)));
    const barrier = pipeline.settled();
    setTimeout(() => release(), 50);
    await expect(barrier).resolves.toBeUndefined();
    await pipeline.close();
  });
});
