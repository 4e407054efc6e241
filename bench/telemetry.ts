// reportTelemetry throughput on one server process with sandbox-token auth, every sample persisted
// (PostgreSQL) and published, against a bare graphql-yoga server answering a trivial mutation (no
// database, no auth) measured in the same run. The load generator is a child process: keep-alive
// connections, bounded concurrency, fixed duration; the two servers take turns in rounds, so both
// see the same background load on a shared machine.
import { spawn } from 'node:child_process';
import { setMaxListeners } from 'node:events';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createSchema, createYoga } from 'graphql-yoga';
import { type TestApp, startTestApp } from '../test/support/app';
import { type BenchResult, percentile, runIfMain } from './support/harness';
import { type ReportingSandbox, seedReportingSandboxes } from './support/sandboxes';

const SANDBOXES = 16;
const CONCURRENCY = 32;
const WARMUP_MS = 1_500;
const DURATION_MS = 6_000;
/** Both servers are measured in alternating rounds, so both see the same background load. */
const ROUNDS = 6;
/**
 * Each round reports for sandboxes of its own: the service keeps the newest 1,440 samples per
 * sandbox, and a fast run sends more than that to one sandbox, so counting rows would count the
 * prune too (one run read 0.81 persisted per report, exactly 16 × 1,440 plus the unpruned tail).
 */
const SANDBOXES_SEEDED = SANDBOXES * ROUNDS;

const TELEMETRY = `mutation ReportTelemetry($input: ReportTelemetryInput!) { reportTelemetry(input: $input) {
  __typename ... on ReportTelemetrySuccess { sample { at } } ... on Error { code message } } }`;
const PING = 'mutation Ping($input: PingInput!) { ping(input: $input) { __typename ok at } }';

interface Target {
  token: string | null;
  body: string;
}

interface LoadResult {
  warmOk: number;
  ok: number;
  failed: number;
  firstError: string | null;
  elapsedMs: number;
  /** Every measured latency, ascending. */
  samples: number[];
}

// Runs in the child: plain JS, no TypeScript loader needed.
const LOAD_GENERATOR = `
import { Agent, request } from 'node:http';
const { url, targets, concurrency, warmupMs, durationMs, expect } = JSON.parse(process.argv[1]);
const u = new URL(url);
const agent = new Agent({ keepAlive: true, maxSockets: concurrency });
function post(target) {
  return new Promise((resolve) => {
    const started = performance.now();
    const headers = { 'content-type': 'application/json', 'content-length': Buffer.byteLength(target.body) };
    if (target.token) headers.authorization = 'Bearer ' + target.token;
    const req = request({ host: u.hostname, port: u.port, path: u.pathname, method: 'POST', headers, agent }, (res) => {
      const chunks = [];
      res.on('data', (c) => chunks.push(c));
      res.on('end', () => {
        const text = Buffer.concat(chunks).toString();
        const ok = res.statusCode === 200 && text.includes(expect);
        resolve({ ok, ms: performance.now() - started, error: ok ? null : res.statusCode + ' ' + text.slice(0, 200) });
      });
    });
    req.on('error', (e) => resolve({ ok: false, ms: performance.now() - started, error: String(e) }));
    req.end(target.body);
  });
}
async function phase(ms) {
  const until = performance.now() + ms;
  let next = 0;
  const stats = { ok: 0, failed: 0, firstError: null, samples: [] };
  const worker = async () => {
    while (performance.now() < until) {
      const target = targets[next++ % targets.length];
      const r = await post(target);
      if (r.ok) { stats.ok++; stats.samples.push(r.ms); } else { stats.failed++; stats.firstError ??= r.error; }
    }
  };
  const t0 = performance.now();
  await Promise.all(Array.from({ length: concurrency }, worker));
  return { ...stats, elapsedMs: performance.now() - t0 };
}
const warm = await phase(warmupMs, true);
const s = await phase(durationMs, true);
s.samples.sort((a, b) => a - b);
process.stdout.write(JSON.stringify({ warmOk: warm.ok, ok: s.ok, failed: s.failed + warm.failed, firstError: s.firstError, elapsedMs: s.elapsedMs, samples: s.samples }));
agent.destroy();
`;

function load(
  url: string,
  targets: Target[],
  expect: string,
  timing: { warmupMs: number; durationMs: number },
): Promise<LoadResult> {
  return new Promise((resolve, reject) => {
    const arg = JSON.stringify({ url, targets, concurrency: CONCURRENCY, ...timing, expect });
    const child = spawn(process.execPath, ['--input-type=module', '-e', LOAD_GENERATOR, arg], {
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    let out = '';
    child.stdout.on('data', (chunk: Buffer) => {
      out += chunk.toString();
    });
    child.once('error', reject);
    child.once('exit', (code) => {
      if (code !== 0) reject(new Error(`load generator exited with ${code}`));
      else resolve(JSON.parse(out) as LoadResult);
    });
  });
}

async function startBaseline(): Promise<{ url: string; close: () => Promise<void> }> {
  const yoga = createYoga({
    logging: false,
    landingPage: false,
    graphiql: false,
    schema: createSchema({
      typeDefs: `type Query { ok: Boolean! }
        input PingInput { sandboxId: ID!  load1: Float! }
        type PingResult { ok: Boolean!  at: String! }
        type Mutation { ping(input: PingInput!): PingResult! }`,
      resolvers: {
        Query: { ok: () => true },
        Mutation: { ping: () => ({ __typename: 'PingResult', ok: true, at: new Date().toISOString() }) },
      },
    }),
  });
  const server = createServer(yoga.requestListener);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/graphql`,
    close: async () => {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

function emptyResult(): LoadResult {
  return { warmOk: 0, ok: 0, failed: 0, firstError: null, elapsedMs: 0, samples: [] };
}

/** Adds one round's counts and latencies to the running totals. */
function add(total: LoadResult, round: LoadResult): void {
  total.warmOk += round.warmOk;
  total.ok += round.ok;
  total.failed += round.failed;
  total.firstError ??= round.firstError;
  total.elapsedMs += round.elapsedMs;
  total.samples.push(...round.samples);
}

/** Sessions with sandboxes and their sandbox tokens in a fresh account. */
async function seedSandboxes(t: TestApp, count: number): Promise<ReportingSandbox[]> {
  const account = await t.seedAccount({ tier: 'ENTERPRISE' });
  return seedReportingSandboxes(t.app.services, account, count, 'bench');
}

export async function run(): Promise<BenchResult[]> {
  const t = await startTestApp({ env: { SINGULACOMP_REAPER_INTERVAL_MS: String(3_600_000) } });
  const baseline = await startBaseline();
  const published = new Map<string, number>();
  const abort = new AbortController();
  setMaxListeners(SANDBOXES_SEEDED * 2, abort.signal);
  try {
    const sandboxes = await seedSandboxes(t, SANDBOXES_SEEDED);
    // Count what reaches a subscriber, per sandbox (the in-process delivery path).
    for (const { sandboxId } of sandboxes) {
      published.set(sandboxId, 0);
      void (async () => {
        for await (const _ of t.app.services.pubsub.subscribe('telemetry', sandboxId, {
          signal: abort.signal,
        }))
          published.set(sandboxId, (published.get(sandboxId) ?? 0) + 1);
      })().catch(() => {});
    }
    const input = (sandboxId: string) => ({
      sandboxId,
      memoryUsedBytes: 1_500_000_000,
      memoryLimitBytes: 4_294_967_296,
      load1: 0.42,
      diskUsedBytes: 5_000_000_000,
      diskTotalBytes: 21_474_836_480,
      daemonRssBytes: 60_000_000,
      opencodeRssBytes: 250_000_000,
      reason: 'INTERVAL',
    });
    const telemetryTargets = (round: number): Target[] =>
      sandboxes.slice(round * SANDBOXES, (round + 1) * SANDBOXES).map((s) => ({
        token: s.token,
        body: JSON.stringify({ query: TELEMETRY, variables: { input: input(s.sandboxId) } }),
      }));
    const pingTargets: Target[] = sandboxes.slice(0, SANDBOXES).map((s) => ({
      token: null,
      body: JSON.stringify({ query: PING, variables: { input: { sandboxId: s.sandboxId, load1: 0.42 } } }),
    }));

    const base = emptyResult();
    const tele = emptyResult();
    const before = await t.app.services.db.telemetrySample.count();
    for (const key of published.keys()) published.set(key, 0);
    const statementsBefore = t.app.services.database.stats.statements;
    for (let round = 0; round < ROUNDS; round++) {
      const timing = { warmupMs: round === 0 ? WARMUP_MS : 200, durationMs: DURATION_MS / ROUNDS };
      add(base, await load(baseline.url, pingTargets, '"ok":true', timing));
      add(tele, await load(t.graphqlUrl, telemetryTargets(round), 'ReportTelemetrySuccess', timing));
    }
    await t.app.services.telemetry.drain();
    const stored = (await t.app.services.db.telemetrySample.count()) - before;
    const statements = t.app.services.database.stats.statements - statementsBefore;
    // Delivery is asynchronous: the last events may still be on their way to the subscribers when
    // the last report is answered. Count once every stored sample arrived, or after 5 s.
    const deliveredNow = () => [...published.values()].reduce((a, b) => a + b, 0);
    for (const deadline = Date.now() + 5_000; deliveredNow() < stored && Date.now() < deadline; ) {
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    const delivered = deliveredNow();
    if (tele.failed > 0) throw new Error(`reportTelemetry failed ${tele.failed} times: ${tele.firstError}`);

    const perSecond = (r: LoadResult) => Math.round((r.ok / r.elapsedMs) * 1_000);
    const teleRate = perSecond(tele);
    const baseRate = perSecond(base);
    const reports = tele.warmOk + tele.ok;
    return [
      {
        name: 'reportTelemetry throughput (sandbox token, persisted + published)',
        value: teleRate,
        unit: 'req/s',
        baseline: baseRate,
        note: `${Math.round((teleRate / baseRate) * 100)}% of bare yoga; goal ≥ 3000/s; ${CONCURRENCY} concurrent, ${SANDBOXES} sandboxes per round`,
      },
      { name: 'bare graphql-yoga trivial mutation', value: baseRate, unit: 'req/s' },
      {
        name: 'reportTelemetry p50 latency',
        value: round(percentile(tele.samples, 50)),
        unit: 'ms',
        baseline: round(percentile(base.samples, 50)),
      },
      {
        name: 'reportTelemetry p99 latency',
        value: round(percentile(tele.samples, 99)),
        unit: 'ms',
        baseline: round(percentile(base.samples, 99)),
      },
      {
        name: 'samples persisted per successful report (incl. warm-up)',
        value: round(stored / reports),
        unit: 'ratio',
        note: `${stored} rows for ${reports} successful reports`,
      },
      {
        name: 'events delivered per persisted sample',
        value: round(delivered / Math.max(1, stored)),
        unit: 'ratio',
      },
      {
        name: 'SQL statements per report',
        value: round(statements / Math.max(1, reports)),
        unit: 'stmt',
        note: 'Prisma and raw: one group-committed INSERT (samples and their events) serves a batch of reports',
      },
    ];
  } finally {
    abort.abort();
    await baseline.close();
    await t.stop();
  }
}

const round = (n: number): number => Math.round(n * 1_000) / 1_000;

runIfMain(import.meta.url, run);
