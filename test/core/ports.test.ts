// The port picker both the control plane and the daemon use for listeners another process binds
// later (contract/ports.ts): below the kernel's ephemeral range, never one in use, never the same
// one twice in a row from one process.
import { readFileSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import { afterEach, describe, expect, test, vi } from 'vitest';
import { freePort } from '../../contract/ports';

const ephemeralStart = Number(
  readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/)[0],
);

function listen(port: number): Promise<Server> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(port, '127.0.0.1', () => resolve(server));
  });
}

afterEach(() => {
  vi.restoreAllMocks();
});

describe('freePort', () => {
  test('hands out distinct ports below the ephemeral range that a listener can bind', async () => {
    const ports: number[] = [];
    for (let i = 0; i < 50; i++) ports.push(await freePort());
    expect(new Set(ports).size).toBe(50);
    for (const port of ports) {
      expect(port).toBeGreaterThanOrEqual(10_000);
      expect(port).toBeLessThan(ephemeralStart);
    }
    const server = await listen(ports[0]!);
    expect((server.address() as { port: number }).port).toBe(ports[0]);
    await new Promise((resolve) => server.close(resolve));
  });

  test('skips a port something already listens on', async () => {
    // A listener this test binds itself, so the picker has not handed its port out before.
    let server: Server | undefined;
    let taken = 20_000 + Math.floor(Math.random() * 5_000);
    while (!server) {
      server = await listen(taken).catch(() => undefined);
      if (!server) taken++;
    }
    try {
      // The first candidate drawn is the taken port; the picker probes it, fails, and draws again.
      const span = ephemeralStart - 1 - 10_000 + 1;
      const draws = [(taken - 10_000 + 0.5) / span];
      // Later draws are random again: a fixed one would name the same port every time, and when
      // another process listens there the picker would run out of attempts.
      const real = Math.random.bind(Math);
      const random = vi.spyOn(Math, 'random').mockImplementation(() => draws.shift() ?? real());
      const port = await freePort();
      expect(random.mock.calls.length).toBeGreaterThanOrEqual(2);
      expect(port).not.toBe(taken);
      expect(port).toBeLessThan(ephemeralStart);
    } finally {
      await new Promise((resolve) => server?.close(resolve));
    }
  });
});
