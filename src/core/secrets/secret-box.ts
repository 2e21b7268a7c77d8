import { createCipheriv, createDecipheriv, createHash, hkdfSync, randomBytes } from 'node:crypto';

/** AES-256-GCM encryption of small values at rest. Output: `v1:<base64 iv|tag|ciphertext>`. */
export class SecretBox {
  private readonly key: Buffer;

  constructor(key: Buffer) {
    if (key.length !== 32) throw new Error('SecretBox needs a 32-byte key');
    this.key = key;
  }

  /** A key of its own for another use (e.g. signing the cluster's notices), derived so that neither reveals the other. */
  deriveKey(label: string): Buffer {
    return Buffer.from(hkdfSync('sha256', this.key, Buffer.alloc(0), `agentd ${label}`, 32));
  }

  /** A 32-byte key from configuration text: base64 of 32 bytes is used as is, anything else is hashed. */
  static keyFromText(text: string): Buffer {
    const decoded = Buffer.from(text, 'base64');
    if (decoded.length === 32 && /^[A-Za-z0-9+/_-]+={0,2}$/.test(text)) return decoded;
    return createHash('sha256').update(text, 'utf8').digest();
  }

  encrypt(plain: string): string {
    const iv = randomBytes(12);
    const cipher = createCipheriv('aes-256-gcm', this.key, iv);
    const body = Buffer.concat([cipher.update(plain, 'utf8'), cipher.final()]);
    return `v1:${Buffer.concat([iv, cipher.getAuthTag(), body]).toString('base64')}`;
  }

  /**
   * Large data sealed piece by piece (AES-256-GCM as above): `update` each piece, then `final`
   * gives the tag. Store `iv`, the pieces and the tag; `opening` takes them back. `clear`: data
   * stored beside them in clear that the tag authenticates too (GCM's additional data).
   */
  sealing(clear?: Buffer): { iv: Buffer; update(piece: Buffer): Buffer; final(): { rest: Buffer; tag: Buffer } } {
    const iv = randomBytes(12);
    const cipher = createCipheriv('aes-256-gcm', this.key, iv);
    if (clear) cipher.setAAD(clear);
    return { iv, update: (piece) => cipher.update(piece), final: () => ({ rest: cipher.final(), tag: cipher.getAuthTag() }) };
  }

  /** The reverse of `sealing` (with the same `clear`): `final` throws when the pieces or `clear` were sealed with another key or changed since. */
  opening(iv: Buffer, tag: Buffer, clear?: Buffer): { update(piece: Buffer): Buffer; final(): Buffer } {
    const decipher = createDecipheriv('aes-256-gcm', this.key, iv);
    decipher.setAuthTag(tag);
    if (clear) decipher.setAAD(clear);
    return { update: (piece) => decipher.update(piece), final: () => decipher.final() };
  }

  decrypt(sealed: string): string {
    if (!sealed.startsWith('v1:')) throw new Error('unknown secret format');
    const raw = Buffer.from(sealed.slice(3), 'base64');
    const decipher = createDecipheriv('aes-256-gcm', this.key, raw.subarray(0, 12));
    decipher.setAuthTag(raw.subarray(12, 28));
    return Buffer.concat([decipher.update(raw.subarray(28)), decipher.final()]).toString('utf8');
  }
}
