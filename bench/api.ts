// Control-plane API costs, each against a baseline measured in the same run:
//  1. authenticated trivial query throughput vs a bare graphql-yoga hello-world (goal ≥ 1.5×), and
//     beside it the physical floor: plain node:http answering the same JSON;
//  2. a `sessions(first: 100)` page with project, template, sandbox and lease: SQL statements per
//     request (goal ≤ 4, independent of page size) and latency vs the hand-written Prisma calls
//     returning the same rows (goal ≤ 1.2×), and vs the page's own one statement run in-process
//     (what the GraphQL layer and HTTP add above the fetch);
//  3. createSession p50/p99 (limit check included) under 20 concurrent callers vs one caller.
// The load generator runs in its own process (bench/support/load.ts); the servers run here.
import { once } from 'node:events';
import { type Server, createServer } from 'node:http';
import { performance } from 'node:perf_hooks';
import { createSchema, createYoga } from 'graphql-yoga';
import type { Prisma } from '../prisma/generated/client/client';
import { compileFindMany } from '../server/fast-paths/find-many-sql';
import { startTestApp } from '../test/support/app';
import { createTestRepo } from '../test/support/git';
import { waitFor } from '../test/support/wait';
import { type BenchResult, percentile, round, runLoad, runIfMain } from './support/harness';
import { SESSIONS_PAGE, instantProvider, seedSessionsPage } from './support/sessions-page';

type HandWrittenRow = Prisma.SessionGetPayload<{
  include: { project: true; template: true; sandbox: true; lease: true };
}>;

const THROUGHPUT_MS = 6_000;
const THROUGHPUT_ROUNDS = 6;
const THROUGHPUT_CONCURRENCY = 16;
const PAGE_ROWS = 120;
const PAGE_ITERATIONS = 60;
const CREATES = 100;
const CREATE_CONCURRENCY = 20;

/** Listens on a free loopback port; `url` is `path` there. */
async function serve(server: Server, path: string): Promise<{ url: string; close(): Promise<void> }> {
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const address = server.address();
  const port = typeof address === 'object' && address ? address.port : 0;
  return {
    url: `http://127.0.0.1:${port}${path}`,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}

async function startBareYoga(): Promise<{ url: string; close(): Promise<void> }> {
  const yoga = createYoga({
    schema: createSchema({
      typeDefs: 'type Query { hello: String! }',
      resolvers: { Query: { hello: () => 'world' } },
    }),
    logging: false,
    landingPage: false,
    graphiql: false,
  });
  const server = createServer(yoga.requestListener);
  return serve(server, '/graphql');
}

/**
 * The physical floor: plain node:http answering the JSON a trivial query returns, after reading the
 * request body as a GraphQL server must. No parsing, validation or execution.
 */
async function startHttpFloor(): Promise<{ url: string; close(): Promise<void> }> {
  const reply = JSON.stringify({ data: { viewer: { kind: 'USER' } } });
  const server = createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(reply) });
      res.end(reply);
    });
  });
  return serve(server, '/graphql');
}

/**
 * The sessions page written by hand, as a REST endpoint would serve it: the same Prisma call as the
 * in-process baseline, the same rows and fields as SESSIONS_PAGE (global ids, ISO dates, a cursor
 * per edge) as JSON over node:http. No parsing, validation, authorization or field resolvers.
 */
async function startHandWrittenPage(
  page: (first: number) => Promise<HandWrittenRow[]>,
): Promise<{ url: string; close(): Promise<void> }> {
  const gid = (type: string, id: string) => Buffer.from(`${type}:${id}`).toString('base64');
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', async () => {
      const { variables } = JSON.parse(Buffer.concat(chunks).toString()) as { variables: { first: number } };
      const rows = await page(variables.first);
      const edges = rows.slice(0, variables.first).map((s) => ({
        cursor: Buffer.from(`GPC:S:${s.id}`).toString('base64'),
        node: {
          id: gid('Session', s.id),
          sessionId: s.id,
          status: s.status,
          branchName: s.branchName,
          baseRef: s.baseRef,
          createdAt: s.createdAt.toISOString(),
          project: {
            id: gid('Project', s.project.id),
            name: s.project.name,
            defaultBranch: s.project.defaultBranch,
          },
          template: s.template && {
            id: gid('Template', s.template.id),
            slug: s.template.slug,
            cpu: s.template.cpu,
            memoryGiB: s.template.memoryGiB,
            diskGiB: s.template.diskGiB,
          },
          sandbox: s.sandbox && {
            id: gid('Sandbox', s.sandbox.id),
            status: s.sandbox.status,
            provider: s.sandbox.provider,
            cpu: s.sandbox.cpu,
            memoryGiB: s.sandbox.memoryGiB,
            diskGiB: s.sandbox.diskGiB,
          },
          lease: s.lease && {
            generation: s.lease.generation,
            expiresAt: s.lease.expiresAt.toISOString(),
            releasedAt: s.lease.releasedAt?.toISOString() ?? null,
          },
        },
      }));
      const body = JSON.stringify({
        data: {
          sessions: {
            edges,
            pageInfo: { hasNextPage: rows.length > variables.first, endCursor: edges.at(-1)?.cursor ?? null },
          },
        },
      });
      res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });
      res.end(body);
    });
  });
  return serve(server, '/sessions');
}

export async function run(): Promise<BenchResult[]> {
  const results: BenchResult[] = [];
  const repo = createTestRepo({ 'README.md': '# bench\n' });
  const t = await startTestApp({ providers: [instantProvider()] });
  const bare = await startBareYoga();
  const floor = await startHttpFloor();
  try {
    const db = t.app.services.db;
    const auth = { authorization: `Bearer ${t.adminToken}` };

    // 1. Throughput: the same load against both servers in alternating rounds, so both see the
    // same background load on a shared machine.
    const helloLoad = { url: bare.url, body: JSON.stringify({ query: '{ hello }' }) };
    const viewerLoad = {
      url: t.graphqlUrl,
      body: JSON.stringify({ query: '{ viewer { kind } }' }),
      headers: auth,
    };
    const floorLoad = { url: floor.url, body: viewerLoad.body };
    const totals = {
      hello: { requests: 0, ms: 0 },
      viewer: { requests: 0, ms: 0 },
      floor: { requests: 0, ms: 0 },
    };
    for (let round = 0; round < THROUGHPUT_ROUNDS; round++) {
      for (const [key, load] of [
        ['hello', helloLoad],
        ['viewer', viewerLoad],
        ['floor', floorLoad],
      ] as const) {
        const r = await runLoad({
          ...load,
          concurrency: THROUGHPUT_CONCURRENCY,
          durationMs: THROUGHPUT_MS / THROUGHPUT_ROUNDS,
          warmupPerCaller: round === 0 ? 50 : 5,
        });
        if (r.failures > 0) throw new Error(`throughput requests failed: ${r.firstFailure}`);
        totals[key].requests += r.requests;
        totals[key].ms += r.elapsedMs;
      }
    }
    const viewer = { requestsPerSecond: (totals.viewer.requests / totals.viewer.ms) * 1_000 };
    const hello = { requestsPerSecond: (totals.hello.requests / totals.hello.ms) * 1_000 };
    results.push({
      name: 'authenticated { viewer { kind } } throughput',
      value: Math.round(viewer.requestsPerSecond),
      unit: 'req/s',
      baseline: Math.round(hello.requestsPerSecond),
      note: `baseline: bare graphql-yoga { hello }; ${THROUGHPUT_CONCURRENCY} keep-alive callers; goal ≥ 1.5×`,
    });
    const floorRate = (totals.floor.requests / totals.floor.ms) * 1_000;
    results.push({
      name: 'authenticated { viewer { kind } } vs the node:http floor',
      value: Math.round(viewer.requestsPerSecond),
      unit: 'req/s',
      baseline: Math.round(floorRate),
      note: `baseline: plain node:http answering the same JSON (bare yoga is ${(hello.requestsPerSecond / floorRate).toFixed(2)}× of it)`,
    });

    // 2. Seed a page worth of sessions, each with template, sandbox and lease.
    const { accountId, projectId } = await seedSessionsPage(t, repo.url, PAGE_ROWS);

    const stats = t.app.services.database.stats;
    // The fewest of three runs: a background write (lastUsedAt, at most once a minute) can only add.
    const statementsFor = async (first: number) => {
      await t.raw({ query: SESSIONS_PAGE, variables: { first } }); // warm: auth cached
      let fewest = Number.POSITIVE_INFINITY;
      for (let i = 0; i < 3; i++) {
        const before = stats.statements;
        const res = await t.raw({ query: SESSIONS_PAGE, variables: { first } });
        const edges = (res.data as { sessions?: { edges: unknown[] } } | null)?.sessions?.edges.length;
        if (res.errors || edges !== first)
          throw new Error(`sessions page failed: ${JSON.stringify(res.errors)}`);
        fewest = Math.min(fewest, stats.statements - before);
      }
      return fewest;
    };
    const statements10 = await statementsFor(10);
    const statements100 = await statementsFor(100);
    results.push({
      name: 'sessions(first: 100) + project, template, sandbox, lease: SQL statements',
      value: statements100,
      unit: 'statements',
      baseline: statements10,
      note: 'baseline: the same query with first: 10 (ratio 1 = independent of page size); goal ≤ 4',
    });

    // Latency: the GraphQL page over HTTP vs the hand-written Prisma calls for the same rows, in
    // process and served by hand over HTTP with the same client.
    const handWritten = (first = 100) =>
      db.session.findMany({
        where: { accountId },
        orderBy: [{ createdAt: 'desc' }, { id: 'desc' }],
        take: first + 1,
        include: { project: true, template: true, sandbox: true, lease: true },
      });
    // The statement the server runs for this page, run in-process: the fetch alone.
    const statement = compileFindMany('Session', {
      where: { accountId },
      orderBy: [{ createdAt: 'desc' }, { id: 'desc' }],
      query: { include: { project: true, template: true, sandbox: true, lease: true }, take: 101, skip: 0 },
    });
    if (!statement) throw new Error('the sessions page does not compile to one statement');
    const statementPage = () => statement.run(t.app.services.database.raw);
    const endpoint = await startHandWrittenPage(handWritten);
    const pageBody = { query: SESSIONS_PAGE, variables: { first: 100 } };
    const graphqlPage = async () => {
      const res = await t.raw(pageBody);
      if (res.errors) throw new Error(JSON.stringify(res.errors));
    };
    const endpointPage = async () => {
      const res = await fetch(endpoint.url, {
        method: 'POST',
        headers: { 'content-type': 'application/json', connection: 'close' },
        body: JSON.stringify(pageBody),
      });
      const json = (await res.json()) as { data: { sessions: { edges: unknown[] } } };
      if (json.data.sessions.edges.length !== 100) throw new Error('hand-written page is short');
    };
    // The hand-written page must carry what the GraphQL page carries, node for node.
    const nodes = (json: unknown) =>
      JSON.stringify(
        (json as { data: { sessions: { edges: { node: unknown }[] } } }).data.sessions.edges.map(
          (e) => e.node,
        ),
      );
    const viaGraphql = await t.raw(pageBody);
    const viaEndpoint = await (
      await fetch(endpoint.url, { method: 'POST', body: JSON.stringify(pageBody) })
    ).json();
    if (nodes({ data: viaGraphql.data }) !== nodes(viaEndpoint)) {
      throw new Error('the hand-written page differs from the GraphQL page');
    }
    // Interleaved samples: each iteration runs all four, so machine load affects them alike.
    for (let i = 0; i < 10; i++) {
      await statementPage();
      await handWritten();
      await endpointPage();
      await graphqlPage();
    }
    const statementSamples: number[] = [];
    const prismaSamples: number[] = [];
    const endpointSamples: number[] = [];
    const graphqlSamples: number[] = [];
    try {
      for (let i = 0; i < PAGE_ITERATIONS; i++) {
        let t0 = performance.now();
        await statementPage();
        statementSamples.push(performance.now() - t0);
        t0 = performance.now();
        await handWritten();
        prismaSamples.push(performance.now() - t0);
        t0 = performance.now();
        await endpointPage();
        endpointSamples.push(performance.now() - t0);
        t0 = performance.now();
        await graphqlPage();
        graphqlSamples.push(performance.now() - t0);
      }
    } finally {
      await endpoint.close();
    }
    const graphqlMs = percentile(graphqlSamples, 50);
    results.push(
      {
        name: 'sessions(first: 100) page latency p50',
        value: round(graphqlMs),
        unit: 'ms',
        baseline: round(percentile(prismaSamples, 50)),
        note: 'baseline: hand-written prisma findMany with include (in-process, no HTTP); goal ≤ 1.2×',
      },
      {
        name: 'sessions(first: 100) page latency p50 vs a hand-written endpoint',
        value: round(graphqlMs),
        unit: 'ms',
        baseline: round(percentile(endpointSamples, 50)),
        note: 'baseline: the same findMany served as the same JSON by a node:http handler, same client (HTTP and JSON on both sides)',
      },
      {
        name: 'sessions(first: 100) page latency p50 vs its own statement',
        value: round(graphqlMs),
        unit: 'ms',
        baseline: round(percentile(statementSamples, 50)),
        note: 'baseline: the one SQL statement the server reads the page with, run and shaped in-process (the fetch alone)',
      },
    );

    // 3. createSession under concurrency; the limit check runs on every call.
    await db.account.update({ where: { id: accountId }, data: { concurrentSessionLimit: 100_000 } });
    const createBody = JSON.stringify({
      query:
        'mutation($i: CreateSessionInput!) { createSession(input: $i) { __typename ... on Error { code message } } }',
      variables: { i: { projectId } },
    });
    const serial = await runLoad({
      url: t.graphqlUrl,
      body: createBody,
      headers: auth,
      concurrency: 1,
      count: 30,
      warmupPerCaller: 3,
    });
    // Every create provisions in the background (the instant provider): the serial run's sessions
    // are RUNNING before the burst starts, and the burst's last one becomes RUNNING some time
    // after the last create was answered.
    const drained = async () => {
      await waitFor(
        async () => (await db.session.count({ where: { accountId, status: 'PROVISIONING' } })) === 0,
        { timeoutMs: 120_000, intervalMs: 10, what: 'every created session to leave PROVISIONING' },
      );
      return performance.now();
    };
    await drained();
    const parallel = await runLoad({
      url: t.graphqlUrl,
      body: createBody,
      headers: auth,
      concurrency: CREATE_CONCURRENCY,
      count: CREATES,
      warmupPerCaller: 1,
    });
    const answeredAt = performance.now();
    const lastRunningMs = parallel.elapsedMs + ((await drained()) - answeredAt);
    if (serial.failures > 0 || parallel.failures > 0)
      throw new Error(`createSession failed: ${serial.firstFailure ?? parallel.firstFailure}`);
    results.push(
      {
        name: `createSession p50 (${CREATE_CONCURRENCY} concurrent callers)`,
        value: round(parallel.p50Ms),
        unit: 'ms',
        baseline: round(serial.p50Ms),
        note: 'baseline: one caller; includes ref resolution (answers up to SINGULACOMP_REF_CACHE_MS old taken), the locked limit check and the git branch cut',
      },
      {
        name: `createSession p99 (${CREATE_CONCURRENCY} concurrent callers)`,
        value: round(parallel.p99Ms),
        unit: 'ms',
        baseline: round(serial.p99Ms),
        note: `${round(parallel.requestsPerSecond, 1)} creates/s; provisioning replaced by an instant provider`,
      },
      {
        name: `createSession burst (${CREATES} creates, ${CREATE_CONCURRENCY} callers): last session RUNNING`,
        value: round(lastRunningMs),
        unit: 'ms',
        baseline: round(parallel.elapsedMs),
        note: 'baseline: the same burst until its last create was answered; provisioning (instant provider) runs on the job queue meanwhile',
      },
    );
    return results;
  } finally {
    await bare.close();
    await floor.close();
    await t.stop();
    repo.remove();
  }
}

runIfMain(import.meta.url, run);
