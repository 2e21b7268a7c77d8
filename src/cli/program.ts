import { Command, InvalidArgumentError } from 'commander';
import { VERSION } from '../version.js';
import { chatCommand } from './chat-command.js';
import { conversationsCommand, eventsCommand } from './list-commands.js';
import { runCommand } from './run-command.js';
import { schedulesCommand, type ScheduleAction } from './schedule-commands.js';

export { CLIENT_COMMANDS } from './client-commands.js';

const CONNECTION_HELP = `
Where it connects: --url/--key, else AGENTD_URL/AGENTD_KEY (a key alone: http://127.0.0.1:8000
when agentd answers there); with neither, a server embedded in this process on a private
loopback port, over --data-dir (AGENTD_DATA_DIR, default ~/.agentd), configured by your
environment and ~/.agentd/.env (never the current directory's .env).

Where the agent works: with the embedded server, the current directory; against a server
(--url, AGENTD_URL), a fresh workdir on that server, not the current directory, unless
--workdir DIR names one (a path on the server's machine).`;

function withConnection(command: Command): Command {
  return command
    .option('--url <url>', 'the agentd server (AGENTD_URL)')
    .option('--key <key>', 'its API key (AGENTD_KEY)')
    .option('--data-dir <dir>', 'the embedded server\'s data dir (when no --url)')
    .addHelpText('after', CONNECTION_HELP);
}

function positiveInt(value: string): string {
  if (!/^[1-9]\d*$/.test(value)) throw new InvalidArgumentError('a positive whole number');
  return value;
}

/** Runs one client command; resolves to its exit code. */
export async function runClientCommand(argv: readonly string[]): Promise<number> {
  let code = 0;
  const program = new Command('agentd').version(VERSION).exitOverride().configureOutput({ writeErr: (text) => process.stderr.write(text) });
  withConnection(program.command('run'))
    .description('run one prompt headless: progress on stderr, the answer on stdout')
    .argument('[prompt...]', 'what to do (else -f FILE, or stdin)')
    .option('-f, --file <file>', 'read the prompt from FILE (- for stdin)')
    .option('-c, --continue', 'continue the most recent conversation')
    .option('-r, --resume <id>', 'continue conversation ID')
    .option('-y, --yes', 'approve actions that await approval')
    .option('--confirm', 'new conversation in confirmation mode (every action awaits approval)')
    .option('--json', 'print every event as a JSON line on stdout')
    .option('--model <model>', 'the model of a new conversation')
    .option('--workdir <dir>', 'the workdir of a new conversation (default: the current directory when embedded, a fresh one on a server)')
    .option('--title <title>', 'the title of a new conversation')
    .action(async (words: string[], flags) => void (code = await runCommand(words, flags)));
  withConnection(program.command('chat'))
    .description('an interactive conversation')
    .option('-c, --continue', 'continue the most recent conversation')
    .option('-r, --resume <id>', 'continue conversation ID')
    .option('--confirm', 'new conversations in confirmation mode (actions are approved inline)')
    .option('--model <model>', 'the model of new conversations')
    .option('--workdir <dir>', 'the workdir of new conversations (default: the current directory when embedded, a fresh one on a server)')
    .action(async (flags) => void (code = await chatCommand(flags)));
  withConnection(program.command('conversations'))
    .description('list conversations, most recently updated first')
    .option('--json', 'one JSON line per conversation')
    .option('-n, --limit <n>', 'how many (default 20)', positiveInt)
    .option('--status <status>', 'only this status')
    .action(async (flags) => void (code = await conversationsCommand(flags)));
  withConnection(program.command('events'))
    .description("print a conversation's events")
    .argument('<id>', 'the conversation')
    .option('--follow', 'keep streaming new events until Ctrl-C')
    .option('--after <seq>', 'only events after this seq', positiveInt)
    .option('--json', 'one JSON line per event')
    .action(async (id: string, flags) => void (code = await eventsCommand(id, flags)));
  program
    .command('acp')
    .description('an Agent Client Protocol agent on stdio, for editors (Zed, JetBrains, Neovim, Emacs)')
    .option('--url <url>', 'the agentd server (AGENTD_URL); default: one embedded in this process')
    .option('--key-env <name>', 'the environment variable holding its API key (default AGENTD_KEY)')
    .option('--data-dir <dir>', "the embedded server's data dir (when no --url)")
    .addHelpText('after', '\nstdout carries the protocol alone; logs go to stderr. Register it in an editor as the command `agentd acp` (docs/editors.md).')
    .action(async (flags) => {
      const { acpCommand } = await import('./acp/acp-command.js');
      code = await acpCommand(flags);
    });
  const schedules = program.command('schedules').description('list, create, pause, resume, trigger or delete schedules (docs/schedules.md)');
  const scheduleCommand = (action: ScheduleAction, description: string) =>
    withConnection(schedules.command(action))
      .description(description)
      .option('--json', 'print the JSON answer')
      .action(async (...args: unknown[]) => {
        const flags = args.find((arg) => typeof arg === 'object' && arg !== null && !(arg instanceof Command)) as Record<string, unknown>;
        code = await schedulesCommand(action, typeof args[0] === 'string' ? args[0] : undefined, flags);
      });
  scheduleCommand('list', 'list schedules').option('--conversation <id>', 'only those targeting this conversation').option('--status <status>', 'only this status');
  scheduleCommand('create', 'create a schedule')
    .option('--cron <pattern>', 'a cron pattern, e.g. "30 2 * * *" or @hourly')
    .option('--every <duration>', 'an ISO 8601 duration, e.g. PT1H or P1D')
    .option('--timezone <zone>', 'IANA time zone (default: the server\'s AGENTD_SCHEDULE_TIMEZONE)')
    .option('--message <text>', 'the message each fire sends')
    .option('--conversation <id>', 'send it to this conversation')
    .option('--new', 'send it to a new conversation at each fire')
    .option('--overlap <policy>', 'skip | enqueue_one | interrupt | allow')
    .option('--max-fires <n>', 'complete after this many fires', positiveInt);
  scheduleCommand('pause', 'pause a schedule').argument('<id>', 'the schedule').option('--note <text>', 'why');
  scheduleCommand('resume', 'resume a paused schedule').argument('<id>', 'the schedule');
  scheduleCommand('trigger', 'fire a schedule now (the next slot still fires)').argument('<id>', 'the schedule');
  scheduleCommand('delete', 'delete a schedule').argument('<id>', 'the schedule');
  await program.parseAsync([...argv], { from: 'user' });
  return code;
}
