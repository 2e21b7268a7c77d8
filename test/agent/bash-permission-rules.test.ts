// Permission rules on a parse of bash: every simple command in every nesting, normalised; what
// cannot be decided before it runs is asked (refused under default: deny). The variants are the
// ones a hostile agent ran past `deny: ["bash(rm -rf*)"]` when rules were string matching.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { TreeSitterShellParser } from '../../src/adapters/shell-syntax/index.js';
import { NodeWorkdirFileSystem } from '../../src/adapters/workspace/index.js';
import { PermissionPolicy, type PermissionsConfig } from '../../src/core/permissions/permission-policy.js';

const readers = { shellParser: new TreeSitterShellParser(), resolvePath: (workdir: string, userPath: string) => new NodeWorkdirFileSystem().resolve(workdir, userPath, { allowAbsolute: true }) };
const policy = (conversation: PermissionsConfig, confirmationMode = false) => new PermissionPolicy({ conversation, confirmationMode, readers });
const decide = async (rules: PermissionPolicy, command: string) => (await rules.check('bash', { command }, '/nowhere')).decision;

/** Each runs `rm -rf victim` (or would, in a workdir with `victim/`): a deny rule must find it. */
const DENIED_VARIANTS = [
  '(rm -rf victim)',
  '{ rm -rf victim; }',
  'if true; then rm -rf victim; fi',
  'for d in victim; do rm -rf "$d"; done',
  'while true; do rm -rf victim; break; done',
  'case x in x) rm -rf victim;; esac',
  'echo $(rm -rf victim)',
  'echo `rm -rf victim`',
  'cat <(rm -rf victim)',
  "eval 'rm -rf victim'",
  "bash -c 'rm -rf victim'",
  'sh -c "cd . && rm -rf victim"',
  '\\rm -rf victim',
  '/bin/rm -rf victim',
  'X=1 rm -rf victim',
  'rm -fr victim',
  'rm -r -f victim',
  'rm --recursive --force victim',
  'rm victim -Rf',
  'command rm -rf victim',
  'env X=1 nice -n 5 timeout 10 sudo -u root rm -rf victim',
  'echo victim | xargs rm -rf',
  'f() { rm -rf victim; }; f',
  '"r""m" -rf victim',
  "$'\\x72m' -rf victim",
  'find . -name victim -exec rm -rf {} +',
  'true && ls | rm -rf victim',
  'export CLEAN="$(rm -rf victim)"',
];

/** Each can run `rm -rf victim` but no parse can tell before it runs: asked (refused under default: deny). */
const UNDECIDABLE_VARIANTS = [
  'echo cm0gLXJmIHZpY3RpbQ== | base64 -d | bash',
  'eval "$CMD"',
  'bash -c "$CMD"',
  '$CMD -rf victim',
  '${CMD} -rf victim',
  'source ./cleanup.sh',
  '. ./cleanup.sh',
  'bash ./cleanup.sh',
  "bash <<< 'rm -rf victim'",
  'rm $FLAGS victim',
  'env -S "rm -rf victim"',
  'echo ${x:=$\'\\x24(rm -rf victim)\'} ${x@P}',
  'echo ${!ref}',
  'echo "unterminated $(rm -rf victim"',
];

describe('bash rules on a parse of the command', () => {
  const denyRm = policy({ deny: ['bash(rm -rf*)'] });

  it.each(DENIED_VARIANTS)('deny bash(rm -rf*) refuses %s', async (command) => {
    expect(await denyRm.check('bash', { command }, '/nowhere')).toEqual({ decision: 'deny', rule: 'deny: bash(rm -rf*)', source: 'conversation' });
  });

  it.each(UNDECIDABLE_VARIANTS)('what cannot be decided is asked under deny rules, refused under default deny: %s', async (command) => {
    expect(await decide(denyRm, command)).toBe('ask');
    const strict = await policy({ default: 'deny', allow: ['bash(echo *)', 'bash(rm *)', 'bash(base64 *)'], deny: ['bash(rm -rf*)'] }).check('bash', { command }, '/nowhere');
    expect(strict.decision).toBe('deny');
    expect(strict.undecidable).toEqual(expect.any(String));
  });

  it('leaves alone what the rules do not name', async () => {
    for (const command of ['ls -la', 'rm victim/file.txt', 'rm -r victim', 'echo "rm -rf victim"', "grep -r 'rm -rf' .", 'git status && npm test', 'echo $HOME $(date)']) {
      expect(await decide(denyRm, command), command).toBe('allow');
    }
  });

  it('an allow rule covers every command of the line, and nothing hidden in an expansion (the @P case)', async () => {
    const echoOnly = policy({ default: 'ask', allow: ['bash(echo *)', 'bash(git status)', 'bash(npm test*)'] });
    expect(await decide(echoOnly, 'echo hello world')).toBe('allow');
    expect(await decide(echoOnly, 'echo $HOME')).toBe('allow');
    expect(await decide(echoOnly, "echo ${x:=$'\\x24(touch pwn)'} ${x@P}")).toBe('ask');
    expect(await decide(echoOnly, 'echo $(touch pwn)')).toBe('ask');
    expect(await decide(echoOnly, 'echo ok; touch pwn')).toBe('ask');
    expect(await decide(echoOnly, 'git status; npm test -- --run')).toBe('allow');
    expect(await decide(echoOnly, 'git status --porcelain')).toBe('ask');
    expect(await decide(echoOnly, 'git $SUB')).toBe('ask');
    expect(await decide(echoOnly, 'PATH=/tmp/bin')).toBe('ask');
    expect(await decide(echoOnly, 'export PATH=/tmp/bin')).toBe('ask');
    expect(await decide(policy({ default: 'ask', allow: ['bash(export *)', 'bash(echo *)'] }), 'export A=1 && echo $A')).toBe('allow');
    expect(await decide(policy({ default: 'deny', allow: ['bash(echo *)'] }), "echo ${x:=$'\\x24(touch pwn)'} ${x@P}")).toBe('deny');
  });

  it('deny wins over allow, ask wins over allow (allow bash, ask git push*, deny rm -rf*)', async () => {
    const rules = policy({ allow: ['bash'], ask: ['bash(git push*)'], deny: ['bash(rm -rf*)'] });
    expect(await rules.check('bash', { command: 'rm -rf victim' }, '/nowhere')).toEqual({ decision: 'deny', rule: 'deny: bash(rm -rf*)', source: 'conversation' });
    expect(await rules.check('bash', { command: 'git push origin main' }, '/nowhere')).toEqual({ decision: 'ask', rule: 'ask: bash(git push*)', source: 'conversation' });
    expect(await rules.check('bash', { command: 'git -C . status && git push --force' }, '/nowhere')).toMatchObject({ decision: 'ask' });
    expect(await rules.check('bash', { command: 'ls' }, '/nowhere')).toEqual({ decision: 'allow', rule: 'allow: bash', source: 'conversation' });
    expect(await decide(rules, 'eval "$CMD"')).toBe('ask');
    // With no deny or ask rule about bash, an unconditional allow allows even what cannot be decided.
    expect(await decide(policy({ allow: ['bash'], deny: ['file_editor'] }), 'eval "$CMD"')).toBe('allow');
  });

  it('keeps the rule syntax: prefixes, `:*`, tool globs', async () => {
    const rules = policy({ default: 'deny', allow: ['bash(npm run test:*)', 'bash(ls)'], ask: ['bash(git push --force*)'] });
    expect(await decide(rules, 'npm run test:unit')).toBe('allow');
    expect(await decide(rules, 'ls')).toBe('allow');
    expect(await decide(rules, 'ls -la')).toBe('deny');
    expect(await decide(rules, 'git push origin main --force')).toBe('ask');
    expect(await decide(rules, 'git push -f origin main')).toBe('ask');
  });
});

describe('path rules match where the path resolves in the workdir', () => {
  const base = fs.mkdtempSync(path.join(os.tmpdir(), 'agentd-path-rules-'));
  const workdir = path.join(base, 'w');
  fs.mkdirSync(path.join(workdir, 'secret'), { recursive: true });
  fs.mkdirSync(path.join(workdir, '.github', 'workflows'), { recursive: true });
  fs.mkdirSync(path.join(workdir, 'src'));
  fs.writeFileSync(path.join(workdir, 'secret', 'key.txt'), 'decoy');
  fs.symlinkSync('secret', path.join(workdir, 'public'));
  fs.symlinkSync('../.github/workflows', path.join(workdir, 'src', 'wf'));
  afterAll(() => fs.rmSync(base, { recursive: true, force: true }));

  it('a link to a denied directory is denied, for file_editor and grep', async () => {
    const rules = policy({ deny: ['file_editor(secret/**)', 'grep(secret/**)'] });
    expect(await rules.check('file_editor', { command: 'view', path: 'public/key.txt' }, workdir)).toEqual({ decision: 'deny', rule: 'deny: file_editor(secret/**)', source: 'conversation' });
    expect((await rules.check('grep', { pattern: 'x', path: 'public' }, workdir)).decision).toBe('deny');
    expect((await rules.check('grep', { pattern: 'x', path: `${workdir}/public/` }, workdir)).decision).toBe('deny');
    expect((await rules.check('file_editor', { command: 'view', path: 'src/a.ts' }, workdir)).decision).toBe('allow');
  });

  it('an allow rule must cover where a link leads: src/wf → .github/workflows is not src/**', async () => {
    const rules = policy({ default: 'deny', allow: ['file_editor(src/**)'] });
    expect((await rules.check('file_editor', { command: 'create', path: 'src/wf/ci.yml', file_text: 'x' }, workdir)).decision).toBe('deny');
    expect((await rules.check('file_editor', { command: 'create', path: 'src/new/file.ts', file_text: 'x' }, workdir)).decision).toBe('allow');
  });
});
