import { UnprocessableError } from '../errors.js';

/** A callback URL as stored and compared: parsed, http or https only, in its normal form. */
export function normalizeCallbackUrl(raw: string): string {
  let url: URL;
  try {
    url = new URL(raw.trim());
  } catch {
    throw new UnprocessableError('invalid_callback_url', 'The callback url is not a valid absolute URL.');
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    throw new UnprocessableError('invalid_callback_url', 'The callback url must be http or https.', { url: redactUrlCredentials(url.href) });
  }
  return url.href;
}

/** The URL as responses show it: credentials in it (`user:pw@`) are used for delivery, never shown. */
export function redactUrlCredentials(raw: string): string {
  const url = new URL(raw);
  if (url.username === '' && url.password === '') return raw;
  url.username = 'redacted';
  url.password = '';
  return url.href;
}
