import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { readAsset } from '../../assets.js';

const TEMPLATE = readAsset(import.meta.url, 'system-prompt.md');
const PROJECT_FILES = ['AGENTS.md', 'CLAUDE.md'];
const MAX_PROJECT_INSTRUCTIONS = 64 * 1024;
/** The rules part of the prompt by set of enabled tools (the template never changes while the server runs). */
const renderedRules = new Map<string, string>();

export interface SystemPromptInputs {
  workdir: string;
  /** Names of the tools the conversation enables: the prompt speaks only of these. */
  tools: readonly string[];
  /** Names (never values) of the conversation's secrets. */
  secretNames: readonly string[];
  now: Date;
}

/**
 * The system prompt: the stable rules first (they depend only on the enabled tools, so providers
 * can cache them), then the repository's AGENTS.md/CLAUDE.md, then the environment (workdir, git,
 * secrets' names, date). The runtime rebuilds it at the start of every run and records a new
 * `system_prompt` event when the text differs.
 */
export function buildSystemPrompt(inputs: SystemPromptInputs): string {
  const enabled = new Set(inputs.tools);
  if (enabled.has('glob') || enabled.has('grep')) enabled.add('search');
  if (enabled.has('web_fetch') || enabled.has('web_search')) enabled.add('web');
  const key = [...enabled].sort().join(',');
  let rules = renderedRules.get(key);
  if (rules === undefined) {
    rules = renderTemplate(TEMPLATE, enabled).trim();
    renderedRules.set(key, rules);
  }
  const parts = [rules];
  const gitRoot = findGitRoot(inputs.workdir);
  const instructions = projectInstructions(inputs.workdir, gitRoot);
  if (instructions) parts.push(instructions);
  parts.push(environment(inputs, gitRoot));
  return `${parts.join('\n\n')}\n`;
}

/** Keeps `{{#name}}…{{/name}}` blocks whose name is enabled, drops the others (blocks of different names nest). */
export function renderTemplate(template: string, enabled: ReadonlySet<string>): string {
  let text = template;
  for (;;) {
    const next = text.replace(/\{\{#([a-z_]+)\}\}((?:(?!\{\{#)[\s\S])*?)\{\{\/\1\}\}/g, (_match, name: string, body: string) => (enabled.has(name) ? body : ''));
    if (next === text) return text.replace(/\n{3,}/g, '\n\n');
    text = next;
  }
}

function environment(inputs: SystemPromptInputs, gitRoot: string | null): string {
  const lines = ['# Environment', `- Workdir: ${inputs.workdir} (also $HOME; the shell starts here).`];
  if (gitRoot === null) lines.push('- The workdir is not inside a git repository.');
  else if (gitRoot === inputs.workdir) lines.push('- The workdir is a git repository.');
  else lines.push(`- The workdir is inside the git repository at ${gitRoot}.`);
  lines.push(`- Operating system: ${os.type()} ${os.release()} (${os.arch()}).`);
  if (inputs.secretNames.length > 0) {
    const names = [...inputs.secretNames].sort().map((name) => `$${name}`).join(', ');
    lines.push(`- Secrets set as environment variables (values hidden): ${names}.`);
    if (inputs.secretNames.includes('GITHUB_TOKEN')) lines.push('- GITHUB_TOKEN also authenticates git over HTTPS to github.com: plain `git clone/fetch/push https://github.com/...` works.');
  } else {
    lines.push('- No secrets are set for this conversation.');
  }
  lines.push(`- Today's date: ${inputs.now.toISOString().slice(0, 10)}.`);
  return lines.join('\n');
}

/** The repository root above (or at) the workdir: the nearest directory holding `.git`. */
function findGitRoot(workdir: string): string | null {
  for (let dir = workdir; ; dir = path.dirname(dir)) {
    if (fs.existsSync(path.join(dir, '.git'))) return dir;
    if (path.dirname(dir) === dir) return null;
  }
}

/**
 * AGENTS.md (or CLAUDE.md) of every directory from the repository root down to the workdir,
 * outermost first; outside a repository, the workdir's own. A symlink is followed when its
 * target stays inside the directory it was found in (`CLAUDE.md -> AGENTS.md`), so no link can
 * pull a file from elsewhere on the host into the prompt.
 */
function projectInstructions(workdir: string, gitRoot: string | null): string | null {
  const dirs: string[] = [];
  for (let dir = workdir; ; dir = path.dirname(dir)) {
    dirs.unshift(dir);
    if (gitRoot === null || dir === gitRoot || path.dirname(dir) === dir) break;
  }
  const sections: string[] = [];
  let budget = MAX_PROJECT_INSTRUCTIONS;
  for (const dir of dirs) {
    for (const name of PROJECT_FILES) {
      let text = readContained(dir, name);
      if (text === null || text.trim() === '') continue;
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

function readContained(dir: string, name: string): string | null {
  try {
    const file = path.join(dir, name);
    const real = fs.realpathSync(file);
    const realDir = fs.realpathSync(dir);
    if (real !== path.join(realDir, name) && !real.startsWith(`${realDir}${path.sep}`)) return null;
    // Non-blocking open, then a check of what was opened: a FIFO swapped in cannot hang the server.
    // Only the part that can fit is read: a huge file costs no more than the budget.
    const fd = fs.openSync(real, fs.constants.O_RDONLY | fs.constants.O_NONBLOCK);
    try {
      if (!fs.fstatSync(fd).isFile()) return null;
      const buffer = Buffer.alloc(MAX_PROJECT_INSTRUCTIONS + 1);
      const length = fs.readSync(fd, buffer, 0, buffer.length, 0);
      return buffer.subarray(0, length).toString('utf8');
    } finally {
      fs.closeSync(fd);
    }
  } catch {
    return null;
  }
}
