import type { LlmClient, LlmRequest, LlmResponse } from '../../src/core/agent/llm.js';
import type { AppendedEvent } from '../../src/core/events/event-log.js';
import type { EventReader, EventRecorder } from '../../src/core/events/event-recorder.js';
import type { ShellFactory, ShellRunOptions, ShellSession } from '../../src/core/tools/shell-session.js';

/** Time spent in one part of the server, summed over calls. */
export class Meter {
  ms = 0;
  calls = 0;

  add(ms: number): void {
    this.ms += ms;
    this.calls += 1;
  }

  async time<T>(work: () => Promise<T>): Promise<T> {
    const started = performance.now();
    try {
      return await work();
    } finally {
      this.add(performance.now() - started);
    }
  }
}

/** The LlmClient the runtime is given, timed (client side: request, fake server, streamed answer). */
export function timedLlm(inner: LlmClient, meter: Meter): LlmClient {
  return { ...(inner.codec && { codec: inner.codec }), complete: (request: LlmRequest): Promise<LlmResponse> => meter.time(() => inner.complete(request)) };
}

/** The ShellFactory the runtime is given, with every `run` timed. */
export function timedShells(inner: ShellFactory, meter: Meter): ShellFactory {
  return {
    async create(options) {
      const session = await inner.create(options);
      const timed: ShellSession = {
        run: (command: string, runOptions: ShellRunOptions & { isInput?: boolean }) => meter.time(() => session.run(command, runOptions)),
        setEnv: (vars, unset) => session.setEnv(vars, unset),
        interrupt: () => session.interrupt(),
        close: () => session.close(),
        get pid() {
          return session.pid;
        },
        get alive() {
          return session.alive;
        },
      };
      return timed;
    },
  };
}

/**
 * Times the recorder's appends (mask, log write, fan-out to live subscribers inside the log,
 * bookkeeping readers), by wrapping the method of the live instance.
 */
export function meterEvents(recorder: EventRecorder): { append: Meter } {
  const append = new Meter();
  const record = recorder.append.bind(recorder);
  recorder.append = (conversationId, event) => append.time(() => record(conversationId, event));
  return { append };
}

/** An in-process reader of every stored event (given to the server as `overrides.readers`) that benchmarks listen on. */
export class EventTap implements EventReader {
  readonly name = 'benchmark tap';
  private readonly listeners = new Set<(appended: AppendedEvent) => void>();

  read(appended: AppendedEvent): void {
    for (const listener of this.listeners) listener(appended);
  }

  on(listener: (appended: AppendedEvent) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }
}
