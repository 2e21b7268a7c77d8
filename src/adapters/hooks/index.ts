import fs from 'node:fs';
import type { CommandRunner } from '../../core/commands/command-runner.js';
import type { ConversationRecord } from '../../core/conversations/conversation-record.js';
import type { HookTransport } from '../../core/hooks/hook-transport.js';
import type { WebhookTargets } from '../../core/webhooks/webhook-targets.js';
import { UndiciHookClient } from './undici-hook-client.js';

export { UndiciHookClient } from './undici-hook-client.js';

/**
 * How a conversation's hooks reach the outside: a command hook runs like POST /commands (in the
 * conversation's sandbox, with its secrets as env), an http hook is POSTed under the webhooks'
 * address policy. A command hook's HOME is `homeDir`, an empty directory the server makes
 * outside every workdir (read-only to the hooks): nothing the agent writes is found there as a
 * startup file or a tool's configuration, so a hook that should block still blocks.
 */
export function createHookTransport(deps: {
  commandRunner: CommandRunner;
  homeDir: string;
  targets: WebhookTargets;
  userAgent: string;
  environment: (record: ConversationRecord) => Record<string, string>;
  sandboxOf: (record: ConversationRecord) => { network: boolean | 'host' };
}): { transport: (record: ConversationRecord) => HookTransport; close: () => Promise<void> } {
  const client = new UndiciHookClient({ targets: deps.targets, userAgent: deps.userAgent });
  fs.mkdirSync(deps.homeDir, { recursive: true, mode: 0o555 });
  fs.chmodSync(deps.homeDir, 0o555);
  return {
    transport: (record) => ({
      command: async (hook) => {
        const env = { ...deps.environment(record), CLAUDE_PROJECT_DIR: record.workdir, AGENTD_CONVERSATION_ID: record.id };
        const result = await deps.commandRunner.run({ command: hook.command, cwd: record.workdir, workdir: record.workdir, env, timeoutMs: hook.timeoutMs, sandbox: deps.sandboxOf(record), stdin: hook.stdin, homeDir: deps.homeDir });
        return { exitCode: result.exit_code, stdout: result.stdout, stderr: result.stderr, timedOut: result.timed_out };
      },
      http: (hook) => client.post(hook),
    }),
    close: () => client.close(),
  };
}
