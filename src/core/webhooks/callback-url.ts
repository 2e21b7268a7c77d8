import { UnprocessableError } from '../errors.js';

/** A callback URL as stored and compared: parsed, http or https only, in its normal form. */
export function normalizeCallbackUrl(raw: string): string {
  let url: URL;
  try {
    url = new URL(raw.trim());
  } catch {
    throw new UnprocessableError('invalid_callback_url', 'The callback url is not a valid absolute URL.', { url: raw });
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    throw new UnprocessableError('invalid_callback_url', 'The callback url must be http or https.', { url: raw });
  }
  return url.href;
}
