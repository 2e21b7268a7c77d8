import { createHash } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';

/** A workdir with more entries than this is left to git (the walk would cost more than it saves). */
const MAX_ENTRIES = 2000;
/**
 * A file changed this recently may change again within the same timestamp tick without its
 * stat data changing (git's "racily clean" case): its content goes into the fingerprint.
 * Linux stamps files from a coarse clock (a jiffy, 1-10 ms); 2 s covers coarser filesystems.
 */
const RACY_MS = 2000;
/** Young (racy) files are read whole, and those rechecked: past this many bytes of them, no fingerprint. */
const MAX_RACY_BYTES = 1024 * 1024;
/** Entries walked in one turn of the event loop (about a millisecond of lstat calls). */
const SLICE_ENTRIES = 256;

export type Fingerprint =
  | {
      kind: 'print';
      /** The stat data of every entry. */
      digest: string;
      /** The content (SHA-1) of each file changed in the last RACY_MS, by path: its stat data alone could miss a rewrite. */
      young: ReadonlyMap<string, string>;
      /** The content now of the files young at the print this one was taken after (`earlier`) and no longer young. */
      rechecked: ReadonlyMap<string, string>;
      empty: boolean;
      /**
       * Whether git may stage the whole workdir as it is (`git add -A`): no regular file larger
       * than the walk's `maxFileBytes`, and no repository nested below the top (git would add it
       * as a gitlink).
       */
      wholeStageable: boolean;
    }
  /** Too many entries: not worth walking again. */
  | { kind: 'large' }
  /** Could not be taken this time (unreadable, a racy file too big, a race with the agent). */
  | { kind: 'none' };

/**
 * What the last walk of a workdir read of its directories, to be read again only when they
 * changed: a directory's list of entries changes only with its own mtime and ctime (an entry
 * added, removed or renamed stamps both; `utimes` stamps the ctime), so a directory whose stat
 * data are the same as at the last walk still holds the names read then. Only a listing read
 * when the directory's stamps were already RACY_MS old is kept (a change within the same tick of
 * the coarse clock would leave them as they were). Saves a walk the four to five system calls of
 * a `readdir` per directory: it uses the stat data it takes anyway (of the root, one `stat` more,
 * skipped while the root's listing could not be kept: a workdir changed at its top a moment ago).
 */
export class DirectoryListings {
  private last = new Map<string, Listing>();
  /** Until then the root's stamps are too recent for its listing to be kept: it is read without a stat. */
  private rootYoungUntil = 0;

  /** The root's stat data, or null while its listing could not be kept anyway. */
  rootStat(workdir: string, now: number): fs.Stats | null {
    if (now < this.rootYoungUntil) return null;
    const stat = fs.statSync(workdir);
    const newest = Math.max(stat.mtimeMs, stat.ctimeMs);
    if (newest >= now - RACY_MS) this.rootYoungUntil = newest + RACY_MS;
    return stat;
  }

  /** The directory's names, sorted: as last read when its stat data are unchanged, else read now; `kept` gets what the next walk may reuse. */
  namesOf(absolute: string, relative: string, stat: fs.Stats | null, now: number, kept: Map<string, Listing>): string[] {
    if (stat === null) return fs.readdirSync(absolute).sort();
    const stamp = `${stat.ino}:${stat.dev}:${stat.mtimeMs}:${stat.ctimeMs}`;
    const known = this.last.get(relative);
    if (known !== undefined && known.stamp === stamp) {
      kept.set(relative, known);
      return known.names;
    }
    const names = fs.readdirSync(absolute).sort();
    if (stat.mtimeMs < now - RACY_MS && stat.ctimeMs < now - RACY_MS) kept.set(relative, { stamp, names });
    return names;
  }

  /** A walk is over: what it kept is what the next one compares with (one that gave up leaves nothing). */
  settle(kept: Map<string, Listing>, completed: boolean): void {
    this.last = completed ? kept : new Map();
  }
}

interface Listing {
  stamp: string;
  names: string[];
}

/**
 * What a snapshot of `workdir` depends on, from stat data (plus the content of files changed in
 * the last moments): if a print is unchangedSince() an earlier one, nothing in the workdir changed
 * in between, so its tree is the one recorded then and git need not look. Bounded (MAX_ENTRIES
 * lstat calls), made with synchronous calls in slices of SLICE_ENTRIES: the event loop serves the
 * server's other work between slices instead of waiting for the whole walk, long enough to be
 * felt for a workdir near MAX_ENTRIES. A change made while it walks is in this print or in the
 * next one, as with a change made while git looks. `.git` entries are skipped as the shadow
 * repository skips them. Symlinks are never followed. `listings`: the directories read by the previous walk of the same workdir,
 * reused where unchanged (see DirectoryListings). `earlier`: the print this one will be compared
 * with; the files young then are read again (see unchangedSince).
 */
export async function workdirFingerprint(workdir: string, listings: DirectoryListings = new DirectoryListings(), earlier?: Fingerprint, maxFileBytes = Infinity): Promise<Fingerprint> {
  // What this walk reads for the next one (its own map: two walks of one workdir never mix theirs).
  const kept = new Map<string, Listing>();
  const print = await walk({ workdir, listings, kept, recheck: earlier?.kind === 'print' ? earlier.young : new Map(), maxFileBytes });
  listings.settle(kept, print.kind === 'print');
  return print;
}

/**
 * Whether nothing in the workdir changed from `earlier` to `later` (taken after it, with it as
 * `earlier`): the same stat data, and each file young at `earlier` holds what it held then. A file
 * that is no longer young has stamps older than RACY_MS: a write from now on stamps it anew, so
 * its stat data alone tell from then on (later's `young` leaves it out for the next comparison).
 * Without its recheck, a file leaving its young moments would look like a change (and cost a
 * `git status`) at the first print after it, which on an agent's timescale (seconds between
 * steps) is most prints after a file-changing step.
 */
export function unchangedSince(earlier: Fingerprint, later: Fingerprint): boolean {
  if (earlier.kind !== 'print' || later.kind !== 'print' || earlier.digest !== later.digest) return false;
  for (const [file, content] of earlier.young) if ((later.young.get(file) ?? later.rechecked.get(file)) !== content) return false;
  return true;
}

async function walk(options: { workdir: string; listings: DirectoryListings; kept: Map<string, Listing>; recheck: ReadonlyMap<string, string>; maxFileBytes: number }): Promise<Fingerprint> {
  const { workdir, listings, kept, recheck, maxFileBytes } = options;
  let wholeStageable = true;
  const hash = createHash('sha1');
  const young = new Map<string, string>();
  const rechecked = new Map<string, string>();
  const now = Date.now();
  let entries = 0;
  let readBytes = 0;
  try {
    // Each directory with its stat data (the root's followed, as its readdir follows it).
    const pending: [string, fs.Stats | null][] = [['', listings.rootStat(workdir, now)]];
    while (pending.length > 0) {
      const [relative, dirStat] = pending.pop()!;
      const names = listings.namesOf(path.join(workdir, relative), relative, dirStat, now, kept);
      hash.update(`D${relative}\0${names.length}\n`);
      for (const name of names) {
        if (name === '.git') {
          if (relative !== '') wholeStageable = false;
          continue;
        }
        if (++entries > MAX_ENTRIES) return { kind: 'large' };
        if (entries % SLICE_ENTRIES === 0) await new Promise((resolve) => setImmediate(resolve));
        const child = relative === '' ? name : `${relative}/${name}`;
        const absolute = path.join(workdir, child);
        const stat = fs.lstatSync(absolute);
        hash.update(`${name}\0${stat.mode}\0${stat.size}\0${Math.trunc(stat.mtimeMs)}\0${Math.trunc(stat.ctimeMs)}\0${stat.ino}\0${stat.dev}\n`);
        if (stat.isDirectory()) pending.push([child, stat]);
        else if (stat.isFile()) {
          if (stat.size > maxFileBytes) wholeStageable = false;
          const isYoung = stat.mtimeMs >= now - RACY_MS || stat.ctimeMs >= now - RACY_MS;
          if (!isYoung && !recheck.has(child)) continue;
          readBytes += stat.size;
          const content = readBytes > MAX_RACY_BYTES ? null : contentDigest(absolute, stat);
          if (content === null) return { kind: 'none' };
          (isYoung ? young : rechecked).set(child, content);
        }
      }
    }
  } catch {
    return { kind: 'none' };
  }
  return { kind: 'print', digest: hash.digest('hex'), young, rechecked, empty: entries === 0, wholeStageable };
}

/** A regular file's content digest; null when it is no longer the file that was stat'ed (never blocks, never follows a link). */
function contentDigest(file: string, stat: fs.Stats): string | null {
  const fd = fs.openSync(file, fs.constants.O_RDONLY | fs.constants.O_NOFOLLOW | fs.constants.O_NONBLOCK);
  try {
    const opened = fs.fstatSync(fd);
    if (!opened.isFile() || opened.ino !== stat.ino || opened.dev !== stat.dev) return null;
    const hash = createHash('sha1');
    const buffer = Buffer.allocUnsafe(64 * 1024);
    let read: number;
    while ((read = fs.readSync(fd, buffer, 0, buffer.length, null)) > 0) hash.update(buffer.subarray(0, read));
    return hash.digest('hex');
  } finally {
    fs.closeSync(fd);
  }
}
