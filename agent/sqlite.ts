// OpenCode's transcript is SQLite; the daemon reads and edits it with Node's built-in `node:sqlite`.
// Its API is synchronous, and OpenCode may hold the write lock for a while: each call runs in a worker
// thread of its own (with a busy timeout), so a busy database never blocks the daemon's event loop
// (the proxy, lease renewals and telemetry keep running), and a call that outlives its deadline is
// ended by terminating the worker.
import { Worker } from 'node:worker_threads';

export interface SqliteOptions {
  /** busy_timeout while OpenCode holds a write lock. @default 5_000 */
  busyTimeoutMs?: number;
}

export type SqlValue = string | number | bigint | null | Uint8Array;

export interface SqlStatement {
  sql: string;
  params?: SqlValue[];
}

type Job =
  | { kind: 'query'; db: string; busyTimeoutMs: number; statement: SqlStatement }
  | { kind: 'write'; db: string; busyTimeoutMs: number; statements: SqlStatement[] };

// CommonJS, evaluated by the worker: the daemon ships as one bundled file, so no worker file of its own.
const WORKER = `
const { parentPort, workerData: job } = require('node:worker_threads');
const { DatabaseSync } = require('node:sqlite');
const db = new DatabaseSync(job.db);
try {
  db.exec('PRAGMA busy_timeout = ' + Number(job.busyTimeoutMs));
  if (job.kind === 'query') {
    parentPort.postMessage(db.prepare(job.statement.sql).all(...(job.statement.params || [])));
  } else {
    db.exec('BEGIN IMMEDIATE');
    try {
      for (const s of job.statements) db.prepare(s.sql).run(...(s.params || []));
      db.exec('COMMIT');
    } catch (error) {
      db.exec('ROLLBACK');
      throw error;
    }
    parentPort.postMessage([]);
  }
} finally {
  db.close();
}
`;

function runInWorker<Row>(job: Job): Promise<Row[]> {
  return new Promise((resolve, reject) => {
    const worker = new Worker(WORKER, { eval: true, workerData: job });
    let settled = false;
    // Busy timeout plus time for the work itself; past it the worker is terminated.
    const deadline = setTimeout(() => {
      settle(() => reject(new Error(`sqlite: no answer within ${job.busyTimeoutMs + 30_000} ms`)));
      void worker.terminate();
    }, job.busyTimeoutMs + 30_000);
    const settle = (fn: () => void): void => {
      if (settled) return;
      settled = true;
      clearTimeout(deadline);
      fn();
    };
    worker.once('message', (rows: Row[]) => settle(() => resolve(rows)));
    worker.once('error', (error) => settle(() => reject(new Error(`sqlite: ${error.message}`))));
    worker.once('exit', (code) => settle(() => reject(new Error(`sqlite worker exited ${code}`))));
  });
}

/** Runs one statement against `db` with bound `params`; returns its rows (none for a write). */
export function runSqlite<Row = Record<string, unknown>>(
  db: string,
  sql: string,
  params: SqlValue[] = [],
  options: SqliteOptions = {},
): Promise<Row[]> {
  return runInWorker<Row>({
    kind: 'query',
    db,
    busyTimeoutMs: options.busyTimeoutMs ?? 5_000,
    statement: { sql, params },
  });
}

/** Runs `statements` in one write transaction (BEGIN IMMEDIATE … COMMIT; rolled back on error). */
export async function writeSqlite(
  db: string,
  statements: SqlStatement[],
  options: SqliteOptions = {},
): Promise<void> {
  await runInWorker({ kind: 'write', db, busyTimeoutMs: options.busyTimeoutMs ?? 5_000, statements });
}
