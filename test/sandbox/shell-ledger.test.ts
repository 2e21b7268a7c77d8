import { spawn } from 'node:child_process';
import { once } from 'node:events';
import fs from 'node:fs';
import path from 'node:path';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { readProcess } from '../../src/adapters/process/process-tree.js';
import { ShellLedger } from '../../src/adapters/shell/shell-ledger.js';
import { ConversationShells } from '../../src/adapters/shell/conversation-shells.js';
import { tempDir } from '../support/agentd.js';

let dir: string | undefined;
afterEach(() => {
  if (dir) fs.rmSync(dir, { recursive: true, force: true });
  dir = undefined;
});

describe('shell ledger', () => {
  it('reads the journal (starts, closes, a torn last line) and the whole-object ledger of earlier versions', () => {
    dir = tempDir('agentd-ledger-');
    const journal = path.join(dir, 'shells.jsonl');
    fs.writeFileSync(journal, ['{"k":"a","pid":11,"t":1}', '{"k":"b","pid":12,"t":2}', '{"k":"a"}', '{"k":"a","pid":13,"t":3}', '{"k":"c","pid":1'].join('\n'));
    expect(ShellLedger.read(journal)).toEqual([
      { pid: 12, startTime: 2 },
      { pid: 13, startTime: 3 },
    ]);
    const legacy = path.join(dir, 'shells.json');
    fs.writeFileSync(legacy, JSON.stringify({ x: { pid: 21, startTime: 5 } }));
    expect(ShellLedger.read(legacy)).toEqual([{ pid: 21, startTime: 5 }]);
    expect(ShellLedger.read(path.join(dir, 'missing.jsonl'))).toEqual([]);
  });

  it('appends a line per shell start and compacts to the live shells (the legacy file is removed at start-up)', async () => {
    dir = tempDir('agentd-ledger-');
    const journal = path.join(dir, 'shells.jsonl');
    const legacy = path.join(dir, 'shells.json');
    // A legacy entry whose process does not exist: nothing is killed.
    fs.writeFileSync(legacy, JSON.stringify({ x: { pid: 999_999_999, startTime: 0 } }));
    const ledger = new ShellLedger(journal, legacy);
    expect(ledger.reapOrphans()).toBe(0);
    expect(fs.existsSync(legacy)).toBe(false);
    const closed: string[] = [];
    const factory = new ConversationShells({
      ledger,
      bash: {
      create: async (options) => {
        options.onSpawn?.(process.pid);
          return { run: async () => ({}) as never, setEnv: async () => {}, interrupt: async () => {}, close: async () => void closed.push(options.conversationId), pid: process.pid, alive: true };
        },
      },
    });
    const one = await factory.create({ conversationId: 'one', workdir: dir, env: {} });
    await factory.create({ conversationId: 'two', workdir: dir, env: {} });
    expect(ShellLedger.read(journal).map((entry) => entry.pid)).toEqual([process.pid, process.pid]);
    expect(fs.readFileSync(journal, 'utf8').trim().split('\n')).toHaveLength(2);
    await one.close();
    ledger.close();
    expect(closed).toEqual(['one']);
    expect(fs.readFileSync(journal, 'utf8').trim().split('\n')).toHaveLength(1);
    expect(ShellLedger.read(journal)).toHaveLength(1);
    // A start after the compaction lands in the new journal, not in the replaced file (closed in the background).
    await factory.create({ conversationId: 'three', workdir: dir, env: {} });
    expect(fs.readFileSync(journal, 'utf8').trim().split('\n')).toHaveLength(2);
    // Many closes: compacted by the forget timer, then a start appends to the compacted journal.
    const many = await Promise.all(Array.from({ length: 300 }, (_, i) => factory.create({ conversationId: `c${i}`, workdir: dir!, env: {} })));
    for (const shell of many) await shell.close();
    await vi.waitFor(() => expect(fs.readFileSync(journal, 'utf8').trim().split('\n')).toHaveLength(2), { timeout: 5000 });
    await factory.create({ conversationId: 'four', workdir: dir, env: {} });
    expect(fs.readFileSync(journal, 'utf8').trim().split('\n')).toHaveLength(3);
    expect(ShellLedger.read(journal)).toHaveLength(3);
  });

  it('a journaled shell that has exited but is not reaped yet (a zombie) is not one left running', async () => {
    dir = tempDir('agentd-ledger-');
    const journal = path.join(dir, 'shells.jsonl');
    // The background `sleep 1` exits after its parent sh has become `sleep 30` (exec), which never
    // reaps: it stays a zombie. (A child that exited before the exec could be reaped by sh.)
    const parent = spawn('sh', ['-c', 'sleep 1 & echo $!; exec sleep 30'], { stdio: ['ignore', 'pipe', 'ignore'] });
    try {
      const pid = Number((await once(parent.stdout!, 'data'))[0].toString().trim());
      await vi.waitFor(() => expect(readProcess(pid)?.zombie).toBe(true), { timeout: 10_000 });
      fs.writeFileSync(journal, JSON.stringify({ k: 'z', pid, t: readProcess(pid)!.startTime }) + '\n');
      expect(new ShellLedger(journal).reapOrphans()).toBe(0);
      // A running process with the journal's start time is one.
      const running = readProcess(parent.pid!)!;
      expect(running.zombie).toBe(false);
      fs.writeFileSync(journal, JSON.stringify({ k: 'r', pid: running.pid, t: running.startTime }) + '\n');
      const exited = once(parent, 'exit');
      expect(new ShellLedger(journal).reapOrphans()).toBe(1);
      expect((await exited)[1]).toBe('SIGKILL');
    } finally {
      parent.kill('SIGKILL');
    }
  });

  it("killAllForExit is the factory's own, the journal unchanged; a factory without one has nothing to kill", async () => {
    dir = tempDir('agentd-ledger-');
    const journal = path.join(dir, 'shells.jsonl');
    const ledger = new ShellLedger(journal);
    const killed: string[] = [];
    const started: string[] = [];
    const shellOf = () => ({ run: async () => ({}) as never, setEnv: async () => {}, interrupt: async () => {}, close: async () => {}, pid: process.pid, alive: true });
    const factory = new ConversationShells({
      ledger,
      bash: {
        create: async (options) => {
          options.onSpawn?.(process.pid);
          started.push(options.conversationId);
          return shellOf();
        },
        killAllForExit: () => void killed.push(...started),
      },
    });
    await factory.create({ conversationId: 'one', workdir: dir, env: {} });
    await factory.create({ conversationId: 'two', workdir: dir, env: {} });
    ledger.close();
    factory.killAllForExit?.();
    expect(killed).toEqual(['one', 'two']);
    // Still named: the next start stops any that outlived the server.
    expect(ShellLedger.read(journal)).toHaveLength(2);
    // A factory of shells without one (a test's own) has nothing to kill.
    expect(() => new ConversationShells({ ledger, bash: { create: async () => shellOf() } }).killAllForExit()).not.toThrow();
  });
});
