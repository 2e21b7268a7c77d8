/**
 * Issue 71, findings 2 and 3: from a background job in its sandbox, the agent swaps a directory
 * of its workdir (`d`) with a symlink to the data dir (a decoy here) in a tight loop with
 * renameat2(RENAME_EXCHANGE), while the server checkpoints the workdir before each of its bash
 * calls and then rewinds it, back and forth, many times. Whatever the timing, the decoy's
 * secret never enters a checkpoint (the shadow repository's objects), `/changes` or the workdir,
 * and nothing outside the workdir is written, created or given to another owner.
 */
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startAgentHarness, type AgentHarness } from '../support/agent-harness.js';
import { tempDir } from '../support/agentd.js';
import { ownedSnapshot, PYTHON, RACER } from '../support/rename-race.js';

const available = fs.existsSync(PYTHON);
if (!available) console.warn('test/checkpoints/checkpoint-race.test.ts: skipped (/usr/bin/python3, which performs the renameat2 swaps in the sandbox, is not installed)');

const DECOY_SECRET = 'DECOY-DATA-DIR-SECRET-KEY';
const SNAPSHOTS = 40;
const REWINDS = 40;

let harness: AgentHarness;
let base: string;
let workdir: string;
let decoy: string;

/** Every shadow repository under the server's data dir (a directory holding HEAD and objects/). */
function shadowRepositories(dir: string): string[] {
  const found: string[] = [];
  for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
    if (!entry.isDirectory()) continue;
    const full = path.join(dir, entry.name);
    if (fs.existsSync(path.join(full, 'HEAD')) && fs.existsSync(path.join(full, 'objects'))) found.push(full);
    else found.push(...shadowRepositories(full));
  }
  return found;
}

/** The content of every object of a repository, as git prints it. */
function allObjects(gitDir: string): string {
  return execFileSync('git', ['--git-dir', gitDir, '-c', 'safe.directory=*', 'cat-file', '--batch-all-objects', '--batch'], { encoding: 'latin1', maxBuffer: 256 * 1024 * 1024 });
}

/**
 * Files anywhere in the workdir whose content holds the decoy's secret (links never followed).
 * The swapper is still renaming entries meanwhile: one gone between its listing and its read is
 * skipped, and so is the decoy's own file (its inode): a `d` listed as a directory and swapped for
 * the link before this read it is the decoy seen through the link, not a copy in the workdir.
 */
function decoyInWorkdir(dir: string): string[] {
  const decoyFile = fs.statSync(path.join(decoy, 'secret.key'));
  const found: string[] = [];
  for (const entry of readIfThere(() => fs.readdirSync(dir, { withFileTypes: true })) ?? []) {
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) found.push(...decoyInWorkdir(full));
    else if (entry.isFile() && readIfThere(() => readUnlessDecoy(full, decoyFile))?.includes(DECOY_SECRET)) found.push(path.relative(workdir, full));
  }
  return found;
}

/** The file's content, or '' when what opened is the decoy's own file (same device and inode). */
function readUnlessDecoy(file: string, decoyFile: fs.Stats): string {
  const fd = fs.openSync(file, fs.constants.O_RDONLY | fs.constants.O_NOFOLLOW);
  try {
    const stat = fs.fstatSync(fd);
    if (stat.dev === decoyFile.dev && stat.ino === decoyFile.ino) return '';
    return fs.readFileSync(fd, 'latin1');
  } finally {
    fs.closeSync(fd);
  }
}

function readIfThere<T>(read: () => T): T | undefined {
  try {
    return read();
  } catch (error) {
    // ELOOP: the entry became a link between the listing and the open (O_NOFOLLOW).
    if (['ENOENT', 'ENOTDIR', 'ELOOP'].includes((error as NodeJS.ErrnoException).code ?? '')) return undefined;
    throw error;
  }
}

beforeAll(async () => {
  base = fs.realpathSync(tempDir());
  workdir = path.join(base, 'work');
  decoy = path.join(base, 'decoy-data-dir');
  fs.mkdirSync(path.join(workdir, 'd'), { recursive: true });
  fs.mkdirSync(decoy);
  fs.writeFileSync(path.join(decoy, 'secret.key'), DECOY_SECRET);
  fs.writeFileSync(path.join(workdir, 'd', 'secret.key'), 'inside v0');
  fs.symlinkSync(decoy, path.join(workdir, 'swap'));
  fs.writeFileSync(path.join(workdir, 'racer.py'), RACER);
  harness = await startAgentHarness();
});

afterAll(async () => {
  await harness?.close();
});

describe.skipIf(!available)('checkpoints and rewinds while the agent swaps a directory for a link to the data dir', () => {
  it('never stores, shows or restores a file from outside the workdir, nor writes or chowns one there', { timeout: 300_000 }, async () => {
    const decoyBefore = ownedSnapshot(decoy);
    const outsideBefore = fs.readdirSync(base).sort();
    const bash = (command: string) => ({ toolCalls: [{ name: 'bash', arguments: { command } }] });
    // Two states to rewind between, taken before the race: `d` holds planted.txt in the first only.
    harness.llm.push(bash('echo v1 > d/secret.key && echo planted > d/planted.txt'));
    harness.llm.push(bash('rm d/planted.txt && echo v2 > d/secret.key'));
    harness.llm.push(bash(`${PYTHON} racer.py d swap 240 >/dev/null 2>&1 &`));
    // Each bash call is preceded by a checkpoint of the workdir, taken while the swaps go on.
    for (let index = 0; index < SNAPSHOTS; index++) harness.llm.push(bash(`echo ${index} > counter-${index % 3}.txt`));
    harness.llm.push({ text: 'done' });
    const id = await harness.createConversation({ workdir, initial_message: 'race' });
    await harness.waitForStatus(id, ['idle', 'error', 'stuck'], 200_000);
    const checkpoints = (await harness.get(`/conversations/${id}/checkpoints?limit=200`)).body.items as { id: string; trigger: string }[];
    // Some are skipped with a warning when the workdir moved under git (workdir_changed): most are taken.
    expect(checkpoints.length).toBeGreaterThan(SNAPSHOTS / 2);
    // run start; before the first bash (v0); before the second (v1 + planted); before the third (v2).
    const withPlanted = checkpoints[2]!.id;
    const without = checkpoints[3]!.id;

    const statuses: number[] = [];
    for (let index = 0; index < REWINDS; index++) {
      const rewound = await harness.post(`/conversations/${id}/rewind`, { checkpoint_id: index % 2 === 0 ? withPlanted : without, files: true, conversation: false });
      statuses.push(rewound.status);
    }
    const changes = await harness.get(`/conversations/${id}/changes?limit=1000`);
    await harness.post(`/conversations/${id}/messages`, { content: 'stop', run: false });

    const repositories = shadowRepositories(harness.server.dataDir);
    expect(repositories.length).toBeGreaterThan(0);
    // Soft: each check reports on its own, so a failure shows every way the decoy got through.
    for (const repository of repositories) expect.soft(allObjects(repository).includes(DECOY_SECRET), repository).toBe(false);
    expect.soft(JSON.stringify(changes.body)).not.toContain(DECOY_SECRET);
    expect.soft(decoyInWorkdir(workdir)).toEqual([]);
    expect.soft(ownedSnapshot(decoy)).toBe(decoyBefore);
    expect.soft(fs.readdirSync(base).sort()).toEqual(outsideBefore);
    // No rewind ended in a server error; the race ran through them (some restored planted.txt into the real `d`).
    expect(statuses.filter((status) => status >= 500)).toEqual([]);
    expect(statuses.filter((status) => status === 200 || status === 201).length).toBeGreaterThan(0);
  });
});
