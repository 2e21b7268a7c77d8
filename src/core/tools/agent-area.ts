import { unlink } from 'node:fs/promises';
import { writeBytesNoFollow } from './file-editor-io.js';
import type { ToolContext } from './tool.js';
import { PinScope, pinnedOf, resolveToolPath } from './tool-paths.js';

/**
 * The agent's own corner of the workdir: background job logs (written by the shell) and the full
 * output of cut results. `.agentd/.gitignore` holds `*`, so git ignores all of it.
 */
export const AGENT_AREA = '.agentd';

/** Writes a file under the workdir through the pinning resolver; returns its absolute path. */
export async function writeInWorkdir(context: Pick<ToolContext, 'workdir'>, relative: string, text: string, options: { keepExisting?: boolean }): Promise<string> {
  const scope = new PinScope();
  try {
    const target = await resolveToolPath(context, relative, { scope });
    const pinned = pinnedOf(target);
    if (!(options.keepExisting && pinned.exists)) {
      await pinned.ensureParent();
      await writeBytesNoFollow(pinned.at(), text, await pinned.owner());
    }
    return target.absolute;
  } finally {
    await scope.release();
  }
}

export async function removeInWorkdir(context: Pick<ToolContext, 'workdir'>, relative: string): Promise<void> {
  const scope = new PinScope();
  try {
    const target = await resolveToolPath(context, relative, { scope });
    if (pinnedOf(target).exists) await unlink(pinnedOf(target).at());
  } catch {
    // already gone
  } finally {
    await scope.release();
  }
}
