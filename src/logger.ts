import pino, { type Logger } from 'pino';

/** Paths pino redacts wherever they appear in a log record. Secret values are masked before logging. */
const REDACT = [
  'req.headers.authorization',
  'headers.authorization',
  '*.api_key',
  '*.apiKey',
  '*.secret',
  '*.secrets',
  'llm.api_key',
  'config.masterKeys',
];

/** A URL as logged: `access_token` (SSE's query-string key) never reaches a log line. */
export function loggableUrl(url: string): string {
  return url.replace(/([?&]access_token=)[^&]*/gi, '$1[redacted]');
}

const serializers = {
  req: (req: { method?: string; url?: string; id?: string; ip?: string }) => ({ id: req.id, method: req.method, url: loggableUrl(req.url ?? ''), ip: req.ip }),
  res: (res: { statusCode?: number }) => ({ status: res.statusCode }),
  err: pino.stdSerializers.err,
};

export function createLogger(options: { level: string; destination?: NodeJS.WritableStream }): Logger {
  return pino({ level: options.level, redact: { paths: REDACT, censor: '[redacted]' }, serializers, base: { service: 'agentd' } }, options.destination ?? process.stdout);
}
