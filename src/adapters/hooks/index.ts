import type { CommandRunner } from '../../core/commands/command-runner.js';
import type { ConversationRecord } from '../../core/conversations/conversation-record.js';
import type { HookTransport } from '../../core/hooks/hook-transport.js';
import type { WebhookTargets } from '../../core/webhooks/webhook-targets.js';
import { UndiciHookClient } from './undici-hook-client.js';

export { UndiciHookClient } from './undici-hook-client.js';

/**
 * How a conversation's hooks reach the outside: a command hook runs like POST /commands (in the
 * conversation's sandbox, with its secrets as env), an http hook is POSTed under the webhooks'
 * address policy.
 */
export function createHookTransport(deps: {
  commandRunner: CommandRunner;
  targets: WebhookTargets;
  userAgent: string;
  environment: (record: ConversationRecord) => Record<string, string>;
  sandboxOf: (record: ConversationRecord) => { network: boolean | 'host' };
}): { transport: (record: ConversationRecord) => HookTransport; close: () => Promise<void> } {
  const client = new UndiciHookClient({ targets: deps.targets, userAgent: deps.userAgent });
  return {
    transport: (record) => ({
      command: async (hook) => {
        const env = { ...deps.environment(record), CLAUDE_PROJECT_DIR: record.workdir, AGENTD_CONVERSATION_ID: record.id };
        const result = await deps.commandRunner.run({ command: hook.command, cwd: record.workdir, workdir: record.workdir, env, timeoutMs: hook.timeoutMs, sandbox: deps.sandboxOf(record), stdin: hook.stdin });
        return { exitCode: result.exit_code, stdout: result.stdout, stderr: result.stderr, timedOut: result.timed_out };
      },
      http: (hook) => client.post(hook),
    }),
    close: () => client.close(),
  };
}
