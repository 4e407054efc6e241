// Picking a TCP port on 127.0.0.1 for a listener another process binds later: the sandbox's
// service port (the control plane picks it, the daemon binds it) and OpenCode's port (the daemon or
// the LOCAL provider picks it, OpenCode binds it). Both sides use this one picker.
//
// Ports come from below the kernel's ephemeral range. A port the kernel hands out for listen(0) is
// one it also hands to outgoing connections, so once the probe released it, any connect() on the
// host (to PostgreSQL, Redis, a provider) could take it before the listener bound it: EADDRINUSE
// at the listener's start, seen on busy hosts. Below the range only explicit binds compete; a
// port handed out is not handed out again by this process for a while, and each candidate is
// probed before it is returned.
import { readFileSync } from 'node:fs';
import { createServer } from 'node:net';

/** Lowest port picked. */
const LOWEST = 10_000;
/** A picked port is not picked again by this process within this window (its listener may still be starting). */
const REUSE_AFTER_MS = 120_000;
const ATTEMPTS = 64;

const handedOut = new Map<number, number>();
let firstEphemeral: number | undefined;

function ephemeralStart(): number {
  if (firstEphemeral === undefined) {
    try {
      const [low] = readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/);
      firstEphemeral = Number(low) || 32_768;
    } catch {
      firstEphemeral = 32_768;
    }
  }
  return firstEphemeral;
}

function probe(port: number): Promise<number | null> {
  return new Promise((resolve) => {
    const server = createServer();
    server.unref();
    server.once('error', () => resolve(null));
    server.listen(port, '127.0.0.1', () => {
      const address = server.address();
      const bound = typeof address === 'object' && address ? address.port : null;
      server.close(() => resolve(bound));
    });
  });
}

/** A TCP port on 127.0.0.1 that nothing listens on now and that outgoing connections do not draw from. */
export async function freePort(): Promise<number> {
  const now = Date.now();
  for (const [port, at] of handedOut) if (now - at > REUSE_AFTER_MS) handedOut.delete(port);
  const highest = ephemeralStart() - 1;
  if (highest - LOWEST >= 1_000) {
    for (let i = 0; i < ATTEMPTS; i++) {
      const candidate = LOWEST + Math.floor(Math.random() * (highest - LOWEST + 1));
      if (handedOut.has(candidate)) continue;
      if ((await probe(candidate)) === candidate) {
        handedOut.set(candidate, Date.now());
        return candidate;
      }
    }
  }
  // A host whose ephemeral range leaves no room below it: let the kernel choose.
  const port = await probe(0);
  if (port === null) throw new Error('no free TCP port on 127.0.0.1');
  return port;
}

/**
 * The one answer to a preview or share request for a port it cannot reach (R-PRV-5): nothing of the
 * sandbox serves it, or it is the daemon's, OpenCode's or another port never proxied. The daemon and
 * the control plane answer these alike (same status, same body), so a refused port cannot be told
 * from an unused one by scanning.
 */
export const UNREACHABLE_PORT_STATUS = 502;
export const UNREACHABLE_PORT_MESSAGE =
  'Nothing in this sandbox serves that port. Start the app on a port of its own and open its preview again.';
