/**
 * Whether anything listens at an instance's address: a TCP connection that is refused means no
 * process does (it died, or was never there); one that opens, or does not answer within the
 * time allowed, means a process may still be there (a stopped or overloaded one keeps
 * accepting connections: the kernel queues them), so it is not dead yet.
 */
import net from 'node:net';

export function addressRefuses(url: string, timeoutMs = 1000): Promise<boolean> {
  let target: URL;
  try {
    target = new URL(url);
  } catch {
    return Promise.resolve(false);
  }
  const port = Number(target.port || (target.protocol === 'https:' ? 443 : 80));
  const host = target.hostname.replace(/^\[|\]$/g, '');
  return new Promise((resolve) => {
    const socket = net.connect({ host, port });
    const done = (refused: boolean) => {
      socket.destroy();
      resolve(refused);
    };
    socket.setTimeout(timeoutMs, () => done(false));
    socket.once('connect', () => done(false));
    socket.once('error', (error: NodeJS.ErrnoException) => done(error.code === 'ECONNREFUSED'));
  });
}

/** Whether a failed request to an instance failed because nothing listened there. */
export function isRefused(error: unknown): boolean {
  for (let cause = error as { code?: unknown; cause?: unknown } | undefined, depth = 0; cause && depth < 5; cause = cause.cause as typeof cause, depth++) {
    if (cause.code === 'ECONNREFUSED') return true;
  }
  return false;
}
