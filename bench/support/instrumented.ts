import type { LlmClient, LlmRequest, LlmResponse } from '../../src/core/agent/llm.js';
import type { EventBus } from '../../src/core/events/event-bus.js';
import type { EventRecorder } from '../../src/core/events/event-recorder.js';
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
  return { complete: (request: LlmRequest): Promise<LlmResponse> => meter.time(() => inner.complete(request)) };
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
 * Times the recorder's appends (log write + bookkeeping listeners) and the bus fan-out inside
 * them, separately, by wrapping the two methods of the live instances.
 */
export function meterEvents(recorder: EventRecorder, bus: EventBus): { append: Meter; fanOut: Meter } {
  const append = new Meter();
  const fanOut = new Meter();
  const publish = bus.publish.bind(bus);
  bus.publish = (message) => {
    const started = performance.now();
    publish(message);
    fanOut.add(performance.now() - started);
  };
  const record = recorder.append.bind(recorder);
  recorder.append = (conversationId, event) => {
    const fanOutBefore = fanOut.ms;
    const started = performance.now();
    const appended = record(conversationId, event);
    append.add(performance.now() - started - (fanOut.ms - fanOutBefore));
    return appended;
  };
  return { append, fanOut };
}
