import type { FastifyBaseLogger } from 'fastify';
import type { Bindings, ChildLoggerOptions, Logger } from 'pino';

type Level = 'fatal' | 'error' | 'warn' | 'info' | 'debug' | 'trace';

/**
 * A request's logger (`request.log` and `reply.log`, set by app.ts as the request comes in), made
 * into a pino child only when the request logs something of its own (an error, a debug line):
 * building a pino child for each of thousands of requests a second that never log costs more than
 * the request line itself (which app.ts writes through the root logger with the same fields).
 * Every line of a request about a conversation carries its id (`/conversations/{id}/...`: the only
 * routes with an `id`), read from the URL when the child is made.
 */
export class RequestLogger implements FastifyBaseLogger {
  private made: Logger | null = null;

  constructor(
    private readonly root: Logger,
    private readonly bindings: Bindings,
    private readonly url: string | undefined,
  ) {}

  get level(): string {
    return this.root.level;
  }

  set level(level: string) {
    this.logger().level = level;
  }

  private logger(): Logger {
    return (this.made ??= this.root.child(withConversation(this.bindings, this.url)));
  }

  private enabled(level: string): boolean {
    return this.made ? this.made.isLevelEnabled(level) : this.root.isLevelEnabled(level);
  }

  child(bindings: Bindings, options?: ChildLoggerOptions): FastifyBaseLogger {
    if (this.made || (options && Object.keys(options).length > 0)) return this.logger().child(bindings, options);
    return new RequestLogger(this.root, { ...this.bindings, ...bindings }, this.url);
  }

  // Methods on the prototype, not arrow-function fields: a request's logger is made for every request, and seven closures each were most of its cost.
  fatal(...args: unknown[]): void {
    this.write('fatal', args);
  }
  error(...args: unknown[]): void {
    this.write('error', args);
  }
  warn(...args: unknown[]): void {
    this.write('warn', args);
  }
  info(...args: unknown[]): void {
    this.write('info', args);
  }
  debug(...args: unknown[]): void {
    this.write('debug', args);
  }
  trace(...args: unknown[]): void {
    this.write('trace', args);
  }
  silent(): void {}

  private write(level: Level, args: unknown[]): void {
    if (!this.enabled(level)) return;
    const logger = this.logger();
    (logger[level] as (...values: unknown[]) => void).apply(logger, args);
  }
}

const CONVERSATION_PATH = /^\/conversations\/([^/?#]+)/;

function withConversation(bindings: Bindings, url: string | undefined): Bindings {
  const match = url === undefined ? null : CONVERSATION_PATH.exec(url);
  if (!match || match[1] === 'count' || 'conversation_id' in bindings) return bindings;
  let id = match[1]!;
  try {
    id = decodeURIComponent(id);
  } catch {
    // Not valid percent-encoding: logged as sent.
  }
  return { ...bindings, conversation_id: id };
}
