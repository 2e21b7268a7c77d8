/**
 * P5's baseline: a bare Fastify server with one JSON route (`GET /bare`), no plugins, no hooks,
 * no logger, in its own process like the agentd it is compared with. `--port N`.
 */
import Fastify from 'fastify';
import { parseArgs } from 'node:util';

const { values } = parseArgs({ options: { port: { type: 'string' } } });
const app = Fastify({ logger: false });
app.get('/bare', async () => ({ status: 'ok' }));
await app.listen({ host: '127.0.0.1', port: Number(values.port ?? 0) });
process.on('SIGTERM', () => void app.close().then(() => process.exit(0)));
