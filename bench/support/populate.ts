import { spawn } from 'node:child_process';
import { childScript } from './processes.js';

/** Runs children/populate.mjs: `conversations` conversations of `eventsPerConversation` events in `dataDir`. */
export function populate(options: { dataDir: string; conversations: number; eventsPerConversation: number; secretNames: 'shared' | 'distinct' }): Promise<void> {
  const args = ['--data-dir', options.dataDir, '--conversations', String(options.conversations), '--events', String(options.eventsPerConversation), '--secret-names', options.secretNames];
  const child = spawn(process.execPath, [childScript('populate'), ...args], { stdio: ['ignore', 'inherit', 'inherit'] });
  return new Promise((resolve, reject) => {
    child.once('error', reject);
    child.once('exit', (code) => (code === 0 ? resolve() : reject(new Error(`populate exited ${code}`))));
  });
}
