// Database access: one Prisma client over either real PostgreSQL (@prisma/adapter-pg) or the
// embedded PGlite (R-RUN-1), plus a raw SQL handle for migrations and advisory locks.
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { PGlite } from '@electric-sql/pglite';
import { PrismaPg } from '@prisma/adapter-pg';
import pg from 'pg';
import { PrismaPGlite } from 'pglite-prisma-adapter';
import { PrismaClient } from '../prisma/generated/client/client';
import type { Database, RawSql } from '../resolvers/platform';
import { currentRequestId } from './faults';
import { statementNames } from './fast-paths/statement-names';
import { createProcessLocks, inProcessLocks } from './process-locks';

export type { Database, Db, RawSql } from '../resolvers/platform';

type AnyFn = (...args: unknown[]) => unknown;

/** Counts one statement sent, and logs it with its request while the log is on. */
function countStatement(stats: Database['stats'], sql: string): void {
  stats.statements++;
  stats.log?.push({ sql, requestId: currentRequestId() });
}

/** Wraps a driver adapter factory so every statement Prisma sends is counted (and optionally logged). */
function counting<F extends object>(factory: F, stats: Database['stats']): F {
  const countQueries = (target: object): object =>
    new Proxy(target, {
      get(t, prop, receiver) {
        const value = Reflect.get(t, prop, receiver) as unknown;
        if (typeof value !== 'function') return value;
        if (prop === 'queryRaw' || prop === 'executeRaw') {
          return (query: { sql: string }, ...rest: unknown[]) => {
            countStatement(stats, query.sql);
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

/** Counts (and optionally logs) the statements sent through a raw handle's query, as Prisma's are. */
function countingRaw(raw: RawSql, stats: Database['stats']): RawSql {
  return {
    ...raw,
    query(sql, params, options) {
      countStatement(stats, sql);
      return raw.query(sql, params, options);
    },
    queryArrays(sql, params) {
      countStatement(stats, sql);
      return raw.queryArrays(sql, params);
    },
  };
}

/** PostgreSQL's SQLSTATE for a connection refused by max_connections or a role or database limit. */
const TOO_MANY_CONNECTIONS = '53300';

type CheckoutCallback = (
  error: Error | undefined,
  client: pg.PoolClient | undefined,
  done: () => void,
) => void;

/**
 * A pool whose checkout waits while PostgreSQL refuses a new connection for too many clients: it
 * takes one of the pool's own connections as soon as one is released, or a new one once the server
 * has room, until `connectionTimeoutMillis` has passed. pg fails such a checkout at once, and a
 * request answered an internal error although a connection was free a moment later. pg.Pool's
 * `query` checks out through `connect`, so both Prisma's statements and its transactions wait.
 */
class PatientPool extends pg.Pool {
  private readonly waitMs: number;

  constructor(config: pg.PoolConfig & { connectionTimeoutMillis: number }) {
    super(config);
    this.waitMs = config.connectionTimeoutMillis;
    // A connection that fails while checked out (the server restarts, or ends it between two
    // statements) emits 'error' on its client, and pg-pool listens only while a client is idle:
    // unheard, the error is an uncaught exception that ends the process. Heard, the client's next
    // statement fails and the pool drops it when it comes back.
    this.on('connect', (client) => client.on('error', () => {}));
  }

  override connect(): Promise<pg.PoolClient>;
  override connect(callback: CheckoutCallback): void;
  override connect(callback?: CheckoutCallback): Promise<pg.PoolClient> | undefined {
    const checkout = this.checkout();
    if (!callback) return checkout;
    checkout.then(
      (client) => callback(undefined, client, () => client.release()),
      (error: Error) => callback(error, undefined, () => {}),
    );
    return undefined;
  }

  private async checkout(): Promise<pg.PoolClient> {
    const deadline = Date.now() + this.waitMs;
    for (let pauseMs = 10; ; pauseMs = Math.min(pauseMs * 2, 250)) {
      try {
        return await super.connect();
      } catch (error) {
        const code = (error as { code?: unknown }).code;
        if (code !== TOO_MANY_CONNECTIONS || Date.now() + pauseMs >= deadline) throw error;
        await sleep(pauseMs);
      }
    }
  }
}

export interface DatabaseOptions {
  /** PostgreSQL connection string; null selects the embedded PGlite under dataDir. */
  url: string | null;
  dataDir: string;
  /** @default 20 */
  poolSize?: number;
  /** A new connection that takes longer fails (the request answers SERVICE_UNAVAILABLE). @default 10_000 */
  connectTimeoutMs?: number;
  /**
   * Prisma's statements and the generated list reads are prepared once per connection under a
   * name (server/fast-paths/statement-names.ts); off, they run unnamed, as PrismaPg sends them.
   * @default true
   */
  namedStatements?: boolean;
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
    async queryArrays(sql, params) {
      return (await lite.query<unknown[]>(sql, params as unknown[], { rowMode: 'array' })).rows;
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
  const stats: Database['stats'] = { statements: 0, jobStatements: 0, log: null };
  if (options.url) {
    const pool = new PatientPool({
      connectionString: options.url,
      max: options.poolSize ?? 20,
      // pg waits forever by default: during an outage every request would hang instead of failing
      // fast with a retryable answer.
      connectionTimeoutMillis: options.connectTimeoutMs ?? 10_000,
    });
    // The job queue's (pg-boss): small, and apart, so polling never waits behind a request burst.
    const jobPool = new PatientPool({
      connectionString: options.url,
      max: 4,
      connectionTimeoutMillis: options.connectTimeoutMs ?? 10_000,
    });
    // A dropped idle connection must not crash the process; pg reports it here.
    pool.on('error', () => {});
    jobPool.on('error', () => {});
    const named = options.namedStatements ?? true;
    const rowsName = named ? statementNames('rows') : () => undefined;
    // PrismaPg's type asks for a name; pg runs a query without one as an unnamed statement
    // (parsed and planned each time), which is what a text past the bound gets.
    const prismaName = statementNames('prisma') as (query: { sql: string }) => string;
    const prisma = new PrismaClient({
      adapter: counting(
        new PrismaPg(pool, named ? { statementNameGenerator: prismaName } : undefined),
        stats,
      ),
    });
    const uncounted: RawSql = {
      async exec(sql) {
        await pool.query(sql);
      },
      async query(sql, params, options) {
        const values = params as unknown[] | undefined;
        if (options?.prepared) return (await pool.query({ name: options.prepared, text: sql, values })).rows;
        return (await pool.query(sql, values)).rows;
      },
      async queryArrays(sql, params) {
        const values = params as unknown[] | undefined;
        return (await pool.query({ name: rowsName({ sql }), text: sql, values, rowMode: 'array' })).rows;
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
    const raw = countingRaw(uncounted, stats);
    const processLocks = createProcessLocks(options.url, options.connectTimeoutMs ?? 10_000);
    return {
      prisma,
      raw,
      kind: 'postgres',
      url: options.url,
      pglite: null,
      jobSql: {
        executeSql: (text, values) => {
          stats.jobStatements++;
          return jobPool.query(text, values);
        },
      },
      processLocks,
      stats,
      async close() {
        await processLocks.close();
        await prisma.$disconnect();
        await Promise.all([pool.end(), jobPool.end()]);
      },
    };
  }

  const dir = join(options.dataDir, 'pglite');
  mkdirSync(dir, { recursive: true });
  const lite = await PGlite.create(dir);
  const prisma = new PrismaClient({ adapter: counting(new PrismaPGlite(lite), stats) });
  const raw = countingRaw(pgliteRawSql(lite), stats);
  return {
    prisma,
    raw,
    kind: 'pglite',
    url: null,
    pglite: lite,
    jobSql: null,
    processLocks: inProcessLocks(),
    stats,
    async close() {
      await prisma.$disconnect();
      await lite.close();
    },
  };
}
