import pc from 'picocolors';
import type { CreateScheduleInput, Schedule } from '../client/index.js';
import { connect, type ConnectionFlags } from './connection.js';
import { EXIT } from './exit-codes.js';

export interface ScheduleFlags extends ConnectionFlags {
  json?: boolean;
  conversation?: string;
  status?: string;
  cron?: string;
  every?: string;
  timezone?: string;
  message?: string;
  new?: boolean;
  overlap?: string;
  maxFires?: string;
  note?: string;
}

export type ScheduleAction = 'list' | 'create' | 'pause' | 'resume' | 'trigger' | 'delete';

/** `agentd schedules list|create|pause|resume|trigger|delete`: one line per schedule (`--json`: its JSON). */
export async function schedulesCommand(action: ScheduleAction, id: string | undefined, flags: ScheduleFlags): Promise<number> {
  if (action !== 'list' && action !== 'create' && !id) {
    process.stderr.write(`agentd schedules ${action} needs the schedule's id\n`);
    return EXIT.usage;
  }
  const connection = await connect(flags);
  const schedules = connection.client.schedules;
  const print = (schedule: Schedule) => process.stdout.write(flags.json ? `${JSON.stringify(schedule)}\n` : `${line(schedule)}\n`);
  try {
    switch (action) {
      case 'list': {
        const page = await schedules.list({ limit: 1000, ...(flags.conversation && { conversation_id: flags.conversation }), ...(flags.status && { status: flags.status as never }) });
        for (const schedule of page.items) print(schedule);
        if (!flags.json && page.items.length === 0) process.stderr.write('no schedules\n');
        break;
      }
      case 'create': {
        if (!flags.message || (!flags.conversation && !flags.new)) {
          process.stderr.write('agentd schedules create needs --message and a target: --conversation ID or --new\n');
          return EXIT.usage;
        }
        const body: CreateScheduleInput = {
          message: { content: flags.message },
          ...(flags.cron && { cron: flags.cron }),
          ...(flags.every && { every: flags.every }),
          ...(flags.timezone && { timezone: flags.timezone }),
          ...(flags.conversation ? { conversation_id: flags.conversation } : { new: {} }),
          ...(flags.overlap && { overlap: flags.overlap as never }),
          ...(flags.maxFires && { max_fires: Number(flags.maxFires) }),
        };
        print(await schedules.create(body));
        break;
      }
      case 'pause':
        print(await schedules.pause(id!, flags.note ? { note: flags.note } : {}));
        break;
      case 'resume':
        print(await schedules.resume(id!));
        break;
      case 'trigger': {
        const fire = await schedules.trigger(id!);
        process.stdout.write(flags.json ? `${JSON.stringify(fire)}\n` : `${fire.id}  ${fire.outcome}${fire.run_id ? `  run ${fire.run_id}` : ''}${fire.reason ? pc.dim(`  ${fire.reason}`) : ''}\n`);
        break;
      }
      case 'delete':
        await schedules.delete(id!);
        break;
    }
    return EXIT.ok;
  } finally {
    await connection.close();
  }
}

function line(schedule: Schedule): string {
  const rule = schedule.cron ?? `every ${schedule.every}`;
  const target = schedule.conversation_id ?? pc.dim('(new conversation each fire)');
  const next = schedule.next_fire_at ?? pc.dim('-');
  return `${schedule.id}  ${schedule.status.padEnd(9)} ${next.padEnd(24)} ${rule} ${pc.dim(schedule.timezone)}  ${target}${schedule.last_outcome ? pc.dim(`  last: ${schedule.last_outcome}`) : ''}`;
}
