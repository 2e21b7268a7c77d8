import fs from 'node:fs';
import net from 'node:net';

/** Ports each vitest worker takes its own from: worker N (VITEST_POOL_ID) has the Nth block. */
const FIRST_PORT = 20_000;
const BLOCK = 1_000;

/** The next port to try in this worker's block (it starts somewhere in the block: a rerun does not retrace the last one's steps). */
let next = Math.floor(Math.random() * BLOCK);

/**
 * A loopback port nobody listens on right now, for a server that binds it a moment later (a
 * spawned server, a second or so after) and again after a restart.
 *
 * Under vitest the port is never one the kernel hands out by itself. Outgoing connections and
 * `listen(0)` take ports from the ephemeral range (32768-60999 by default). One of them once took a
 * port between this check and the spawned server's bind, and the server failed with EADDRINUSE.
 * So each worker takes ports in turn from a block of its own below that range: two workers never
 * pick the same one. Each port is checked free by binding it. Outside vitest (benchmarks,
 * scripts), the OS picks the port, as before.
 */
export async function freePort(): Promise<number> {
  const worker = Number(process.env.VITEST_POOL_ID);
  if (!Number.isInteger(worker) || worker < 1) return bound(0);
  const first = FIRST_PORT + (worker - 1) * BLOCK;
  if (first + BLOCK > ephemeralLow()) throw new Error(`vitest worker ${worker}: its ports ${first}-${first + BLOCK - 1} would reach the ephemeral range`);
  for (let tries = 0; tries < BLOCK; tries++) {
    const port = first + (next++ % BLOCK);
    try {
      return await bound(port);
    } catch {
      // in use (a server of an earlier test still up): the next one
    }
  }
  throw new Error(`vitest worker ${worker}: no free port in ${first}-${first + BLOCK - 1}`);
}

/** Binds the port (0: one the OS picks) on loopback and lets it go again; its number. */
function bound(port: number): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once('error', reject);
    server.listen(port, '127.0.0.1', () => {
      const { port: taken } = server.address() as net.AddressInfo;
      server.close(() => resolve(taken));
    });
  });
}

/** The lowest port of the kernel's ephemeral range (Linux; 32768 elsewhere). */
function ephemeralLow(): number {
  try {
    return Number(fs.readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/)[0]) || 32_768;
  } catch {
    return 32_768;
  }
}
