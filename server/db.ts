// Database access: one Prisma client over either real PostgreSQL (@prisma/adapter-pg) or the
// embedded PGlite (R-RUN-1), plus a raw SQL handle for migrations and advisory locks.
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { PGlite } from '@electric-sql/pglite';
import { PrismaPg } from '@prisma/adapter-pg';
import pg from 'pg';
import { PrismaPGlite } from 'pglite-prisma-adapter';
import { PrismaClient } from '../prisma/generated/client/client';
import type { Database, RawSql } from '../resolvers/platform';
import { currentRequestId } from './faults';

export type { Database, Db, RawSql } from '../resolvers/platform';

type AnyFn = (...args: unknown[]) => unknown;

/** Wraps a driver adapter factory so every statement Prisma sends is counted (and optionally logged). */
function counting<F extends object>(factory: F, stats: Database['stats']): F {
  const countQueries = (target: object): object =>
    new Proxy(target, {
      get(t, prop, receiver) {
        const value = Reflect.get(t, prop, receiver) as unknown;
        if (typeof value !== 'function') return value;
        if (prop === 'queryRaw' || prop === 'executeRaw') {
          return (query: { sql: string }, ...rest: unknown[]) => {
            stats.statements++;
            stats.log?.push({ sql: query.sql, requestId: currentRequestId() });
            return (value as AnyFn).call(t, query, ...rest);
          };
        }
        if (prop === 'startTransaction') {
          return async (...args: unknown[]) =>
            countQueries((await (value as AnyFn).apply(t, args)) as object);
        }
        return (value as AnyFn).bind(t);
      },
    });
  return new Proxy(factory, {
    get(t, prop, receiver) {
      const value = Reflect.get(t, prop, receiver) as unknown;
      if (prop === 'connect' && typeof value === 'function') {
        return async () => countQueries((await (value as AnyFn).call(t)) as object);
      }
      return typeof value === 'function' ? (value as AnyFn).bind(t) : value;
    },
  });
}

export interface DatabaseOptions {
  /** PostgreSQL connection string; null selects the embedded PGlite under dataDir. */
  url: string | null;
  dataDir: string;
  /** @default 20 */
  poolSize?: number;
  /** A new connection that takes longer fails (the request answers SERVICE_UNAVAILABLE). @default 10_000 */
  connectTimeoutMs?: number;
}

/** Raw SQL over one PGlite instance. PGlite is one connection in this process: an in-process queue is the lock. */
export function pgliteRawSql(lite: PGlite): RawSql {
  let chain: Promise<unknown> = Promise.resolve();
  return {
    async exec(sql) {
      await lite.exec(sql);
    },
    async query(sql, params) {
      return (await lite.query(sql, params as unknown[])).rows as never[];
    },
    withLock(_key, fn) {
      const run = chain.then(fn, fn);
      chain = run.catch(() => {});
      return run;
    },
    async close() {},
  };
}

export async function openDatabase(options: DatabaseOptions): Promise<Database> {
  const stats: Database['stats'] = { statements: 0, log: null };
  if (options.url) {
    const pool = new pg.Pool({
      connectionString: options.url,
      max: options.poolSize ?? 20,
      // pg waits forever by default: during an outage every request would hang instead of failing
      // fast with a retryable answer.
      connectionTimeoutMillis: options.connectTimeoutMs ?? 10_000,
    });
    // A dropped idle connection must not crash the process; pg reports it here.
    pool.on('error', () => {});
    const prisma = new PrismaClient({ adapter: counting(new PrismaPg(pool), stats) });
    const raw: RawSql = {
      async exec(sql) {
        await pool.query(sql);
      },
      async query(sql, params) {
        return (await pool.query(sql, params as unknown[])).rows;
      },
      async withLock(key, fn) {
        const client = await pool.connect();
        try {
          await client.query('SELECT pg_advisory_lock($1)', [key.toString()]);
          try {
            return await fn();
          } finally {
            await client.query('SELECT pg_advisory_unlock($1)', [key.toString()]);
          }
        } finally {
          client.release();
        }
      },
      async close() {},
    };
    return {
      prisma,
      raw,
      kind: 'postgres',
      url: options.url,
      pglite: null,
      stats,
      async close() {
        await prisma.$disconnect();
        await pool.end();
      },
    };
  }

  const dir = join(options.dataDir, 'pglite');
  mkdirSync(dir, { recursive: true });
  const lite = await PGlite.create(dir);
  const prisma = new PrismaClient({ adapter: counting(new PrismaPGlite(lite), stats) });
  const raw = pgliteRawSql(lite);
  return {
    prisma,
    raw,
    kind: 'pglite',
    url: null,
    pglite: lite,
    stats,
    async close() {
      await prisma.$disconnect();
      await lite.close();
    },
  };
}
