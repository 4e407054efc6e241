// OpenCode's transcript is SQLite; the daemon reads and edits it with Node's built-in `node:sqlite`.
// Its API is synchronous, and OpenCode may hold the write lock for a while: each call runs in a short
// child process of its own (with a busy timeout), so a busy database never blocks the daemon's event
// loop (the proxy, lease renewals and telemetry keep running), and a call that outlives its deadline
// is killed. A process rather than a worker thread: everything a call allocated goes back to the
// system when it exits, where a worker thread left about 9 MiB resident in the daemon after one pass.
import { spawn } from 'node:child_process';
import type * as V8 from 'node:v8';

/** node:v8 (its serializer), loaded with the first call: an idle daemon keeps about 1.5 MiB less. */
let loadedV8: typeof V8 | undefined;
const v8 = (): typeof V8 => {
  loadedV8 ??= process.getBuiltinModule('node:v8');
  return loadedV8;
};

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

/** What the child writes to stdout (v8-serialised, so bigints and bytes survive). */
type Outcome<Row> = { rows: Row[] } | { error: string };

// CommonJS for `node -e`: the daemon ships as one bundled file, so no script file of its own. The job
// arrives v8-serialised on stdin and the outcome leaves the same way on stdout.
const CHILD = `
const v8 = require('node:v8');
const chunks = [];
process.stdin.on('data', (chunk) => chunks.push(chunk));
process.stdin.on('end', () => {
  let outcome;
  try {
    outcome = { rows: run(v8.deserialize(Buffer.concat(chunks))) };
  } catch (error) {
    outcome = { error: String((error && error.message) || error) };
  }
  process.stdout.write(v8.serialize(outcome));
});
function run(job) {
  const { DatabaseSync } = require('node:sqlite');
  const db = new DatabaseSync(job.db);
  try {
    db.exec('PRAGMA busy_timeout = ' + Number(job.busyTimeoutMs));
    if (job.kind === 'query') return db.prepare(job.statement.sql).all(...(job.statement.params || []));
    db.exec('BEGIN IMMEDIATE');
    try {
      for (const s of job.statements) db.prepare(s.sql).run(...(s.params || []));
      db.exec('COMMIT');
    } catch (error) {
      db.exec('ROLLBACK');
      throw error;
    }
    return [];
  } finally {
    db.close();
  }
}
`;

function runInChild<Row>(job: Job): Promise<Row[]> {
  return new Promise((resolve, reject) => {
    // No NODE_OPTIONS: a loader or preload of the daemon's own has no business in the child.
    const { NODE_OPTIONS: _options, ...env } = process.env;
    const child = spawn(process.execPath, ['--no-warnings', '-e', CHILD], {
      env,
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    const out: Buffer[] = [];
    let stderr = '';
    let settled = false;
    // Busy timeout plus time for the work itself; past it the child is killed.
    const deadline = setTimeout(() => {
      settle(() => reject(new Error(`sqlite: no answer within ${job.busyTimeoutMs + 30_000} ms`)));
      child.kill('SIGKILL');
    }, job.busyTimeoutMs + 30_000);
    const settle = (fn: () => void): void => {
      if (settled) return;
      settled = true;
      clearTimeout(deadline);
      fn();
    };
    child.stdout.on('data', (chunk: Buffer) => out.push(chunk));
    child.stderr.on('data', (chunk: Buffer) => {
      stderr = (stderr + chunk.toString()).slice(-2_000);
    });
    child.once('error', (error) => settle(() => reject(new Error(`sqlite: ${error.message}`))));
    child.once('close', (code, signal) => {
      let outcome: Outcome<Row> | null = null;
      try {
        if (out.length > 0) outcome = v8().deserialize(Buffer.concat(out)) as Outcome<Row>;
      } catch {
        // Unreadable output: reported below with the exit status.
      }
      if (outcome && 'rows' in outcome) settle(() => resolve(outcome.rows));
      else if (outcome) settle(() => reject(new Error(`sqlite: ${outcome.error}`)));
      else {
        const why = stderr.trim().split('\n').at(-1) ?? '';
        settle(() => reject(new Error(`sqlite process exited ${signal ?? code}${why ? `: ${why}` : ''}`)));
      }
    });
    child.stdin.on('error', () => {
      // The child died before reading its job: its exit reports it.
    });
    child.stdin.end(v8().serialize(job));
  });
}

/** Runs one statement against `db` with bound `params`; returns its rows (none for a write). */
export function runSqlite<Row = Record<string, unknown>>(
  db: string,
  sql: string,
  params: SqlValue[] = [],
  options: SqliteOptions = {},
): Promise<Row[]> {
  return runInChild<Row>({
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
  await runInChild({ kind: 'write', db, busyTimeoutMs: options.busyTimeoutMs ?? 5_000, statements });
}
