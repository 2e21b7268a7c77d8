import fs from 'node:fs';
import { OpenAiLlmClient } from '../../src/adapters/llm/openai-llm.js';
import type { LlmMessage, LlmRequest, LlmToolSchema } from '../../src/core/agent/llm.js';
import type { ShellFactory, ShellSession } from '../../src/core/tools/shell-session.js';
import type { FakeLlm, RecordedRequest } from '../../test/fake-llm/fake-llm-server.js';

/** CPU of this process (user + system, ms) over a floor's samples. */
export interface FloorCpu {
  ms: number;
  samples: number;
}

/**
 * P1's floor, each part alone, through the client the run uses, against the same fake LLM:
 *
 * - one LLM round trip with the same request the run sent at that step (`replay`): the recorded
 *   requests of a run are sent again, one each, their messages handed to the client as the
 *   history keeps them (the client's own texts, encoded beforehand) and the same tool schemas,
 *   answered with one tool call as in the run. A step's request carries the whole history (a
 *   67 KiB body by step 200): the fake parses and checks it, and the client sends it, the same
 *   work whether the agent or the floor asks;
 * - the floor used until round 2's fourth session (`sample`), kept as a row: a request like the
 *   run's first (system prompt and one user message), whatever the step;
 * - one `true` in an already-running shell.
 */
export class StepFloor {
  /** Round trips with the run's own requests, replayed. */
  readonly llmMs: number[] = [];
  /** Round trips with a request like the run's first. */
  readonly firstLlmMs: number[] = [];
  readonly shellMs: number[] = [];
  readonly cpu = { llm: { ms: 0, samples: 0 } as FloorCpu, firstLlm: { ms: 0, samples: 0 } as FloorCpu, shell: { ms: 0, samples: 0 } as FloorCpu };
  private readonly llm = new OpenAiLlmClient();
  /** One set of tool schema objects for every replayed request, as a run keeps its own (the client keeps each one's text). */
  private readonly tools = new Map<string, LlmToolSchema>();

  private constructor(
    private readonly fake: FakeLlm,
    private readonly firstRequest: LlmRequest,
    private readonly shell: ShellSession,
  ) {}

  /** `shells`: the server's own (its sandbox, its spawner), so that the floor's command runs in a shell like the agent's. */
  static async start(options: { fake: FakeLlm; firstRequest: RecordedRequest; workdir: string; shells: ShellFactory }): Promise<StepFloor> {
    const body = options.firstRequest.body as unknown as { messages: { content: string }[]; tools: { function: LlmToolSchema }[] };
    const request: LlmRequest = {
      settings: settingsOf(options.fake),
      messages: [
        { role: 'system', content: body.messages[0]!.content },
        { role: 'user', content: 'Run the commands.' },
      ],
      tools: body.tools.map((tool) => tool.function),
      signal: new AbortController().signal,
    };
    fs.mkdirSync(options.workdir, { recursive: true });
    const shell = await options.shells.create({ conversationId: 'floor', workdir: options.workdir, env: {} });
    const floor = new StepFloor(options.fake, request, shell);
    await floor.sample(10, { record: false });
    await floor.replay([options.firstRequest], { record: false });
    return floor;
  }

  /** `count` samples of the first-request round trip and of the shell, alternating. */
  async sample(count: number, options: { record: boolean } = { record: true }): Promise<void> {
    for (let i = 0; i < count; i++) {
      this.fake.setScript([floorTurn(i)]);
      await this.timed(options.record ? { ms: this.firstLlmMs, cpu: this.cpu.firstLlm } : null, () => this.llm.complete(this.firstRequest));
      await this.timed(options.record ? { ms: this.shellMs, cpu: this.cpu.shell } : null, () => this.shell.run('true', { timeoutMs: 30_000, idleTimeoutMs: 30_000 }));
    }
  }

  /**
   * One round trip per recorded request, with the same messages and tools: the client gets the
   * messages as the run's history hands them over (its codec's texts, made before the clock starts).
   */
  async replay(recorded: readonly RecordedRequest[], options: { record: boolean } = { record: true }): Promise<void> {
    const requests = recorded.map((request) => this.requestLike(request));
    for (const [i, request] of requests.entries()) {
      this.fake.setScript([floorTurn(i)]);
      await this.timed(options.record ? { ms: this.llmMs, cpu: this.cpu.llm } : null, () => this.llm.complete(request));
      // The same request, or this is not the step's floor: checked off the clock.
      const sent = this.fake.requests.at(-1)!.body;
      const original = recorded[i]!.body;
      if (JSON.stringify([sent.messages, sent.tools]) !== JSON.stringify([original.messages, original.tools])) throw new Error(`the floor's replay of request ${recorded[i]!.index} differs from the run's`);
    }
  }

  close(): Promise<void> {
    return this.shell.close();
  }

  private requestLike(recorded: RecordedRequest): LlmRequest {
    const codec = this.llm.codec;
    const body = recorded.body as unknown as { messages: unknown[]; tools: { function: LlmToolSchema }[] };
    const items = body.messages.map((wire) => {
      const message: LlmMessage = codec.decode(JSON.stringify(wire));
      return codec.encode(message) ?? message;
    });
    const tools = body.tools.map(({ function: tool }) => {
      const kept = this.tools.get(tool.name) ?? tool;
      this.tools.set(tool.name, kept);
      return kept;
    });
    const encoded = { codec, items };
    let decoded: LlmMessage[] | undefined;
    const request = { settings: settingsOf(this.fake), encoded, tools, signal: new AbortController().signal } as Omit<LlmRequest, 'messages'>;
    // As the run's requests: the messages are decoded only if the client reads them.
    return Object.defineProperty(request, 'messages', { get: () => (decoded ??= items.map((item) => (typeof item === 'string' ? codec.decode(item) : item))), enumerable: true }) as LlmRequest;
  }

  private async timed(into: { ms: number[]; cpu: FloorCpu } | null, work: () => Promise<unknown>): Promise<void> {
    const started = performance.now();
    const cpu = process.cpuUsage();
    await work();
    if (!into) return;
    into.ms.push(performance.now() - started);
    into.cpu.ms += cpuMs(cpu);
    into.cpu.samples += 1;
  }
}

function settingsOf(fake: FakeLlm): LlmRequest['settings'] {
  return { model: 'fake-model', base_url: fake.url, api_key: 'sk-bench' };
}

/** The fake's answer to a floor request: one tool call, as in the run (each differs, as the run's do). */
function floorTurn(i: number) {
  return { toolCalls: [{ name: 'bash', arguments: { command: `true # floor ${i}` } }] };
}

/** Milliseconds of this process's CPU (user + system) since `since`. */
export function cpuMs(since: NodeJS.CpuUsage): number {
  const used = process.cpuUsage(since);
  return (used.user + used.system) / 1000;
}
