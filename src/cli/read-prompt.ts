import fs from 'node:fs';
import { UsageError } from './connection.js';

/** The prompt of `agentd run`: its words, else `-f FILE` (`-` is stdin), else piped stdin. */
export async function readPrompt(words: string[], file: string | undefined): Promise<string | undefined> {
  if (words.length > 0 && file !== undefined) throw new UsageError('give the prompt as words or with -f, not both');
  if (words.length > 0) return words.join(' ');
  if (file !== undefined && file !== '-') {
    try {
      return fs.readFileSync(file, 'utf8');
    } catch (error) {
      throw new UsageError(`cannot read ${file}: ${(error as NodeJS.ErrnoException).code ?? (error as Error).message}`);
    }
  }
  if (file === '-' || !process.stdin.isTTY) {
    const chunks: Buffer[] = [];
    for await (const chunk of process.stdin) chunks.push(chunk as Buffer);
    const text = Buffer.concat(chunks).toString('utf8');
    return text.trim() ? text : undefined;
  }
  return undefined;
}
