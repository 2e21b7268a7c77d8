import { execFile } from 'node:child_process';
import { readdir, readlink, stat } from 'node:fs/promises';

/**
 * The workdir's disk limit (AGENTD_LIMIT_WORKDIR_MB). While a command runs, the workdir's disk
 * usage is measured every `intervalMs` (2 s) with `du -s -x` (coreutils: it walks the tree
 * without following symlinks or leaving the filesystem, and counts hard links once); one
 * measurement at a time, each bounded by `timeoutMs` and spaced so that walking takes at most a
 * tenth of the time (a tree that takes 1 s to walk is measured every 10 s). Nothing is measured
 * while no command runs, so an idle conversation costs nothing. Past the limit, and not
 * shrinking since the previous measurement (a command deleting files is left alone), the
 * command is stopped and its output ends with a message for the LLM. A file written in less
 * than one interval can overshoot the limit by what it wrote; RLIMIT_FSIZE bounds each file.
 * Between commands a shell is watched while it has background jobs (bash-shell-session.ts).
 * Files deleted while still open take disk space that no walk finds: the watched processes'
 * (`processes`) open descriptors to deleted files on the workdir's filesystem are added to it.
 */
export interface WorkdirGuardOptions {
  workdir: string;
  limitMb: number;
  intervalMs?: number;
  timeoutMs?: number;
}

export class WorkdirGuard {
  private lastBytes: number | null = null;

  constructor(private readonly options: WorkdirGuardOptions) {}

  /**
   * Watches until the returned function is called or `keepWatching` (asked before each
   * measurement) says no more; `onExceeded` runs at most once, with the message for the LLM saying
   * what was stopped (`what`, default "the command").
   */
  watch(onExceeded: (message: string) => void, options: { what?: string; keepWatching?: () => boolean; processes?: () => number[] } = {}): () => void {
    let stopped = false;
    let timer: NodeJS.Timeout | undefined;
    const interval = this.options.intervalMs ?? 2_000;
    const schedule = (delayMs: number): void => {
      timer = setTimeout(tick, delayMs);
      timer.unref();
    };
    const tick = (): void => {
      if (options.keepWatching && !options.keepWatching()) return;
      const started = performance.now();
      void this.measure(options.processes?.() ?? []).then((bytes) => {
        if (stopped) return;
        // A walk that takes long (a huge tree) spaces the next one out: at most a tenth of the time walking.
        const next = Math.max(interval, 10 * (performance.now() - started));
        if (bytes === null) return schedule(next);
        const previous = this.lastBytes;
        this.lastBytes = bytes;
        if (bytes <= this.limitBytes || (previous !== null && bytes < previous)) return schedule(next);
        stopped = true;
        onExceeded(workdirLimitMessage({ usedBytes: bytes, limitMb: this.options.limitMb, stopped: options.what }));
      });
    };
    schedule(interval);
    return () => {
      stopped = true;
      clearTimeout(timer);
    };
  }

  /**
   * Disk usage of the workdir in bytes, or null when it could not be measured in time: what `du`
   * finds, and the deleted files that `processes` hold open on the workdir's filesystem.
   */
  async measure(processes: readonly number[] = []): Promise<number | null> {
    const [walked, unlinked] = await Promise.all([
      new Promise<number | null>((resolve) => {
        execFile('du', ['-s', '-x', '-B1', '--', this.options.workdir], { timeout: this.options.timeoutMs ?? 10_000, encoding: 'utf8' }, (_error, stdout) => {
          // du exits 1 when a file vanished during the walk: its total is still good.
          const bytes = Number.parseInt(stdout.split('\t')[0] ?? '', 10);
          resolve(Number.isFinite(bytes) ? bytes : null);
        });
      }),
      processes.length === 0 ? 0 : deletedOpenBytes(this.options.workdir, processes),
    ]);
    return walked === null ? null : walked + unlinked;
  }

  private get limitBytes(): number {
    return this.options.limitMb * 1024 * 1024;
  }
}

/**
 * The disk space of the files that `processes` hold open after their deletion, on the
 * filesystem of `workdir` (a sandbox's /tmp is a tmpfs of its own: not counted), each once.
 */
async function deletedOpenBytes(workdir: string, processes: readonly number[]): Promise<number> {
  let device: number;
  try {
    device = (await stat(workdir)).dev;
  } catch {
    return 0;
  }
  const counted = new Set<number>();
  let bytes = 0;
  for (const pid of processes) {
    let fds: string[];
    try {
      fds = await readdir(`/proc/${pid}/fd`);
    } catch {
      continue; // gone meanwhile
    }
    for (const fd of fds) {
      try {
        if (!(await readlink(`/proc/${pid}/fd/${fd}`)).endsWith(' (deleted)')) continue;
        // stat through the descriptor's link reaches the open file itself.
        const file = await stat(`/proc/${pid}/fd/${fd}`);
        if (!file.isFile() || file.dev !== device || counted.has(file.ino)) continue;
        counted.add(file.ino);
        bytes += file.blocks * 512;
      } catch {
        // closed meanwhile
      }
    }
  }
  return bytes;
}

export function workdirLimitMessage(options: { usedBytes: number; limitMb: number; stopped?: string }): string {
  const usedMb = Math.round(options.usedBytes / (1024 * 1024));
  return `[agentd: the workdir uses ${usedMb} MB, past its limit of ${options.limitMb} MB (AGENTD_LIMIT_WORKDIR_MB), so ${options.stopped ?? 'the command'} was stopped. Delete files to get back under the limit before going on.]`;
}
