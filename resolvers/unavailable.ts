// Whether an error means a dependency (PostgreSQL, Redis) is unreachable rather than that the work
// itself is wrong: requests answer SERVICE_UNAVAILABLE (server/faults.ts) and background jobs retry
// instead of failing the session.
// Prisma's connection-level codes: cannot reach / timed out / closed / pool exhausted / could not
// start a transaction in time / too many connections.
const PRISMA_UNAVAILABLE = new Set(['P1001', 'P1002', 'P1008', 'P1017', 'P2024', 'P2028', 'P2037']);
// Driver adapter error kinds (Prisma 7) that mean the database is not answering.
const ADAPTER_UNAVAILABLE = new Set([
  'DatabaseNotReachable',
  'DatabaseDoesNotExist',
  'ConnectionClosed',
  'SocketTimeout',
  'TooManyConnections',
  'TransactionStartTimeout',
]);
// PostgreSQL SQLSTATEs: connection exceptions (08xxx), shutdown/starting up (57P01–57P03).
const PG_UNAVAILABLE = /^(08...|57P0[123]|53300)$/;
const NODE_UNAVAILABLE = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ETIMEDOUT',
  'EPIPE',
  'ENOTFOUND',
  'EHOSTUNREACH',
]);
const MESSAGE_UNAVAILABLE =
  /Connection terminated|timeout exceeded when trying to connect|Connection is closed|Stream isn't writeable|Reached the max retries per request|Client has encountered a connection error|Can't reach database server|the database system is (shutting down|starting up)|terminating connection due to administrator command/i;

/** True when error (or anything in its cause chain) says PostgreSQL or Redis is unreachable. */
export function isUnavailable(error: unknown): boolean {
  const seen = new Set<unknown>();
  let current: unknown = error;
  while (current && typeof current === 'object' && !seen.has(current)) {
    seen.add(current);
    const e = current as {
      code?: unknown;
      name?: unknown;
      message?: unknown;
      kind?: unknown;
      originalCode?: unknown;
      cause?: unknown;
      originalError?: unknown;
      meta?: { driverAdapterError?: unknown };
    };
    if (typeof e.code === 'string') {
      if (PRISMA_UNAVAILABLE.has(e.code) || NODE_UNAVAILABLE.has(e.code) || PG_UNAVAILABLE.test(e.code))
        return true;
    }
    if (typeof e.originalCode === 'string' && PG_UNAVAILABLE.test(e.originalCode)) return true;
    if (typeof e.kind === 'string' && ADAPTER_UNAVAILABLE.has(e.kind)) return true;
    if (e.name === 'MaxRetriesPerRequestError') return true;
    if (typeof e.message === 'string' && MESSAGE_UNAVAILABLE.test(e.message)) return true;
    // Prisma 7 reports a driver adapter's error of a raw query in meta (P2010), not as its cause.
    current = e.cause ?? e.originalError ?? e.meta?.driverAdapterError;
  }
  return false;
}
