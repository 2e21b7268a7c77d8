import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startFakeLlm, type FakeLlm } from '../fake-llm/fake-llm-server.js';
import { tempDir } from '../support/agentd.js';
import { runCli } from '../support/cli.js';
import { idmapRefusal } from '../support/idmap.js';
import { sandboxUid } from '../../src/adapters/sandbox/identity.js';

/**
 * `agentd run` as root in the user's repository (issue 79): the repository is the user's, so it is
 * never chowned to the sandbox's uid; the agent works there as a uid of its own through an
 * id-mapped mount (issue 71), or as the directory's owner where the kernel refuses one. What it
 * makes is the owner's either way, and git on the host still accepts the repository afterwards.
 */
const asRoot = process.getuid?.() === 0;
const bwrapWorks = spawnSync('bwrap', ['--ro-bind', '/', '/', '--unshare-pid', '--', '/bin/true']).status === 0;
const idmapped = asRoot && bwrapWorks && (await idmapRefusal()) === null;
const OTHER_OWNER = 23_456;

let base: string;
let llm: FakeLlm;

beforeAll(async () => {
  base = fs.realpathSync(tempDir('agentd-cli-owner-'));
  fs.mkdirSync(path.join(base, 'home'));
  llm = await startFakeLlm();
});

afterAll(async () => {
  await llm?.close();
  if (base) fs.rmSync(base, { recursive: true, force: true });
});

/** A git repository with a committed file and a subdirectory, owned by `owner`. */
function makeRepo(name: string, owner: number): string {
  const repo = path.join(base, name);
  fs.mkdirSync(path.join(repo, 'src'), { recursive: true });
  fs.writeFileSync(path.join(repo, 'src', 'main.txt'), 'main\n');
  const git = (...args: string[]) => expect(spawnSync('git', ['-C', repo, ...args], { env: { PATH: process.env.PATH!, HOME: base } }).status).toBe(0);
  git('init', '-q');
  git('add', '.');
  git('-c', 'user.name=u', '-c', 'user.email=u@example.invalid', 'commit', '-qm', 'first');
  if (owner !== 0) spawnSync('chown', ['-R', '-h', `${owner}:${owner}`, repo]);
  return repo;
}

/** uid of every entry under `dir` (links not followed). */
function owners(dir: string): Map<string, number> {
  const found = new Map<string, number>();
  const walk = (at: string) => {
    for (const entry of fs.readdirSync(at, { withFileTypes: true })) {
      const full = path.join(at, entry.name);
      found.set(path.relative(dir, full), fs.lstatSync(full).uid);
      if (entry.isDirectory()) walk(full);
    }
  };
  found.set('.', fs.lstatSync(dir).uid);
  walk(dir);
  return found;
}

describe.skipIf(!asRoot || !bwrapWorks)('agentd run as root leaves the repository to its owner', () => {
  for (const owner of [0, OTHER_OWNER]) {
    it(`a repository owned by uid ${owner}: nothing changes owner, the agent's files are the owner's, host git still works`, { timeout: 60_000 }, async () => {
      const repo = makeRepo(`repo-${owner}`, owner);
      const before = owners(repo);
      expect([...before.values()].every((uid) => uid === owner)).toBe(true);
      llm.setScript([{ toolCalls: [{ name: 'bash', arguments: { command: 'echo made > src/made-by-agent.txt && mkdir -p out && echo x > out/y && id -u && git status --porcelain' } }] }, { text: 'Done.' }]);
      const result = await runCli(['run', 'make files'], { cwd: repo, env: { HOME: path.join(base, 'home'), AGENTD_LLM_MODEL: 'fake-model', OPENAI_BASE_URL: llm.url, OPENAI_API_KEY: 'sk-fake' } });
      expect(result.code, result.stderr).toBe(0);
      expect(result.stderr).toContain(`⎿ ${idmapped ? sandboxUid(repo) : owner}`);
      const after = owners(repo);
      for (const [entry, uid] of before) expect(after.get(entry), entry).toBe(uid);
      for (const entry of ['src/made-by-agent.txt', 'out', 'out/y']) expect(after.get(entry), entry).toBe(owner);
      // The user's git on the host accepts the repository (it refuses one owned by another uid).
      const status = spawnSync('git', ['-C', repo, 'status', '--porcelain'], { env: { PATH: process.env.PATH!, HOME: base }, encoding: 'utf8' });
      if (owner === 0) {
        expect(status.stderr).not.toContain('dubious ownership');
        expect(status.status).toBe(0);
        expect(status.stdout).toContain('src/made-by-agent.txt');
      }
    });
  }
});

if (!asRoot || !bwrapWorks) console.log('skipped: the workdir ownership tests need root and a working bubblewrap');
