// What the domain services need from the platform, as types only: the database handles (opened by
// server/db.ts) and the logger (created by server/logger.ts). Services never import server/.
import type { PGlite } from '@electric-sql/pglite';
import type { Logger } from 'pino';
import type { PrismaClient } from '../prisma/generated/client/client';

export type { Logger };

export type Db = PrismaClient;

/** Minimal raw SQL surface shared by both engines. */
export interface RawSql {
  /** Runs one or more statements with no parameters (migration files). */
  exec(sql: string): Promise<void>;
  /**
   * `prepared` names a constant statement text on a hot path: PostgreSQL parses and plans it once
   * per connection instead of on every call, and the text is not sent again (the embedded engine
   * ignores the name). A name must always go with the same text.
   */
  query<T extends Record<string, unknown>>(
    sql: string,
    params?: unknown[],
    options?: { prepared?: string },
  ): Promise<T[]>;
  /**
   * As `query`, each row an array of its column values in select order (nothing keyed by name). For
   * generated texts (server/fast-paths/find-many-sql.ts): on PostgreSQL each distinct text is
   * prepared once per connection, up to a bound, unless SINGULACOMP_FAST_PATHS turns that off.
   */
  queryArrays(sql: string, params?: unknown[]): Promise<unknown[][]>;
  /** Runs fn while holding a database-wide exclusive lock (PostgreSQL advisory lock). */
  withLock<T>(key: bigint, fn: () => Promise<T>): Promise<T>;
  close(): Promise<void>;
}

export type FilterValue = string | number | boolean;

/** A Prisma findMany by equality filters and an order, as a list service asks for one. */
export interface FindMany {
  /** Equality on scalar fields (the tenancy filter and the list's arguments); undefined: no filter, as in Prisma. */
  where: Record<string, FilterValue | undefined>;
  orderBy: readonly Record<string, 'asc' | 'desc'>[];
  /** What Pothos derived from the GraphQL selection: include or select, take, skip, cursor. */
  query: Record<string, unknown>;
}

/**
 * Reads a findMany of `model` as one SQL statement, its rows shaped as Prisma returns them; null
 * when Prisma must read it. A fast path (server/fast-paths/find-many-sql.ts) that services are
 * given, or not, through their options.
 */
export type FindManySql = (model: string, find: FindMany) => Promise<Record<string, unknown>[]> | null;

export interface Database {
  prisma: PrismaClient;
  raw: RawSql;
  kind: 'postgres' | 'pglite';
  /** PostgreSQL connection string (postgres). */
  url: string | null;
  /**
   * The job queue's own small pool (postgres), which waits like the main one while PostgreSQL is
   * out of connections; closed with the database.
   */
  jobSql: { executeSql(text: string, values?: unknown[]): Promise<{ rows: unknown[] }> } | null;
  /**
   * Advisory locks held for as long as this process lives (postgres; the embedded engine is one
   * process, so its locks live in memory): PostgreSQL drops them the moment the process dies, so
   * another process can tell a job's owner is gone without waiting out a heartbeat.
   */
  processLocks: ProcessLocks;
  /** The embedded engine (pglite): the job queue runs on this very instance. */
  pglite: PGlite | null;
  /**
   * SQL statements sent since start, through Prisma or `raw`'s queries; while `log` is an array,
   * each one is also logged with the request it ran for. Tests and benchmarks pin N+1 behaviour
   * with it. `jobStatements` counts the job queue's own statements apart (on PostgreSQL; pg-boss
   * polls in the background, so they would blur a request's count).
   */
  stats: { statements: number; jobStatements: number; log: LoggedStatement[] | null };
  close(): Promise<void>;
}

/** The first key of every process lock (pg_advisory_lock(int, int)); the second is hashtext(key). */
export const PROCESS_LOCK_SPACE = 1_396_918_863;

export interface ProcessLocks {
  /**
   * Takes each key without waiting; returns those another process holds (still wanted: `retry`
   * tries them again). Counted: lock twice, unlock twice.
   */
  lock(keys: string[]): Promise<string[]>;
  /** Tries again the wanted keys another process held; returns those it still holds. */
  retry(keys: string[]): Promise<string[]>;
  unlock(keys: string[]): Promise<void>;
  /** Runs fn unless another process runs fn for `key` now (then null). */
  exclusive<T>(key: string, fn: () => Promise<T>): Promise<T | null>;
  /** Whether other processes' locks are visible (postgres); false on the single-process embedded engine. */
  shared: boolean;
  close(): Promise<void>;
}

export interface LoggedStatement {
  sql: string;
  /** The request id (x-request-id) it ran for; null outside a request (background loops). */
  requestId: string | null;
}

/** The raw-SQL surface of a Prisma client or of an interactive transaction (event-log appends). */
export interface SqlClient {
  $queryRawUnsafe<T = unknown>(query: string, ...values: unknown[]): Promise<T>;
}
