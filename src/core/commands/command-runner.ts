import { z } from 'zod';

export const RunCommandBody = z
  .object({
    command: z.string().min(1).max(100_000),
    timeout_s: z.number().positive().max(3600).default(60).describe('Kill the command (and everything it started) after this long.'),
    cwd: z.string().max(4096).optional().describe('Directory relative to the workdir (default: the workdir).'),
  })
  .strict()
  .meta({ id: 'RunCommand' });
export type RunCommandBody = z.infer<typeof RunCommandBody>;

export const CommandResult = z
  .object({
    exit_code: z.int().nullable().describe('Null when the command was killed (timeout).'),
    stdout: z.string(),
    stderr: z.string(),
    execution_time_s: z.number(),
    timed_out: z.boolean(),
    truncated: z.boolean().describe('Output past the limit was cut in the middle.'),
  })
  .meta({ id: 'CommandResult' });
export type CommandResult = z.infer<typeof CommandResult>;

/** Runs one shell command to completion (an adapter: core never spawns processes itself). */
export interface CommandRunner {
  /** `homeDir`: HOME for this command (default: the workdir, as for the agent's shell). */
  run(options: { command: string; cwd: string; workdir: string; env: Record<string, string>; timeoutMs: number; signal?: AbortSignal; sandbox?: { network: boolean | 'host' }; stdin?: string; homeDir?: string }): Promise<CommandResult>;
}
