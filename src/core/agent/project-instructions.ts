import path from 'node:path';
import type { ProjectFiles } from '../workspace/project-files.js';

const PROJECT_FILES = ['AGENTS.md', 'CLAUDE.md', '.claude/CLAUDE.md'];
const MAX_PROJECT_INSTRUCTIONS = 64 * 1024;

/** What the system prompt says of the project around the workdir, read before the prompt is built. */
export interface ProjectContext {
  /** The repository root: the nearest directory at or above the workdir holding `.git`; null outside one. */
  gitRoot: string | null;
  /** The "Repository conventions" section; null when there is none or the project is not read (`setting_sources`). */
  instructions: string | null;
}

export async function readProjectContext(options: { projectFiles: ProjectFiles; workdir: string; instructions: boolean }): Promise<ProjectContext> {
  const gitRoot = await options.projectFiles.gitRoot(options.workdir);
  return { gitRoot, instructions: options.instructions ? await projectInstructions({ ...options, gitRoot }) : null };
}

/**
 * AGENTS.md (or CLAUDE.md) of every directory from the repository root down to the workdir,
 * outermost first; outside a repository, the workdir's own. A symlink is followed when its
 * target stays inside the directory it was found in (`CLAUDE.md -> AGENTS.md`), so no link can
 * pull a file from elsewhere on the host into the prompt.
 */
async function projectInstructions(options: { projectFiles: ProjectFiles; workdir: string; gitRoot: string | null }): Promise<string | null> {
  const { projectFiles, workdir, gitRoot } = options;
  const dirs: string[] = [];
  for (let dir = workdir; ; dir = path.dirname(dir)) {
    dirs.unshift(dir);
    if (gitRoot === null || dir === gitRoot || path.dirname(dir) === dir) break;
  }
  const sections: string[] = [];
  let budget = MAX_PROJECT_INSTRUCTIONS;
  for (const dir of dirs) {
    for (const name of PROJECT_FILES) {
      // Only the part that can fit is read: a huge file costs no more than the budget.
      const read = await projectFiles.read({ dir, name, maxBytes: MAX_PROJECT_INSTRUCTIONS + 1, oversize: 'cut', symlinks: 'inside' });
      if (read.kind !== 'text' || read.text.trim() === '') continue;
      let text = read.text;
      if (text.length > budget) text = `${text.slice(0, budget)}\n[... truncated ...]`;
      budget = Math.max(0, budget - text.length);
      const where = dir === workdir ? name : path.join(dir, name);
      sections.push(`## From ${where}\n\n${text.trim()}`);
      break;
    }
  }
  if (sections.length === 0) return null;
  return [
    '# Repository conventions',
    "The repository's own instructions follow. Apply them to your work; the user's messages and the rules above take precedence where they conflict.",
    ...sections,
  ].join('\n\n');
}
