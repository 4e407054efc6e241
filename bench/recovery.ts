// Recovery after the two faults an operator meets most, on a private PostgreSQL and real server
// processes:
// - PostgreSQL stops (immediate shutdown) and starts again: how long after it accepts connections
//   again a server answers a query, beside a fresh process's first query (the floor: opening its
//   connections and answering once);
// - a server process is killed with SIGKILL while it admits and provisions sessions, then started
//   again on the same data directory with the default recovery settings: how long after it
//   answers /healthz every one of those sessions is RUNNING, beside how long the same sessions take
//   to reach RUNNING when nothing fails.
//   npx tsx bench/recovery.ts   (or npm run bench -- recovery)
import { performance } from 'node:perf_hooks';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { TypedDocumentNode } from '@graphql-typed-document-node/core';
import { print } from 'graphql';
import pg from 'pg';
import { processesWith } from '../test/chaos/fleet';
import {
  CreateProjectDocument,
  CreateSessionDocument,
  UpdateAccountDocument,
} from '../test/generated/graphql';
import { createTestRepo } from '../test/support/git';
import { startPostgresProcess } from '../test/support/postgres-process';
import {
  type SpawnedServer,
  killLocalSandboxes,
  postGraphql,
  spawnServer,
} from '../test/support/spawn-server';
import { type BenchResult, round, runIfMain } from './support/harness';

const SESSIONS = Number(process.env.BENCH_RECOVERY_SESSIONS ?? 6);
/** How long PostgreSQL stays down, and how many clients keep querying meanwhile. */
const OUTAGE_MS = Number(process.env.BENCH_OUTAGE_MS ?? 10_000);
const OUTAGE_CLIENTS = Number(process.env.BENCH_OUTAGE_CLIENTS ?? 8);
const QUERY = { query: '{ sessions(first: 1) { edges { node { id } } } }' };

/** Polls check every intervalMs until it is truthy; throws after timeoutMs. */
async function until<T>(
  check: () => Promise<T>,
  timeoutMs: number,
  what: string,
  intervalMs = 20,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check().catch(() => undefined);
    if (value) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, intervalMs));
  }
}

async function accepts(url: string): Promise<boolean> {
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 1_000 });
  client.on('error', () => {});
  try {
    await client.connect();
    await client.query('SELECT 1');
    return true;
  } finally {
    await client.end().catch(() => {});
  }
}

export async function run(): Promise<BenchResult[]> {
  const postgres = await startPostgresProcess();
  const repo = createTestRepo({ 'README.md': '# recovery\n' });
  const dataDir = mkdtempSync(join(tmpdir(), 'bench-recovery-'));
  const marker = `sleep ${700 + Math.floor(Math.random() * 800)}`;
  const env = { SINGULACOMP_LOCAL_ENTRY: `exec ${marker}`, SINGULACOMP_LOCAL_ISOLATION: 'none' };
  const spawn = () => spawnServer({ databaseUrl: postgres.url, dataDir, env, startTimeoutMs: 180_000 });
  // A pool: its connections drop with the outage and are opened again after it.
  const sql = new pg.Pool({ connectionString: postgres.url, max: 2 });
  sql.on('error', () => {});
  let server: SpawnedServer | null = null;
  try {
    server = await spawn();
    const token = server.bootstrapToken()!;
    const query = (s: SpawnedServer) => postGraphql(s.graphqlUrl, QUERY, token);

    // A fresh process's first query.
    const fresh = performance.now();
    const first = await query(server);
    if (first.status !== 200) throw new Error(`first query answered ${first.status}`);
    const freshMs = performance.now() - fresh;

    // Creates with nothing failing (the baseline of the crash below). They also show the
    // process's background work (job workers) has started, which an outage must not interrupt.
    const post = <T, V>(s: SpawnedServer, doc: TypedDocumentNode<T, V>, variables: V) =>
      postGraphql(s.graphqlUrl, { query: print(doc), variables }, token);
    await post(server, UpdateAccountDocument, { input: { concurrentSessionLimit: 4 * SESSIONS } });
    const created = await post(server, CreateProjectDocument, {
      input: { name: 'recovery', repositoryUrl: repo.url },
    });
    const project = created.json.data?.createProject as { project?: { id: string } } | undefined;
    if (!project?.project) throw new Error(JSON.stringify(created.json));
    const projectId = project.project.id;
    const count = async (where: string) =>
      (await sql.query<{ n: number }>(`SELECT count(*)::int AS n FROM "Session" WHERE ${where}`)).rows[0]!.n;
    const provisioning = () => count(`status = 'PROVISIONING'`);
    const burst = (s: SpawnedServer, label: string) =>
      Array.from({ length: SESSIONS }, (_, i) =>
        post(s, CreateSessionDocument, { input: { projectId, prompt: `${label} ${i}` } }).catch(() => null),
      );
    const calm = performance.now();
    await Promise.all(burst(server, 'calm'));
    await until(async () => (await provisioning()) === 0, 120_000, 'the calm sessions to provision', 50);
    const calmMs = performance.now() - calm;

    // Jobs are not taken over in the first seconds after PostgreSQL starts (every process is still
    // taking its locks again): the crash is timed for a database that has been up a while.
    await until(
      async () =>
        (
          await sql.query<{ up: boolean }>(
            `SELECT pg_postmaster_start_time() < now() - interval '5 seconds' AS up`,
          )
        ).rows[0]?.up,
      60_000,
      'PostgreSQL up for five seconds',
      100,
    );
    const before = await count('true');
    const victim = server;
    const requests = burst(victim, 'crash');
    // Killed once every create is admitted: their branch cuts, job hand-offs and provisioning are
    // cut off part-way.
    await until(
      async () => (await count('true')) >= before + SESSIONS,
      120_000,
      'the creates to be admitted',
      5,
    );
    victim.process.kill('SIGKILL');
    const killedAt = performance.now();
    await Promise.all(requests);
    const leftProvisioning = await count(`status = 'PROVISIONING' AND prompt LIKE 'crash %'`);
    server = await spawn();
    const restartedAt = performance.now();
    await until(async () => (await provisioning()) === 0, 300_000, 'the interrupted sessions to settle', 50);
    const settledAt = performance.now();
    const { rows } = await sql.query<{ status: string; n: number }>(
      `SELECT status::text, count(*)::int AS n FROM "Session" WHERE prompt LIKE 'crash %' GROUP BY status`,
    );
    const outcome = rows.map((r) => `${r.n} ${r.status}`).join(', ');

    // PostgreSQL away and back.
    postgres.stop();
    let during = 0;
    await until(
      async () => {
        during = (await query(server!).catch(() => ({ status: -1 }))).status;
        return during === 503;
      },
      30_000,
      '503 during the outage',
    ).catch((error: Error) => {
      throw new Error(`${error.message} (last answer ${during})\n${server?.output().slice(-3000)}`);
    });
    // Clients keep asking while it is away, as they would.
    let outage = true;
    const clients = Array.from({ length: OUTAGE_CLIENTS }, async () => {
      while (outage) {
        await query(server!).catch(() => undefined);
        await new Promise((r) => setTimeout(r, 100));
      }
    });
    await new Promise((r) => setTimeout(r, OUTAGE_MS));
    let acceptedAt = 0;
    const probe = until(
      async () => {
        if (!(await accepts(postgres.url))) return false;
        acceptedAt = performance.now();
        return true;
      },
      120_000,
      'PostgreSQL to accept connections',
      10,
    );
    const starting = postgres.start();
    await probe;
    const answeredAt = await until(
      async () => ((await query(server!)).status === 200 ? performance.now() : 0),
      120_000,
      'a query answered after the outage',
    );
    outage = false;
    await Promise.all(clients);
    await starting;
    const outageMs = answeredAt - acceptedAt;

    return [
      {
        name: 'recovery: query answered after PostgreSQL accepts connections again',
        value: round(outageMs, 0),
        unit: 'ms',
        baseline: round(freshMs, 0),
        note: `goal ≤ 2,000 ms; immediate shutdown, down ${OUTAGE_MS / 1000} s with ${OUTAGE_CLIENTS} clients querying, then start; baseline = a fresh process answering its first query`,
      },
      {
        name: `recovery: sessions of a kill -9-ed process RUNNING after its restart (${SESSIONS})`,
        value: round(settledAt - restartedAt, 0),
        unit: 'ms',
        baseline: round(calmMs, 0),
        note: `goal ≤ 5,000 ms with default recovery settings, PostgreSQL up ≥ 5 s; ${leftProvisioning} left PROVISIONING by the kill, ${round((settledAt - killedAt) / 1000, 1)} s after the kill; ${outcome}; baseline = the same creates with nothing failing`,
      },
    ];
  } finally {
    await sql.end().catch(() => {});
    await server?.stop();
    killLocalSandboxes(dataDir);
    for (const pid of processesWith(marker)) {
      try {
        process.kill(pid, 'SIGKILL');
      } catch {}
    }
    postgres.destroy();
    rmSync(dataDir, { recursive: true, force: true });
    repo.remove();
  }
}

runIfMain(import.meta.url, run);
