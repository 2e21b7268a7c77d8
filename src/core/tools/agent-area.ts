import type { ToolContext } from './tool.js';
import { PinScope, pinnedOf, resolveToolPath } from './tool-paths.js';

/**
 * The agent's own corner of the workdir: background job logs (written by the shell) and the full
 * output of cut results. `.agentd/.gitignore` holds `*`, so git ignores all of it.
 */
export const AGENT_AREA = '.agentd';

/** Writes a file under the workdir through the pinning resolver; returns its absolute path. */
export async function writeInWorkdir(context: Pick<ToolContext, 'workdir' | 'workdirFs'>, relative: string, text: string, options: { keepExisting?: boolean }): Promise<string> {
  const scope = new PinScope();
  try {
    const target = await resolveToolPath(context, relative, { scope });
    const pinned = pinnedOf(target);
    if (!(options.keepExisting && pinned.exists)) {
      await pinned.ensureParent();
      await pinned.writeFile(text);
    }
    return target.absolute;
  } finally {
    await scope.release();
  }
}

export async function removeInWorkdir(context: Pick<ToolContext, 'workdir' | 'workdirFs'>, relative: string): Promise<void> {
  const scope = new PinScope();
  try {
    const target = await resolveToolPath(context, relative, { scope });
    if (pinnedOf(target).exists) await pinnedOf(target).unlink();
  } catch {
    // already gone
  } finally {
    await scope.release();
  }
}

const OUTPUTS_STATE_KEY = 'bash.savedOutputs';
const KEEP_SAVED_OUTPUTS = 20;

/** The note under a cut result: where the rest is and how to read it. */
export function readingHint(file: string, complete: boolean): string {
  const whole = complete ? 'the whole output' : 'the first part of the output (it was too large to keep whole)';
  return `[The output above was cut in the middle; ${whole} is in ${file}. Read a range with \`sed -n '100,200p' ${file}\` or search it with \`grep -n PATTERN ${file}\`.]`;
}

/**
 * Saves a cut result's full text as .agentd/output-<n>.txt in the workdir (the agent area, which
 * git ignores through .agentd/.gitignore); only the newest few are kept. Writes go through the
 * workdir resolver, so a planted symlink cannot redirect them.
 */
export async function saveFullOutput(text: string, context: Pick<ToolContext, 'workdir' | 'workdirFs' | 'state'>): Promise<string> {
  const saved = (context.state.get(OUTPUTS_STATE_KEY) as string[] | undefined) ?? [];
  context.state.set(OUTPUTS_STATE_KEY, saved);
  const name = `${AGENT_AREA}/output-${Date.now().toString(36)}-${saved.length}.txt`;
  await writeInWorkdir(context, `${AGENT_AREA}/.gitignore`, '*\n', { keepExisting: true });
  const file = await writeInWorkdir(context, name, text, {});
  saved.push(name);
  while (saved.length > KEEP_SAVED_OUTPUTS) await removeInWorkdir(context, saved.shift()!);
  return file;
}
