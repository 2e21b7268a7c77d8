import type { ConversationStore } from '../conversations/conversation-store.js';
import type { SecretService } from '../secrets/secret-service.js';
import type { WorkdirFileSystem } from '../workspace/workdir-file-system.js';
import type { CommandResult, CommandRunner, RunCommandBody } from './command-runner.js';

/**
 * `POST /commands`: a one-off command in the conversation's workdir with its secrets in the
 * environment. Not the agent's shell: it changes neither the agent's cwd nor its env.
 */
export class CommandService {
  constructor(
    private readonly deps: { conversations: ConversationStore; secrets: SecretService; runner: CommandRunner; workdirFs: Pick<WorkdirFileSystem, 'resolve'> },
  ) {}

  async run(conversationId: string, body: RunCommandBody): Promise<CommandResult> {
    const record = this.deps.conversations.record(conversationId);
    const cwd = body.cwd === undefined ? record.workdir : await this.deps.workdirFs.resolve(record.workdir, body.cwd, { mustExist: true });
    const result = await this.deps.runner.run({
      command: body.command,
      cwd,
      workdir: record.workdir,
      env: this.deps.secrets.environment(record),
      timeoutMs: Math.round(body.timeout_s * 1000),
      sandbox: this.deps.conversations.sandboxOf(record),
    });
    const mask = (text: string) => this.deps.secrets.maskText(conversationId, text);
    return { ...result, stdout: mask(result.stdout), stderr: mask(result.stderr) };
  }
}
