import fs from 'node:fs';
import net from 'node:net';
import { describe, expect, it } from 'vitest';
import { freePort } from '../support/free-port.js';

/** The kernel's ephemeral range: where outgoing connections and listen(0) take their ports. */
function ephemeralRange(): [number, number] {
  const [low, high] = fs.readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/).map(Number);
  return [low!, high!];
}

describe.skipIf(!fs.existsSync('/proc/sys/net/ipv4/ip_local_port_range'))('freePort, for servers spawned on a port chosen beforehand', () => {
  it("gives ports outside the kernel's ephemeral range, in this worker's own block, a different one each time", async () => {
    const [low, high] = ephemeralRange();
    const worker = Number(process.env.VITEST_POOL_ID);
    const ports = [await freePort(), await freePort(), await freePort()];
    expect(new Set(ports).size).toBe(3);
    for (const port of ports) {
      expect(port < low || port > high).toBe(true);
      expect(Math.floor((port - 20_000) / 1_000)).toBe(worker - 1);
    }
  });

  it('skips a port of its block that something listens on', async () => {
    const first = await freePort();
    const held: net.Server[] = [];
    try {
      // The ports after `first` in turn, held busy: freePort must pass over them.
      for (let port = first + 1; port <= first + 3; port++) {
        const server = net.createServer();
        const listening = await new Promise<boolean>((resolve) => {
          server.once('error', () => resolve(false));
          server.listen(port, '127.0.0.1', () => resolve(true));
        });
        if (listening) held.push(server);
      }
      const busy = new Set(held.map((server) => (server.address() as net.AddressInfo).port));
      const next = await freePort();
      expect(busy.has(next)).toBe(false);
      const probe = net.createServer();
      await new Promise<void>((resolve, reject) => {
        probe.once('error', reject);
        probe.listen(next, '127.0.0.1', () => resolve());
      });
      await new Promise<void>((resolve) => probe.close(() => resolve()));
    } finally {
      await Promise.all(held.map((server) => new Promise<void>((resolve) => server.close(() => resolve()))));
    }
  });
});
