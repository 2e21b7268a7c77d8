// node log-flush-child.mjs <flush ms> <how it ends: exit | throw | kill-after-warn | kill>
// Logs request-like lines at info through the server's logger (built code, standard output),
// and a request line (kept as its fields until written out), with the flush window given, then
// ends as told.
import { createLogger } from '../../dist/logger.js';
import { requestLineWriter } from '../../dist/perf/request-log-line.js';

const [flushMs, end] = process.argv.slice(2);
const logger = createLogger({ level: 'info', flushMs: Number(flushMs) });
for (let i = 0; i < 3; i++) logger.info({ n: i }, 'request completed');
requestLineWriter(logger)({ reqId: 'r3', conversationId: undefined, method: 'GET', url: '/alive', route: '/alive', status: 200, ms: 0.1, ip: '127.0.0.1' });
if (end === 'throw') throw new Error('boom');
if (end === 'kill-after-warn') {
  logger.warn('disk almost full');
  setImmediate(() => process.kill(process.pid, 'SIGKILL'));
}
if (end === 'kill') setImmediate(() => process.kill(process.pid, 'SIGKILL'));
// 'exit': nothing keeps the process alive (the flush window's timer does not), so it ends here.
