import fs from 'node:fs';
import path from 'node:path';
import { readAsset } from '../../assets.js';

const TEMPLATE = readAsset(import.meta.url, 'system-prompt.md');
const PROJECT_FILES = ['AGENTS.md', 'CLAUDE.md'];
const MAX_PROJECT_INSTRUCTIONS = 64 * 1024;

/** The system prompt for a conversation: the template, plus AGENTS.md (or CLAUDE.md) from the workdir root. */
export function buildSystemPrompt(workdir: string): string {
  let prompt = TEMPLATE.replace('{{workdir}}', workdir).trimEnd();
  for (const name of PROJECT_FILES) {
    const file = path.join(workdir, name);
    let text: string;
    try {
      const stat = fs.lstatSync(file);
      if (!stat.isFile()) continue;
      text = fs.readFileSync(file, 'utf8');
    } catch {
      continue;
    }
    if (text.length > MAX_PROJECT_INSTRUCTIONS) text = `${text.slice(0, MAX_PROJECT_INSTRUCTIONS)}\n[... truncated ...]`;
    prompt += `\n\n# Project instructions (from ${name})\n\n${text.trim()}`;
    break;
  }
  return `${prompt}\n`;
}
