// The create burst of issue "reliability under load": BURST parallel createSession calls over two
// real server processes against a limit of 25 — p50/p99 of refusals and of admits and creates/s —
// beside a baseline measured in the same run: the same burst against a bare HTTP endpoint whose
// whole admission is `BEGIN; SELECT … FOR UPDATE; count; INSERT; COMMIT` on a pool of the same size.
import { once } from 'node:events';
import { createServer } from 'node:http';
import { performance } from 'node:perf_hooks';
import { print } from 'graphql';
import pg from 'pg';
import {
  CreateProjectDocument,
  CreateSessionDocument,
  UpdateAccountDocument,
} from '../test/generated/graphql';
import { createTestDatabase } from '../test/support/database';
import { createTestRepo } from '../test/support/git';
import { postGraphql, spawnServer } from '../test/support/spawn-server';
import { type BenchResult, percentile, round } from './support/harness';

const BURST = Number(process.env.BENCH_BURST ?? 500);
const LIMIT = 25;
const POOL = 20;

interface Sample {
  status: number;
  ms: number;
}

function summarise(samples: Sample[], wallMs: number) {
  const admits = samples.filter((s) => s.status === 200).map((s) => s.ms);
  const refusals = samples.filter((s) => s.status === 429).map((s) => s.ms);
  return {
    admitted: admits.length,
    refused: refusals.length,
    other: samples.length - admits.length - refusals.length,
    refusalP50: percentile(refusals, 50),
    refusalP99: percentile(refusals, 99),
    admitP50: percentile(admits, 50),
    admitP99: percentile(admits, 99),
    perSecond: samples.length / (wallMs / 1000),
  };
}

async function burst(send: (i: number) => Promise<number>): Promise<{ samples: Sample[]; wallMs: number }> {
  const started = performance.now();
  const samples = await Promise.all(
    Array.from({ length: BURST }, async (_, i) => {
      const t0 = performance.now();
      const status = await send(i).catch(() => 0);
      return { status, ms: performance.now() - t0 };
    }),
  );
  return { samples, wallMs: performance.now() - started };
}

/** The bare admission: one table, one row lock, nothing else. */
async function baseline(url: string) {
  const pool = new pg.Pool({ connectionString: url, max: POOL });
  await pool.query('CREATE TABLE bare_account (id int PRIMARY KEY, lim int NOT NULL)');
  await pool.query('CREATE TABLE bare_session (id serial PRIMARY KEY, account int NOT NULL)');
  await pool.query('INSERT INTO bare_account VALUES (1, $1)', [LIMIT]);
  const server = createServer(async (_req, res) => {
    const client = await pool.connect();
    try {
      await client.query('BEGIN');
      const { rows } = await client.query<{ lim: number }>(
        'SELECT lim FROM bare_account WHERE id = 1 FOR UPDATE',
      );
      const count = await client.query<{ n: number }>(
        'SELECT count(*)::int AS n FROM bare_session WHERE account = 1',
      );
      if ((count.rows[0]?.n ?? 0) >= (rows[0]?.lim ?? 0)) {
        await client.query('ROLLBACK');
        res.writeHead(429).end();
        return;
      }
      await client.query('INSERT INTO bare_session (account) VALUES (1)');
      await client.query('COMMIT');
      res.writeHead(200).end();
    } catch {
      await client.query('ROLLBACK').catch(() => {});
      res.writeHead(500).end();
    } finally {
      client.release();
    }
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const port = (server.address() as { port: number }).port;
  const result = await burst(
    async () => (await fetch(`http://127.0.0.1:${port}/`, { method: 'POST' })).status,
  );
  server.close();
  await pool.end();
  return summarise(result.samples, result.wallMs);
}

export async function run(): Promise<BenchResult[]> {
  const database = await createTestDatabase('sc_bench_burst');
  const repo = createTestRepo({ 'README.md': '# burst\n' });
  const env = { SINGULACOMP_DB_POOL_SIZE: String(POOL) };
  const servers = [
    await spawnServer({ databaseUrl: database.url, env }),
    await spawnServer({ databaseUrl: database.url, env }),
  ];
  try {
    const token = servers.map((s) => s.bootstrapToken()).find((t): t is string => t !== null)!;
    await postGraphql(
      servers[0]!.graphqlUrl,
      { query: print(UpdateAccountDocument), variables: { input: { concurrentSessionLimit: LIMIT } } },
      token,
    );
    const created = await postGraphql(
      servers[0]!.graphqlUrl,
      {
        query: print(CreateProjectDocument),
        variables: { input: { name: 'burst', repositoryUrl: repo.url } },
      },
      token,
    );
    const project = created.json.data?.createProject as { project?: { id: string } } | undefined;
    if (!project?.project) throw new Error(JSON.stringify(created.json));
    const projectId = project.project.id;
    const ours = await burst(
      async (i) =>
        (
          await postGraphql(
            servers[i % 2]!.graphqlUrl,
            { query: print(CreateSessionDocument), variables: { input: { projectId, prompt: `b${i}` } } },
            token,
          )
        ).status,
    );
    const s = summarise(ours.samples, ours.wallMs);
    const bare = await baseline(database.url);
    const note = (x: ReturnType<typeof summarise>) =>
      `${x.admitted} admitted, ${x.refused} refused, ${x.other} other`;
    return [
      {
        name: `refusal p50 (${BURST} creates, limit ${LIMIT})`,
        value: round(s.refusalP50),
        unit: 'ms',
        baseline: round(bare.refusalP50),
        note: note(s),
      },
      { name: 'refusal p99', value: round(s.refusalP99), unit: 'ms', baseline: round(bare.refusalP99) },
      {
        name: 'admit p50 (incl. branch cut)',
        value: round(s.admitP50),
        unit: 'ms',
        baseline: round(bare.admitP50),
      },
      { name: 'admit p99', value: round(s.admitP99), unit: 'ms', baseline: round(bare.admitP99) },
      {
        name: 'creates answered per second',
        value: round(s.perSecond),
        unit: '/s',
        baseline: round(bare.perSecond),
        note: `baseline: ${note(bare)}`,
      },
    ];
  } finally {
    await Promise.all(servers.map((server) => server.stop()));
    await database.drop();
    repo.remove();
  }
}
