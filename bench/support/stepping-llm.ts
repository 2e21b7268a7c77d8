import type { RecordedRequest } from '../../test/fake-llm/fake-llm-server.js';

/**
 * A fake model for multi-step runs: each run is `steps` `bash true # <step>` calls, then an answer. A
 * conversation is known by its first user message (its tag); the time of every request is kept
 * per tag, so step latencies (request to next request of the same conversation) can be computed.
 */
export class SteppingModel {
  readonly requestTimes = new Map<string, number[]>();

  constructor(private readonly steps: number) {}

  readonly answer = (recorded: RecordedRequest) => {
    const messages = recorded.body.messages ?? [];
    const firstUser = messages.find((message) => message.role === 'user');
    const tag = typeof firstUser?.content === 'string' ? firstUser.content : JSON.stringify(firstUser?.content ?? '');
    const times = this.requestTimes.get(tag) ?? [];
    times.push(performance.now());
    this.requestTimes.set(tag, times);
    let lastUser = -1;
    messages.forEach((message, index) => {
      if (message.role === 'user') lastUser = index;
    });
    const toolResults = messages.slice(lastUser + 1).filter((message) => message.role === 'tool').length;
    // Each call differs (`true # <step>`): ten identical calls in a row would rightly look stuck.
    return toolResults < this.steps ? { toolCalls: [{ name: 'bash', arguments: { command: `true # step ${toolResults + 1}` } }] } : { text: 'done' };
  };

  /** Gaps between consecutive requests of each conversation within a run (ms): one step each. */
  stepLatencies(tags: readonly string[]): number[] {
    const gaps: number[] = [];
    for (const tag of tags) {
      const times = this.requestTimes.get(tag) ?? [];
      for (let i = 1; i < times.length; i++) gaps.push(times[i]! - times[i - 1]!);
    }
    return gaps;
  }
}
