// Advisory locks that last exactly as long as this process: held on one PostgreSQL connection of
// their own, so the server drops them when the process dies (after kill -9 the kernel closes its
// socket and the backend ends at once). The job queue marks the jobs this process owns with them
// (resolvers/jobs/queue.ts), and any other process sees at once that their owner is gone.
//
// The connection is opened again whenever it drops (a PostgreSQL restart, a terminated backend),
// every 250 ms until it is back, and retakes every lock still held; the job queue allows for the
// moments in between (it acts on a missing lock only when it stays missing).
import pg from 'pg';
import { PROCESS_LOCK_SPACE, type ProcessLocks } from '../resolvers/platform';

const LOCK = `SELECT k, pg_try_advisory_lock(${PROCESS_LOCK_SPACE}, hashtext(k)) AS ok FROM unnest($1::text[]) k`;
const UNLOCK = `SELECT pg_advisory_unlock(${PROCESS_LOCK_SPACE}, hashtext(k)) FROM unnest($1::text[]) k`;
const RECONNECT_MS = 250;

export function createProcessLocks(url: string, connectTimeoutMs: number): ProcessLocks {
  /** Keys held and how many times each was locked. */
  const held = new Map<string, number>();
  /** Keys locked on the current connection (once each, whatever `held` counts). */
  const locked = new Set<string>();
  let client: pg.Client | null = null;
  let connecting: Promise<pg.Client> | null = null;
  let retry: NodeJS.Timeout | null = null;
  let closed = false;
  /** One statement at a time on the connection (pg deprecates overlapping ones). */
  let queue: Promise<unknown> = Promise.resolve();
  const query = <T extends pg.QueryResultRow>(c: pg.Client, text: string, values: unknown[]) => {
    const next = queue.then(() => c.query<T>(text, values));
    queue = next.catch(() => {});
    return next;
  };

  /**
   * Locks the held keys the connection does not hold yet; returns those another process holds
   * (still wanted: the next call tries them again).
   */
  async function lockHeld(c: pg.Client): Promise<string[]> {
    const missing = [...held.keys()].filter((k) => !locked.has(k));
    if (missing.length === 0) return [];
    for (const k of missing) locked.add(k);
    try {
      const { rows } = await query<{ k: string; ok: boolean }>(c, LOCK, [missing]);
      const busy = rows.filter((r) => !r.ok).map((r) => r.k);
      for (const k of busy) locked.delete(k);
      return busy;
    } catch (error) {
      for (const k of missing) locked.delete(k);
      throw error;
    }
  }

  function reconnectLater(): void {
    if (closed || held.size === 0 || retry) return;
    retry = setTimeout(() => {
      retry = null;
      if (!client) connect().catch(reconnectLater);
    }, RECONNECT_MS);
    retry.unref();
  }

  function dropped(c: pg.Client): void {
    if (client !== c) return;
    client = null;
    locked.clear();
    c.end().catch(() => {});
    // Locks still held must come back as soon as PostgreSQL answers again.
    reconnectLater();
  }

  function connect(): Promise<pg.Client> {
    if (client) return Promise.resolve(client);
    connecting ??= (async () => {
      const c = new pg.Client({
        connectionString: url,
        connectionTimeoutMillis: connectTimeoutMs,
        keepAlive: true,
        application_name: 'singulacomp process locks',
      });
      c.on('error', () => dropped(c));
      c.on('end', () => dropped(c));
      try {
        await c.connect();
        client = c;
        locked.clear();
        await lockHeld(c);
        return c;
      } catch (error) {
        if (client === c) client = null;
        c.end().catch(() => {});
        throw error;
      } finally {
        connecting = null;
      }
    })();
    return connecting;
  }

  function forget(keys: string[]): string[] {
    const gone: string[] = [];
    for (const k of keys) {
      const n = (held.get(k) ?? 0) - 1;
      if (n > 0) held.set(k, n);
      else if (held.delete(k)) gone.push(k);
    }
    return gone;
  }

  return {
    shared: true,
    async lock(keys) {
      for (const k of keys) held.set(k, (held.get(k) ?? 0) + 1);
      try {
        await lockHeld(await connect());
      } catch (error) {
        forget(keys);
        throw error;
      }
      return keys.filter((k) => !locked.has(k));
    },
    async retry(keys) {
      await lockHeld(await connect());
      return keys.filter((k) => held.has(k) && !locked.has(k));
    },
    async unlock(keys) {
      const gone = forget(keys).filter((k) => locked.delete(k));
      // Without a connection there is nothing to release: it is retaken without these.
      if (gone.length > 0 && client) await query(client, UNLOCK, [gone]).catch(() => {});
    },
    async exclusive(key, fn) {
      const c = await connect();
      const { rows } = await query<{ ok: boolean }>(
        c,
        `SELECT pg_try_advisory_lock(${PROCESS_LOCK_SPACE}, hashtext($1)) AS ok`,
        [key],
      );
      if (!rows[0]?.ok) return null;
      try {
        return await fn();
      } finally {
        await query(c, `SELECT pg_advisory_unlock(${PROCESS_LOCK_SPACE}, hashtext($1))`, [key]).catch(
          () => {},
        );
      }
    },
    async close() {
      closed = true;
      if (retry) clearTimeout(retry);
      held.clear();
      locked.clear();
      const c = client;
      client = null;
      await c?.end().catch(() => {});
    },
  };
}

/** The embedded engine is one process: its locks need no database. */
export function inProcessLocks(): ProcessLocks {
  return {
    shared: false,
    async lock() {
      return [];
    },
    async retry() {
      return [];
    },
    async unlock() {},
    exclusive: (_key, fn) => fn(),
    async close() {},
  };
}
