/**
 * A temp layout for containment tests, and a corpus of traversal payloads against it:
 *
 *   <base>/canary.txt           must never be read, overwritten or deleted
 *   <base>/outside/secret.txt   a directory outside the workdir
 *   <base>/etc/passwd           a decoy of a system file: what `link-root/etc/passwd` reaches
 *   <base>/wd/                  the workdir (src/a.txt, and symlinks pointing in and out)
 *   <base>/wd-evil/secret.txt   a sibling whose name starts with the workdir's
 *   <base>/wd-link -> wd        the workdir reached through a symlink
 *
 * Every payload that could escape aims at these decoys, never at a real system path: with
 * containment broken on purpose, a test fails (the snapshot of every decoy differs) and the
 * machine is untouched. `link-root` points at <base> (a fake `/`), `link-etc` at <base>/etc.
 *
 * Reusable by the HTTP file-route tests: every payload must be refused (400/403).
 */
import { createHash } from 'node:crypto';
import { lstat, mkdir, mkdtemp, readdir, readFile, readlink, realpath, rm, symlink, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';

export const CANARY_CONTENT = 'CANARY: never read, overwritten or deleted\n';
export const SECRET_CONTENT = 'outside secret\n';
export const PASSWD_DECOY_CONTENT = 'root:x:0:0:decoy, not the real one:/root:/bin/sh\n';
export const SIBLING_CONTENT = 'sibling with the workdir as prefix\n';

export interface TraversalFixture {
  base: string;
  workdir: string;
  workdirLink: string;
  canary: string;
  outsideDir: string;
  /** Every payload must be refused by the resolver (typed error), with or without allowAbsolute. */
  payloads: string[];
  /** The sibling `<workdir>-evil` (its name has the workdir's as prefix). */
  sibling: string;
  /** Everything outside the workdir, with file hashes and modes: compare before and after. */
  outsideSnapshot(): Promise<string>;
  /** Throws when a decoy file is gone or changed. */
  assertDecoysIntact(): Promise<void>;
  cleanup(): Promise<void>;
}

export async function createTraversalFixture(): Promise<TraversalFixture> {
  const base = await realpath(await mkdtemp(path.join(os.tmpdir(), 'agentd-traversal-')));
  const workdir = path.join(base, 'wd');
  const outsideDir = path.join(base, 'outside');
  const canary = path.join(base, 'canary.txt');
  await mkdir(path.join(workdir, 'src'), { recursive: true });
  await mkdir(path.join(workdir, 'sub'), { recursive: true });
  await mkdir(outsideDir);
  await writeFile(canary, CANARY_CONTENT);
  await writeFile(path.join(outsideDir, 'secret.txt'), SECRET_CONTENT);
  await writeFile(path.join(workdir, 'src', 'a.txt'), 'alpha\nbeta\n');
  await mkdir(path.join(base, 'etc'));
  await writeFile(path.join(base, 'etc', 'passwd'), PASSWD_DECOY_CONTENT);
  const sibling = `${workdir}-evil`;
  await mkdir(sibling);
  await writeFile(path.join(sibling, 'secret.txt'), SIBLING_CONTENT);

  const links: Array<[target: string, link: string]> = [
    [outsideDir, 'link-out-dir'],
    ['../outside', 'link-out-rel'],
    ['../canary.txt', 'link-canary'],
    [canary, 'link-canary-abs'],
    [base, 'link-root'],
    [path.join(base, 'etc'), 'link-etc'],
    [sibling, 'link-sibling'],
    ['../wd-evil', 'link-sibling-rel'],
    ['../..', 'sub/link-up'],
    ['../new-outside-file.txt', 'dangling-out'],
    [path.join(outsideDir, 'not-yet'), 'dangling-out-dir'],
    ['link-out-rel', 'chain1'],
    ['loop-b', 'loop-a'],
    ['loop-a', 'loop-b'],
    ['src', 'link-in'],
    ['src/a.txt', 'link-in-file'],
  ];
  for (const [target, link] of links) await symlink(target, path.join(workdir, link));
  const workdirLink = path.join(base, 'wd-link');
  await symlink(workdir, workdirLink);

  const payloads = [
    // plain traversal
    '..', '../', '../canary.txt', '../etc/passwd', 'src/../../canary.txt', 'src/../../etc/passwd',
    './../canary.txt', 'a/b/c/../../../../canary.txt', '../wd/../canary.txt', 'src/./../.././canary.txt',
    // absolute
    path.join(base, 'etc', 'passwd'), base, `/${base}/etc/passwd`, canary, `${workdir}/../canary.txt`, `${workdir}/../outside/secret.txt`,
    `${workdir}/link-canary`, `${workdir}/link-out-dir/secret.txt`, `${workdirLink}/../canary.txt`,
    // a sibling whose name has the workdir as prefix
    sibling, `${sibling}/secret.txt`, `${workdir}-evil/new-file.txt`, '../wd-evil/secret.txt', '../wd-evil',
    'link-sibling/secret.txt', 'link-sibling-rel/secret.txt', 'link-sibling', 'src/../../wd-evil/secret.txt',
    // percent-encoded and double-encoded
    '%2e%2e/canary.txt', '%2e%2e%2fcanary.txt', '..%2fcanary.txt', '%2E%2E%2Fetc%2Fpasswd',
    '%252e%252e%252fcanary.txt', '%252e%252e/canary.txt', '..%252fcanary.txt', 'src%2f..%2f..%2fcanary.txt',
    `${encodeURIComponent(base)}%2fetc%2fpasswd`, '..%5ccanary.txt', '..%2fwd-evil%2fsecret.txt', '.%2e/canary.txt', '%2e./canary.txt', 'src/%2e%2e/%2e%2e/canary.txt',
    '%2e%2e%5c%2e%2e%5ccanary.txt', '%25252e%25252e/canary.txt',
    // overlong UTF-8 and Unicode look-alikes
    '%c0%ae%c0%ae/canary.txt', '..%c0%afcanary.txt', '%e0%80%ae%e0%80%ae/canary.txt',
    '\uff0e\uff0e/canary.txt', '..\uff0fcanary.txt', '\u2025/canary.txt', '%ef%bc%8e%ef%bc%8e/canary.txt',
    // backslashes
    '..\\canary.txt', '..\\etc\\passwd', 'src\\..\\..\\canary.txt', '..\\wd-evil\\secret.txt', 'C:\\Windows\\win.ini',
    // NUL and control bytes
    'canary.txt\0', '../canary.txt\0.png', 'src/a.txt%00', '%00', 'src/a.txt\0../../canary.txt', 'src/a\nb',
    // home and drive letters
    '~/canary.txt', '~root/canary.txt', 'C:/Windows',
    // symlinks inside the workdir that lead out
    'link-out-dir', 'link-out-dir/secret.txt', 'link-out-rel/secret.txt', 'link-canary', 'link-canary-abs',
    'link-root/etc/passwd', 'link-etc/passwd', 'sub/link-up/canary.txt', 'sub/link-up', 'dangling-out',
    'dangling-out-dir/file.txt', 'link-out-dir/new-file.txt', 'link-out-dir/deep/new/file.txt', 'chain1/secret.txt',
    'link-in/../link-canary', 'loop-a', 'loop-a/x',
  ];

  /**
   * Every entry outside the workdir (symlinks read, never followed), with the bytes of every
   * file: any decoy read-modified, created, deleted or chmodded shows up as a difference.
   */
  const outsideSnapshot = async () => {
    // By hand: fs.readdir({recursive}) follows symlinks on Node 20.
    const entries: string[] = [];
    const visit = async (dir: string, prefix: string): Promise<void> => {
      for (const dirent of await readdir(dir, { withFileTypes: true })) {
        const relative = prefix + dirent.name;
        if (relative === 'wd' || relative === 'wd-link') continue;
        const absolute = path.join(dir, dirent.name);
        const stats = await lstat(absolute);
        const mode = (stats.mode & 0o7777).toString(8);
        if (dirent.isSymbolicLink()) entries.push(`${relative} -> ${await readlink(absolute)}`);
        else if (dirent.isDirectory()) entries.push(`${relative}/ ${mode}`);
        else entries.push(`${relative} ${mode} ${createHash('sha256').update(await readFile(absolute)).digest('hex')}`);
        if (dirent.isDirectory()) await visit(absolute, `${relative}/`);
      }
    };
    await visit(base, '');
    entries.sort();
    return JSON.stringify(entries, null, 1);
  };

  /** The decoys a broken containment would hit first, as the test created them. */
  const expectedDecoys: Record<string, string> = {
    [canary]: CANARY_CONTENT,
    [path.join(outsideDir, 'secret.txt')]: SECRET_CONTENT,
    [path.join(base, 'etc', 'passwd')]: PASSWD_DECOY_CONTENT,
    [path.join(sibling, 'secret.txt')]: SIBLING_CONTENT,
  };
  const assertDecoysIntact = async () => {
    for (const [file, content] of Object.entries(expectedDecoys)) {
      const actual = await readFile(file, 'utf8').catch((error: NodeJS.ErrnoException) => `<${error.code}>`);
      if (actual !== content) throw new Error(`decoy ${file} was touched: ${JSON.stringify(actual)}`);
    }
  };

  return {
    base,
    workdir,
    workdirLink,
    canary,
    outsideDir,
    payloads,
    sibling,
    outsideSnapshot,
    assertDecoysIntact,
    cleanup: () => rm(base, { recursive: true, force: true }),
  };
}
