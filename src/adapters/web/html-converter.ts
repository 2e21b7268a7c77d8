import { createRequire } from 'node:module';
import { getAsset, isSea } from 'node:sea';
import type { Worker } from 'node:worker_threads';
import { htmlWorkerMain, type HtmlJob, type HtmlJobResult } from './html-worker-main.js';

/** The limits a page's conversion is held to (AGENTD_WEB_FETCH_HTML_*). */
export interface HtmlLimits {
  maxBytes: number;
  maxDepth: number;
  maxElements: number;
  timeoutMs: number;
}

export interface ConvertedPage {
  markdown: string;
  title: string | null;
  /** What was left out, and why; null: the whole page. */
  cut: string | null;
}

/** The single executable's bundle of html-worker-entry.ts (scripts/build-binary.mjs). */
export const HTML_WORKER_ASSET = 'html-worker.cjs';

/** At most this many pages convert at once; more wait for a worker. */
const MAX_WORKERS = 2;

/** A worker's heap: past it the worker ends (ERR_WORKER_OUT_OF_MEMORY), not the server. */
const WORKER_HEAP_MB = 512;

/**
 * HTML to Markdown off the event loop: each page converts in a worker thread (html-worker-main.ts)
 * held to `limits`. The workers start at the first page (a server that never fetches one starts
 * none), are kept for the next pages and never keep the process alive. A conversion past its time,
 * or whose run is stopped, ends its worker (`terminate` stops JavaScript mid-loop); one that runs
 * out of memory ends it too. Either way the page is answered with why it is not shown.
 */
export class HtmlConverter {
  private readonly idle: Worker[] = [];
  private readonly all = new Set<Worker>();
  private readonly waiting: Array<(worker: Worker) => void> = [];
  private started = 0;
  private nextId = 1;
  private closed = false;

  constructor(private readonly limits: HtmlLimits) {}

  async convert(html: string, signal: AbortSignal): Promise<ConvertedPage> {
    const worker = await this.acquire(signal);
    const id = this.nextId++;
    const job: HtmlJob = { id, html, maxDepth: this.limits.maxDepth, maxElements: this.limits.maxElements };
    const seconds = this.limits.timeoutMs / 1000;
    return new Promise<ConvertedPage>((resolve, reject) => {
      let settled = false;
      const finish = (page: ConvertedPage | null, error?: Error) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        signal.removeEventListener('abort', onAbort);
        worker.off('message', onMessage);
        worker.off('error', onError);
        worker.off('exit', onExit);
        if (page) resolve(page);
        else reject(error);
      };
      const end = (page: ConvertedPage | null, error?: Error) => {
        finish(page, error);
        this.discard(worker);
      };
      const onMessage = (result: HtmlJobResult) => {
        if (result.id !== id) return;
        finish('error' in result ? notShown(`it could not be converted (${result.error})`) : { markdown: result.markdown, title: result.title, cut: result.cut });
        this.release(worker);
      };
      const onError = (error: Error & { code?: string }) => end(notShown(error.code === 'ERR_WORKER_OUT_OF_MEMORY' ? 'converting it needed more memory than a page may use' : `it could not be converted (${error.message})`));
      const onExit = () => end(notShown('it could not be converted (the converter stopped)'));
      const onAbort = () => end(null, new Error('interrupted: the run was stopped'));
      const timer = setTimeout(() => end(notShown(`converting it took longer than ${seconds} s`)), this.limits.timeoutMs);
      worker.on('message', onMessage);
      worker.on('error', onError);
      worker.on('exit', onExit);
      signal.addEventListener('abort', onAbort, { once: true });
      worker.ref();
      worker.postMessage(job);
    });
  }

  /** Ends every worker, those converting too (their pages are answered as not shown). */
  async close(): Promise<void> {
    this.closed = true;
    this.idle.splice(0);
    await Promise.all([...this.all].map((worker) => worker.terminate()));
  }

  private acquire(signal: AbortSignal): Promise<Worker> {
    if (this.closed) return Promise.reject(new Error('the HTML converter is closed'));
    const idle = this.idle.pop();
    if (idle) return Promise.resolve(idle);
    if (this.started < MAX_WORKERS) return Promise.resolve(this.start());
    return new Promise((resolve, reject) => {
      const take = (worker: Worker) => {
        signal.removeEventListener('abort', onAbort);
        resolve(worker);
      };
      const onAbort = () => {
        this.waiting.splice(this.waiting.indexOf(take), 1);
        reject(new Error('interrupted: the run was stopped'));
      };
      this.waiting.push(take);
      signal.addEventListener('abort', onAbort, { once: true });
    });
  }

  private release(worker: Worker): void {
    const next = this.waiting.shift();
    if (next) return next(worker);
    if (this.closed) {
      void worker.terminate();
      this.started--;
      return;
    }
    worker.unref();
    this.idle.push(worker);
  }

  /** A worker past its time, out of memory or stopped: ended, and a new one for whoever waits. */
  private discard(worker: Worker): void {
    void worker.terminate();
    this.started--;
    const next = this.waiting.shift();
    if (next) next(this.start());
  }

  private start(): Worker {
    this.started++;
    // Node's worker threads load with the first page, not at every start of a server that may never fetch one.
    const { Worker } = process.getBuiltinModule('node:worker_threads');
    const worker = new Worker(workerSource(), {
      eval: true,
      // Nothing of the server's environment (its keys) in the worker.
      env: {},
      resourceLimits: { maxOldGenerationSizeMb: WORKER_HEAP_MB },
    });
    // An 'error' with no conversion listening (a worker that failed while idle) is not the server's crash.
    worker.on('error', () => undefined);
    this.all.add(worker);
    worker.once('exit', () => {
      this.all.delete(worker);
      // One that ended while idle is not handed out again.
      const index = this.idle.indexOf(worker);
      if (index === -1) return;
      this.idle.splice(index, 1);
      this.started--;
    });
    worker.unref();
    return worker;
  }
}

function notShown(reason: string): ConvertedPage {
  return { markdown: '', title: null, cut: `${reason}, so none of it is shown; a smaller max_bytes converts less` };
}

let source: string | undefined;

/**
 * The worker's program as text: from the single executable's assets there, else htmlWorkerMain's
 * own text, given turndown and domino as Node resolves them from this module.
 */
function workerSource(): string {
  if (source !== undefined) return source;
  if (isSea()) return (source = getAsset(HTML_WORKER_ASSET, 'utf8'));
  const turndown = createRequire(import.meta.url).resolve('turndown');
  const load = `require('node:module').createRequire(${JSON.stringify(turndown)})`;
  return (source = `const load = ${load};\n(${htmlWorkerMain.toString()})(require, () => ({ TurndownService: load(${JSON.stringify(turndown)}), domino: load('@mixmark-io/domino') }));\n`);
}
