import { Writable } from 'node:stream';
import pino, { type Logger } from 'pino';
import pretty from 'pino-pretty';

/** Paths pino redacts wherever they appear in a log record. */
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

/** The last line of defence: rewrites every log line before it is written (masks secret values). */
export interface LogScrubber {
  scrub(line: string): string;
}

export interface LoggerOptions {
  level: string;
  /** Where lines go (default: stdout, pretty-printed when it is a terminal). */
  destination?: NodeJS.WritableStream;
  scrubber?: LogScrubber;
}

export function createLogger(options: LoggerOptions): Logger {
  const target = options.destination ?? (process.stdout.isTTY ? pretty({ sync: true, colorize: true, translateTime: 'SYS:HH:MM:ss.l' }) : pino.destination({ dest: 1, sync: true }));
  const scrubber = options.scrubber;
  const stream = scrubber
    ? new Writable({
        write(chunk: Buffer | string, _encoding, callback) {
          target.write(scrubber.scrub(chunk.toString()));
          callback();
        },
      })
    : target;
  return pino({ level: options.level, redact: { paths: REDACT, censor: '[redacted]' }, serializers, base: { service: 'agentd' } }, stream);
}
