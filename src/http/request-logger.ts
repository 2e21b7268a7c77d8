import type { FastifyBaseLogger } from 'fastify';
import type { Bindings, ChildLoggerOptions, Logger } from 'pino';

type Level = 'fatal' | 'error' | 'warn' | 'info' | 'debug' | 'trace';

/**
 * The logger Fastify is given (its loggerInstance): the server's pino logger, whose children made
 * for requests are RequestLoggers. Fastify makes one child per request through its default child
 * factory, `logger.child(bindings, options)`; with a factory of our own (the way this was done
 * before) it also checked the logger it got, method by method, on every request (about 2,500
 * instructions a request under callgrind, a tenth of what agentd adds to a bare route).
 */
export class ServerLogger implements FastifyBaseLogger {
  constructor(private readonly root: Logger) {}

  get level(): string {
    return this.root.level;
  }

  set level(level: string) {
    this.root.level = level;
  }

  /**
   * A request's logger (no level or serializers of its own: a RequestLogger, made into a pino child
   * only if it logs), or a logger with options of its own (Fastify's, once, with its serializers):
   * a pino child, whose own children are again made this way.
   */
  child(bindings: Bindings, options?: ChildLoggerOptions): FastifyBaseLogger {
    if (options === undefined || (options.level === undefined && options.serializers === undefined)) return new RequestLogger(this.root, bindings);
    return new ServerLogger(this.root.child(bindings, options));
  }

  fatal(...args: unknown[]): void {
    write(this.root, 'fatal', args);
  }
  error(...args: unknown[]): void {
    write(this.root, 'error', args);
  }
  warn(...args: unknown[]): void {
    write(this.root, 'warn', args);
  }
  info(...args: unknown[]): void {
    write(this.root, 'info', args);
  }
  debug(...args: unknown[]): void {
    write(this.root, 'debug', args);
  }
  trace(...args: unknown[]): void {
    write(this.root, 'trace', args);
  }
  silent(): void {}
}

function write(logger: Logger, level: Level, args: unknown[]): void {
  (logger[level] as (...values: unknown[]) => void).apply(logger, args);
}

/**
 * A request's logger, made into a pino child only when the request logs something of its own (an
 * error, a debug line): building a pino child for each of thousands of requests a second that
 * never log costs more than the request line itself (which app.ts writes through the root logger
 * with the same fields). Every line of a request about a conversation carries its id
 * (`/conversations/{id}/...`: the only routes with an `id`), read from the URL (`about`) when the
 * logger is made.
 */
export class RequestLogger implements FastifyBaseLogger {
  private made: Logger | null = null;
  private url: string | undefined;

  constructor(
    private readonly root: Logger,
    private readonly bindings: Bindings,
  ) {}

  /** The request's URL (app.ts, first thing): lines written from then on carry its conversation's id. */
  about(url: string): void {
    if (this.made === null) this.url = url;
  }

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
    const child = new RequestLogger(this.root, { ...this.bindings, ...bindings });
    child.url = this.url;
    return child;
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
    if (this.enabled(level)) write(this.logger(), level, args);
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
