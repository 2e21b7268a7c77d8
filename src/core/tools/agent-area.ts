import type { ToolContext } from './tool.js';
import { PinScope, pinnedOf, resolveToolPath } from './tool-paths.js';

/**
 * The agent's own corner of the workdir: background job logs (written by the shell) and, under
 * outputs/, the full text of cut tool outputs. `.agentd/.gitignore` holds `*`, so git ignores all of it.
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

const OUTPUTS_STATE_KEY = 'agent.savedOutputs';
const KEEP_SAVED_OUTPUTS = 20;
/** The conversation's saved outputs, oldest first, and how many were ever saved (each file's number). */
interface SavedOutputs {
  files: string[];
  count: number;
}
/** Where the full text of cut tool outputs goes, in the agent area. */
export const OUTPUTS_DIR = `${AGENT_AREA}/outputs`;

/**
 * Saves a cut output's full text as .agentd/outputs/<tool>-<n>.txt in the workdir (the agent area,
 * which git ignores through .agentd/.gitignore); only the newest few are kept. Writes go through
 * the workdir resolver, so a planted symlink cannot redirect them. Returns the path relative to
 * the workdir and the absolute one.
 */
export async function saveFullOutput(
  text: string,
  options: { tool: string; context: Pick<ToolContext, 'workdir' | 'workdirFs' | 'state'> },
): Promise<{ relative: string; absolute: string }> {
  const { context } = options;
  const saved = (context.state.get(OUTPUTS_STATE_KEY) as SavedOutputs | undefined) ?? { files: [], count: 0 };
  context.state.set(OUTPUTS_STATE_KEY, saved);
  const tool = options.tool.replace(/[^A-Za-z0-9_-]+/g, '_').slice(0, 40) || 'tool';
  const relative = `${OUTPUTS_DIR}/${tool}-${Date.now().toString(36)}-${saved.count++}.txt`;
  await writeInWorkdir(context, `${AGENT_AREA}/.gitignore`, '*\n', { keepExisting: true });
  const absolute = await writeInWorkdir(context, relative, text, {});
  saved.files.push(relative);
  while (saved.files.length > KEEP_SAVED_OUTPUTS) await removeInWorkdir(context, saved.files.shift()!);
  return { relative, absolute };
}
