/** A minimal SSE reader over fetch, for tests: parses `id`, `event`, `data` and comments. */
export interface SseMessage {
  id?: string;
  event: string;
  data: string;
}

export interface SseConnection {
  messages: SseMessage[];
  comments: string[];
  status: number;
  headers: Headers;
  /** Resolves when at least `n` messages matching the filter arrived (rejects after timeoutMs). */
  waitFor(predicate: (messages: SseMessage[]) => boolean, timeoutMs?: number): Promise<void>;
  close(): void;
  /** Resolves when the server ended the stream. */
  ended: Promise<void>;
}

export async function connectSse(url: string, headers: Record<string, string> = {}): Promise<SseConnection> {
  const controller = new AbortController();
  const response = await fetch(url, { headers: { accept: 'text/event-stream', ...headers }, signal: controller.signal });
  const messages: SseMessage[] = [];
  const comments: string[] = [];
  const waiters = new Set<() => void>();
  const notify = () => {
    for (const waiter of [...waiters]) waiter();
  };
  const ended = (async () => {
    if (!response.body) return;
    const decoder = new TextDecoder();
    let buffer = '';
    let current: Partial<SseMessage> & { data?: string } = {};
    try {
      for await (const chunk of response.body as unknown as AsyncIterable<Uint8Array>) {
        buffer += decoder.decode(chunk, { stream: true });
        let newline: number;
        while ((newline = buffer.indexOf('\n')) >= 0) {
          const line = buffer.slice(0, newline).replace(/\r$/, '');
          buffer = buffer.slice(newline + 1);
          if (line === '') {
            if (current.data !== undefined) {
              messages.push({ event: current.event ?? 'message', data: current.data, ...(current.id !== undefined ? { id: current.id } : {}) });
              notify();
            }
            current = {};
          } else if (line.startsWith(':')) comments.push(line.slice(1).trim());
          else {
            const colon = line.indexOf(':');
            const field = colon === -1 ? line : line.slice(0, colon);
            const value = colon === -1 ? '' : line.slice(colon + 1).replace(/^ /, '');
            if (field === 'data') current.data = current.data === undefined ? value : `${current.data}\n${value}`;
            else if (field === 'id') current.id = value;
            else if (field === 'event') current.event = value;
          }
        }
      }
    } catch {
      // aborted
    } finally {
      notify();
    }
  })();
  let finished = false;
  void ended.then(() => {
    finished = true;
    notify();
  });
  return {
    messages,
    comments,
    status: response.status,
    headers: response.headers,
    ended,
    close: () => controller.abort(),
    waitFor(predicate, timeoutMs = 10_000) {
      return new Promise<void>((resolve, reject) => {
        const check = () => {
          if (predicate(messages)) {
            waiters.delete(check);
            clearTimeout(timer);
            resolve();
          } else if (finished) {
            waiters.delete(check);
            clearTimeout(timer);
            reject(new Error(`stream ended before the condition held (${messages.length} messages)`));
          }
        };
        const timer = setTimeout(() => {
          waiters.delete(check);
          reject(new Error(`timed out waiting on the stream (${messages.length} messages; the last: ${describeTail(messages)})`));
        }, timeoutMs);
        waiters.add(check);
        check();
      });
    },
  };
}

/** The last few messages as `id:event`, for a timeout's message: which one the stream stopped after. */
function describeTail(messages: SseMessage[]): string {
  return messages.slice(-8).map((message) => `${message.id ?? '-'}:${message.event}`).join(' ') || 'none';
}
