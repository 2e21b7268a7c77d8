import { createHmac } from 'node:crypto';

/**
 * Standard Webhooks signing (https://www.standardwebhooks.com): `v1,<base64 HMAC-SHA256 of
 * "<webhook-id>.<webhook-timestamp>.<body>">`. A `whsec_<base64>` secret signs with the decoded
 * bytes; any other string with its UTF-8 bytes.
 */
const WHSEC_PREFIX = 'whsec_';
const BASE64 = /^[A-Za-z0-9+/]+={0,2}$/;

export function isValidSecret(secret: string): boolean {
  if (secret.length === 0) return false;
  if (!secret.startsWith(WHSEC_PREFIX)) return true;
  const encoded = secret.slice(WHSEC_PREFIX.length);
  return BASE64.test(encoded) && encoded.length % 4 === 0 && Buffer.from(encoded, 'base64').length > 0;
}

export function secretKeyBytes(secret: string): Buffer {
  return secret.startsWith(WHSEC_PREFIX) ? Buffer.from(secret.slice(WHSEC_PREFIX.length), 'base64') : Buffer.from(secret, 'utf8');
}

export function signatureHeader(options: { secret: string; id: string; timestamp: number; body: string }): string {
  const mac = createHmac('sha256', secretKeyBytes(options.secret)).update(`${options.id}.${options.timestamp}.${options.body}`, 'utf8').digest('base64');
  return `v1,${mac}`;
}

/** The headers of one delivery attempt. `timestamp` is unix seconds. */
export function webhookHeaders(options: { id: string; timestamp: number; body: string; secret: string | null; userAgent: string }): Record<string, string> {
  const headers: Record<string, string> = {
    'content-type': 'application/json',
    'user-agent': options.userAgent,
    'webhook-id': options.id,
    'webhook-timestamp': String(options.timestamp),
  };
  if (options.secret) headers['webhook-signature'] = signatureHeader({ secret: options.secret, id: options.id, timestamp: options.timestamp, body: options.body });
  return headers;
}
