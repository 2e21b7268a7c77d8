import type { CheckpointService } from '../../src/core/checkpoints/checkpoint-service.js';
import type { LlmClient, LlmSettings } from '../../src/core/agent/llm.js';
import type { AppendedEvent } from '../../src/core/events/event-log.js';
import type { ShellFactory } from '../../src/core/tools/shell-session.js';
import type { EventTap } from './instrumented.js';

/**
 * Named instants of one client turn (POST, LLM calls, tool, records stored, SSE seen), from
 * wrappers around the parts the server is given and a tap on its stored events. The critical
 * path of a two-step run is read off them as consecutive segments that add up to the total.
 */
export class TurnTimeline {
  private marks: [string, number][] = [];
  /** Time spent inside wrapped calls, by name (overlapping parts included). */
  readonly spent = new Map<string, number>();

  mark(name: string, at = performance.now()): void {
    this.marks.push([name, at]);
  }

  dump(): string {
    const t0 = this.first('post')!;
    // Sorted: the client's instants come in after the turn (children/turn-client.ts).
    return [...this.marks].sort((a, b) => a[1] - b[1]).map(([name, at]) => `${(at - t0).toFixed(2)} ${name}`).join('\n');
  }

  reset(): void {
    this.marks = [];
    this.spent.clear();
  }

  first(name: string): number | undefined {
    return this.marks.find(([mark]) => mark === name)?.[1];
  }

  last(name: string): number | undefined {
    return this.marks.findLast(([mark]) => mark === name)?.[1];
  }

  async time<T>(name: string, work: () => Promise<T>): Promise<T> {
    const started = performance.now();
    this.mark(`${name}:start`, started);
    try {
      return await work();
    } finally {
      const ended = performance.now();
      this.mark(`${name}:end`, ended);
      this.spent.set(name, (this.spent.get(name) ?? 0) + ended - started);
    }
  }

  /**
   * The client, timed; with its codec, as the server uses it unwrapped: without it, every request
   * of a run decoded the history kept in the client's wire form and encoded it again (the path of
   * a client that keeps messages its own way), which the server given the client itself never takes.
   */
  llm(inner: LlmClient): LlmClient {
    return {
      ...(inner.codec && { codec: inner.codec }),
      ...(inner.supportsJsonSchema && { supportsJsonSchema: (settings: LlmSettings) => inner.supportsJsonSchema!(settings) }),
      complete: (request) => this.time('llm', () => inner.complete(request)),
    };
  }

  shells(inner: ShellFactory): ShellFactory {
    return {
      create: async (options) => {
        const session = await this.time('shell start', () => inner.create(options));
        return new Proxy(session, {
          get: (target, property, receiver) => {
            if (property === 'run') return (command: string, runOptions: never) => this.time('tool', () => target.run(command, runOptions));
            const value = Reflect.get(target, property, receiver) as unknown;
            return typeof value === 'function' ? (value as (...args: unknown[]) => unknown).bind(target) : value;
          },
        });
      },
    };
  }

  /** Times the live checkpoint service's run hooks (the runtime calls them through the same object). */
  checkpoints(service: CheckpointService): void {
    for (const method of ['atRunStart', 'beforeTool', 'atRunEnd'] as const) {
      const original = service[method].bind(service) as (...args: unknown[]) => Promise<unknown>;
      (service as unknown as Record<string, unknown>)[method] = (...args: unknown[]) => this.time(`checkpoint ${method}`, () => original(...args));
    }
  }

  /** Marks each stored event (`stored:<kind>`, `stored:state:<status>`). */
  tap(tap: EventTap): void {
    tap.on(({ event }: AppendedEvent) => {
      const at = performance.now();
      this.mark(`stored:${event.kind}`, at);
      if (event.kind === 'state_update') this.mark(`stored:state:${event.status}`, at);
    });
  }

  /**
   * The critical path of a turn of two LLM calls around one tool call, as consecutive segments
   * (ms): they add up to POST → run end seen on SSE.
   */
  segments(): Record<SegmentName, number> {
    const points: [SegmentName, number | undefined][] = [
      ['POST → 1st LLM request', this.first('llm:start')],
      ['LLM 1', this.first('llm:end')],
      ['answer → tool starts', this.first('tool:start')],
      ['tool', this.first('tool:end')],
      ['tool end → 2nd LLM request', this.last('llm:start')],
      ['LLM 2', this.last('llm:end')],
      ['answer → run end stored', this.last('stored:state:idle')],
      ['stored → seen on SSE', this.last('sse end')],
    ];
    const out = {} as Record<SegmentName, number>;
    let previous = this.first('post')!;
    for (const [name, at] of points) {
      out[name] = at === undefined ? Number.NaN : at - previous;
      if (at !== undefined) previous = at;
    }
    return out;
  }
}

export const SEGMENTS = ['POST → 1st LLM request', 'LLM 1', 'answer → tool starts', 'tool', 'tool end → 2nd LLM request', 'LLM 2', 'answer → run end stored', 'stored → seen on SSE'] as const;
export type SegmentName = (typeof SEGMENTS)[number];
