import fs from 'node:fs';
import { BashShellFactory } from '../../src/adapters/bash-shell.js';
import { OpenAiLlmClient } from '../../src/adapters/openai-llm.js';
import type { LlmRequest, LlmToolSchema } from '../../src/core/agent/llm.js';
import type { ShellSession } from '../../src/core/tools/shell-session.js';
import type { FakeLlm, RecordedRequest } from '../../test/fake-llm/fake-llm-server.js';

/**
 * P1's floor, each part alone: one round trip to the fake LLM (a request like the run's first:
 * its system prompt, one user message, the same tool schemas, answered with one tool call) and
 * one `true` in an already-running shell.
 */
export class StepFloor {
  readonly llmMs: number[] = [];
  readonly shellMs: number[] = [];
  /** CPU of this process (user + system, ms) over the recorded samples: the client and the in-process fake LLM; the shell's share. */
  cpu = { llmMs: 0, shellMs: 0 };
  private readonly llm = new OpenAiLlmClient();

  private constructor(
    private readonly fake: FakeLlm,
    private readonly request: LlmRequest,
    private readonly shell: ShellSession,
  ) {}

  static async start(options: { fake: FakeLlm; firstRequest: RecordedRequest; workdir: string }): Promise<StepFloor> {
    const body = options.firstRequest.body as unknown as { messages: { content: string }[]; tools: { function: LlmToolSchema }[] };
    const request: LlmRequest = {
      settings: { model: 'fake-model', base_url: options.fake.url, api_key: 'sk-bench' },
      messages: [
        { role: 'system', content: body.messages[0]!.content },
        { role: 'user', content: 'Run the commands.' },
      ],
      tools: body.tools.map((tool) => tool.function),
      signal: new AbortController().signal,
    };
    fs.mkdirSync(options.workdir, { recursive: true });
    const shell = await new BashShellFactory().create({ conversationId: 'floor', workdir: options.workdir, env: {} });
    const floor = new StepFloor(options.fake, request, shell);
    await floor.sample(10, { record: false });
    return floor;
  }

  /** `count` samples of each part, alternating. */
  async sample(count: number, options: { record: boolean } = { record: true }): Promise<void> {
    for (let i = 0; i < count; i++) {
      this.fake.setScript([{ toolCalls: [{ name: 'bash', arguments: { command: `true # floor ${i}` } }] }]);
      let started = performance.now();
      let cpu = process.cpuUsage();
      await this.llm.complete(this.request);
      if (options.record) {
        this.llmMs.push(performance.now() - started);
        this.cpu.llmMs += cpuMs(cpu);
      }
      started = performance.now();
      cpu = process.cpuUsage();
      await this.shell.run('true', { timeoutMs: 30_000, idleTimeoutMs: 30_000 });
      if (options.record) {
        this.shellMs.push(performance.now() - started);
        this.cpu.shellMs += cpuMs(cpu);
      }
    }
  }

  close(): Promise<void> {
    return this.shell.close();
  }
}

/** Milliseconds of this process's CPU (user + system) since `since`. */
export function cpuMs(since: NodeJS.CpuUsage): number {
  const used = process.cpuUsage(since);
  return (used.user + used.system) / 1000;
}
