// `npm run soak`: one server process (PostgreSQL, a private Redis, LOCAL sandboxes whose entry is a
// plain `sleep`) under a steady mix for SOAK_MINUTES (default 10): sessions created and stopped
// through GraphQL, long-lived and churning graphql-ws subscriptions, and telemetry reports with
// sandbox tokens. Every SOAK_INTERVAL_SECONDS (default 30) it prints the server's RSS, heap and
// event-loop delay (perf_hooks.monitorEventLoopDelay, measured inside the server process), then the
// least-squares slope of each per minute. A leak shows as a steady positive RSS slope; the first
// interval (warm-up: JIT, pools, caches) is left out of the slopes.
//
// SOAK_SNAPSHOTS=10,60 writes a V8 heap snapshot of the server at those minutes into SOAK_OUT_DIR
// (default .tmp/soak); compare two with `tsx bench/support/heap-diff.ts a.heapsnapshot b.heapsnapshot`.
// SOAK_SERVER_ARGS adds Node flags to the server process (e.g. `--cpu-prof --cpu-prof-dir=.tmp/prof`).
// Each row also splits memory outside the JS heap: `external` (Buffers, native objects the heap
// points at) of which `arrayBuffers`, and what is left of RSS (code, native allocations, malloc arenas).
//
// Not a bench module: bench/run.ts imports every bench file, so nothing here runs on import.
import { type ChildProcess, fork } from 'node:child_process';
import { mkdirSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import { writeHeapSnapshot } from 'node:v8';
import { seedReportingSandboxes } from './support/sandboxes';

const SELF = fileURLToPath(import.meta.url);
const MINUTES = Number(process.env.SOAK_MINUTES ?? 10);
const INTERVAL_S = Number(process.env.SOAK_INTERVAL_SECONDS ?? 30);
const SNAPSHOT_MINUTES = (process.env.SOAK_SNAPSHOTS ?? '')
  .split(',')
  .filter((m) => m.trim() !== '')
  .map(Number);
const OUT_DIR = resolve(process.env.SOAK_OUT_DIR ?? '.tmp/soak');
/** Fake running sandboxes that report telemetry (one report each per second). */
const REPORTERS = 8;
/** Subscriptions held for the whole soak, and how many churn (one replaced every 5 s). */
const STEADY_SUBSCRIPTIONS = 20;
const CHURN_SUBSCRIPTIONS = 5;
/** A session is created every CREATE_EVERY_MS and stopped SESSION_LIFETIME_MS later. */
const CREATE_EVERY_MS = 2_000;
const SESSION_LIFETIME_MS = 10_000;

type Msg = { type: string } & Record<string, unknown>;

interface Stats {
  rssMiB: number;
  heapMiB: number;
  heapTotalMiB: number;
  externalMiB: number;
  arrayBuffersMiB: number;
  eldMeanMs: number;
  eldP99Ms: number;
  eldMaxMs: number;
  subscriptions: number;
  /** Main-thread CPU over the interval, % of one core. */
  cpuPct: number;
  /** Event-loop stalls of ≥ 100 ms, their total length and the main thread's CPU time within them. */
  stalls: number;
  stallMs: number;
  stallCpuMs: number;
}

// ---------------------------------------------------------------- server role (child process)

async function serverRole(): Promise<void> {
  const { buildApp } = await import('../server/app');
  const { parseEnv } = await import('../server/env');
  const config = JSON.parse(process.env.SOAK_CONFIG ?? '{}') as { databaseUrl: string; redisUrl: string };
  const app = await buildApp({
    env: parseEnv({
      NODE_ENV: 'production',
      PORT: '0',
      HOST: '127.0.0.1',
      LOG_LEVEL: 'error',
      LOG_FORMAT: 'json',
      SINGULACOMP_DATA_DIR: mkdtempSync(join(tmpdir(), 'sc-soak-')),
      SINGULACOMP_SECRET_KEY: Buffer.alloc(32, 5).toString('base64'),
      DATABASE_URL: config.databaseUrl,
      REDIS_URL: config.redisUrl,
      SINGULACOMP_LOCAL_ENTRY: 'exec sleep 3600',
      SINGULACOMP_LOCAL_ISOLATION: 'none',
      SINGULACOMP_ALLOW_LOCAL_REPOSITORIES: 'true',
      // The reporters' sessions never report a runtime state: with the default (15 min) the reaper
      // stopped them a quarter of an hour in, and every telemetry report after that was refused.
      SINGULACOMP_IDLE_TIMEOUT_MS: String((MINUTES + 60) * 60_000),
    }),
    printBootstrapToken: false,
    realtime: { maxConnectionsPerToken: 1_000 },
  });
  await app.start();
  const { db } = app.services;
  // Telemetry reporters: running sessions with sandboxes, written directly (no provisioning).
  const admin = await db.user.findFirstOrThrow({ where: { role: 'ADMIN' } });
  await db.account.update({ where: { id: admin.accountId }, data: { concurrentSessionLimit: 1_000 } });
  const reporters = await seedReportingSandboxes(
    app.services,
    { accountId: admin.accountId, userId: admin.id },
    REPORTERS,
    'soak-reporters',
  );
  const eld = monitorEventLoopDelay({ resolution: 10 });
  eld.enable();
  // A stall whose main-thread CPU is close to its length is the process's own work; one with little
  // CPU is the thread waiting: for a core on a loaded host, or in a blocking system call.
  const stall = { count: 0, wallMs: 0, cpuMs: 0 };
  const cpuMs = () => {
    const { user, system } = process.threadCpuUsage();
    return (user + system) / 1000;
  };
  let lastTick = performance.now();
  let lastCpu = cpuMs();
  setInterval(() => {
    const now = performance.now();
    const cpu = cpuMs();
    if (now - lastTick >= 110) {
      stall.count++;
      stall.wallMs += now - lastTick;
      stall.cpuMs += cpu - lastCpu;
    }
    lastTick = now;
    lastCpu = cpu;
  }, 10).unref();
  let intervalStart = { at: performance.now(), cpu: cpuMs() };
  process.on('message', async (message: Msg) => {
    if (message.type === 'stats') {
      const memory = process.memoryUsage();
      const stats: Stats = {
        rssMiB: memory.rss / 2 ** 20,
        heapMiB: memory.heapUsed / 2 ** 20,
        heapTotalMiB: memory.heapTotal / 2 ** 20,
        externalMiB: memory.external / 2 ** 20,
        arrayBuffersMiB: memory.arrayBuffers / 2 ** 20,
        eldMeanMs: eld.mean / 1e6,
        eldP99Ms: eld.percentile(99) / 1e6,
        eldMaxMs: eld.max / 1e6,
        subscriptions: app.services.pubsub.subscriptionCount(),
        cpuPct: (100 * (cpuMs() - intervalStart.cpu)) / (performance.now() - intervalStart.at),
        stalls: stall.count,
        stallMs: stall.wallMs,
        stallCpuMs: stall.cpuMs,
      };
      eld.reset();
      Object.assign(stall, { count: 0, wallMs: 0, cpuMs: 0 });
      intervalStart = { at: performance.now(), cpu: cpuMs() };
      process.send?.({ type: 'stats', stats });
    }
    if (message.type === 'snapshot') {
      mkdirSync(OUT_DIR, { recursive: true });
      const file = writeHeapSnapshot(join(OUT_DIR, `server-${message.label as string}.heapsnapshot`));
      // The snapshot itself blocks the loop; keep it out of the next row.
      eld.reset();
      Object.assign(stall, { count: 0, wallMs: 0, cpuMs: 0 });
      process.send?.({ type: 'snapshotted', file });
    }
    if (message.type === 'stop') {
      eld.disable();
      await app.stop();
      process.send?.({ type: 'stopped' });
      process.exit(0);
    }
  });
  process.send?.({ type: 'ready', url: app.url, token: app.bootstrapToken, reporters });
}

// ---------------------------------------------------------------- driver (parent process)

function request(child: ChildProcess, message: Msg, reply: string, timeoutMs = 120_000): Promise<Msg> {
  return new Promise((resolvePromise, reject) => {
    const timer = setTimeout(() => reject(new Error(`no ${reply} within ${timeoutMs} ms`)), timeoutMs);
    const onMessage = (m: Msg) => {
      if (m.type !== reply) return;
      clearTimeout(timer);
      child.off('message', onMessage);
      resolvePromise(m);
    };
    child.on('message', onMessage);
    if (message.type) child.send(message);
  });
}

/** Least-squares slope of y over x. */
function slope(points: Array<[number, number]>): number {
  const n = points.length;
  if (n < 2) return Number.NaN;
  const mx = points.reduce((s, [x]) => s + x, 0) / n;
  const my = points.reduce((s, [, y]) => s + y, 0) / n;
  const sxy = points.reduce((s, [x, y]) => s + (x - mx) * (y - my), 0);
  const sxx = points.reduce((s, [x]) => s + (x - mx) ** 2, 0);
  return sxx === 0 ? Number.NaN : sxy / sxx;
}

async function driver(): Promise<void> {
  const { print } = await import('graphql');
  const { createClient } = await import('graphql-ws');
  const { default: WebSocket } = await import('ws');
  const { createTestDatabase } = await import('../test/support/database');
  const { createTestRepo } = await import('../test/support/git');
  const { startRedisProcess } = await import('../test/support/server-process');
  const { AccountSessionsDocument, CreateProjectDocument, CreateSessionDocument, StopSessionDocument } =
    await import('../test/generated/graphql');

  const database = await createTestDatabase('sc_soak');
  const redis = await startRedisProcess();
  const repo = createTestRepo({ 'README.md': '# soak\n' });
  const child = fork(SELF, ['--role=server'], {
    execArgv: ['--import', 'tsx', ...(process.env.SOAK_SERVER_ARGS ?? '').split(' ').filter(Boolean)],
    env: { ...process.env, SOAK_CONFIG: JSON.stringify({ databaseUrl: database.url, redisUrl: redis.url }) },
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  const ready = await request(child, { type: '' }, 'ready', 300_000);
  const url = ready.url as string;
  const token = ready.token as string;
  const reporters = ready.reporters as Array<{ sandboxId: string; token: string }>;
  const graphqlUrl = `${url}/graphql`;
  const counts = {
    created: 0,
    refused: 0,
    stopped: 0,
    failedCalls: 0,
    reports: 0,
    reportErrors: 0,
    events: 0,
  };

  async function gql(query: string, variables: unknown, auth: string): Promise<Record<string, unknown>> {
    const res = await fetch(graphqlUrl, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${auth}` },
      body: JSON.stringify({ query, variables }),
    });
    return (await res.json()) as Record<string, unknown>;
  }

  const project = (await gql(
    print(CreateProjectDocument),
    { input: { name: 'soak', repositoryUrl: repo.url } },
    token,
  )) as { data?: { createProject?: { project?: { id: string } } } };
  const projectId = project.data?.createProject?.project?.id;
  if (!projectId) throw new Error(`createProject: ${JSON.stringify(project)}`);

  // Subscriptions: telemetry of each reporter and the account's sessions, over a few sockets.
  const clients = Array.from({ length: 4 }, () =>
    createClient({
      url: `${url.replace(/^http/, 'ws')}/graphql`,
      webSocketImpl: WebSocket,
      connectionParams: { authorization: token },
      retryAttempts: 0,
    }),
  );
  const subscribe = (i: number, query: string, variables: Record<string, unknown>) =>
    clients[i % clients.length]!.subscribe(
      { query, variables },
      {
        next: () => {
          counts.events++;
        },
        error: () => {
          counts.failedCalls++;
        },
        complete: () => {},
      },
    );
  const telemetryQuery = 'subscription($id: ID!) { telemetry(sandboxId: $id) { memoryUsedBytes } }';
  const steady: Array<() => void> = [];
  for (let i = 0; i < STEADY_SUBSCRIPTIONS; i++) {
    const reporter = reporters[i % reporters.length]!;
    steady.push(
      i % 2 === 0
        ? subscribe(i, telemetryQuery, { id: reporter.sandboxId })
        : subscribe(i, print(AccountSessionsDocument), {}),
    );
  }
  const churn: Array<() => void> = [];

  const live: Array<{ id: string; at: number }> = [];
  const report = (sandboxId: string, auth: string) =>
    gql(
      `mutation($input: ReportTelemetryInput!) { reportTelemetry(input: $input) { __typename } }`,
      {
        input: {
          sandboxId,
          memoryUsedBytes: 1.5e9,
          memoryLimitBytes: 4.29e9,
          load1: 0.4,
          diskUsedBytes: 5e9,
          diskTotalBytes: 2.1e10,
          daemonRssBytes: 6e7,
          opencodeRssBytes: 2.5e8,
          reason: 'INTERVAL',
        },
      },
      auth,
    ).then((r) => {
      const name = (r.data as { reportTelemetry?: { __typename: string } } | undefined)?.reportTelemetry
        ?.__typename;
      if (name === 'ReportTelemetrySuccess') counts.reports++;
      else counts.reportErrors++;
    });

  const pending = new Set<Promise<unknown>>();
  const track = (work: Promise<unknown>) => {
    const p = work.catch(() => {
      counts.failedCalls++;
    });
    pending.add(p);
    void p.finally(() => pending.delete(p));
  };
  let tick = 0;
  const loop = setInterval(() => {
    tick++;
    for (const r of reporters) track(report(r.sandboxId, r.token));
    if ((tick * 1_000) % CREATE_EVERY_MS === 0) {
      track(
        gql(print(CreateSessionDocument), { input: { projectId } }, token).then((r) => {
          const payload = (r.data as { createSession?: { __typename: string; session?: { id: string } } })
            ?.createSession;
          if (payload?.session) {
            counts.created++;
            live.push({ id: payload.session.id, at: Date.now() });
          } else counts.refused++;
        }),
      );
    }
    while (live.length > 0 && Date.now() - live[0]!.at >= SESSION_LIFETIME_MS) {
      const { id } = live.shift()!;
      track(
        gql(print(StopSessionDocument), { input: { sessionId: id } }, token).then(() => {
          counts.stopped++;
        }),
      );
    }
    if (tick % 5 === 0) {
      churn.push(subscribe(tick, print(AccountSessionsDocument), {}));
      if (churn.length > CHURN_SUBSCRIPTIONS) churn.shift()?.();
    }
  }, 1_000);

  const rows: Array<Stats & { minute: number }> = [];
  const started = Date.now();
  const header =
    'elapsed   rss MiB  heap MiB  heap tot  external  arrayBuf  rss-rest  eld mean ms  eld p99 ms  eld max ms  cpu %  stalls  stall s  stall cpu  subs  sessions  reports';
  process.stdout.write(
    `soak: ${MINUTES} min, every ${INTERVAL_S} s; ${REPORTERS} telemetry reports/s, a session every ${CREATE_EVERY_MS / 1000} s (stopped after ${SESSION_LIFETIME_MS / 1000} s), ${STEADY_SUBSCRIPTIONS} steady + ${CHURN_SUBSCRIPTIONS} churning subscriptions\n${header}\n`,
  );
  const end = started + MINUTES * 60_000;
  const snapshots = SNAPSHOT_MINUTES.map((m) => ({ at: started + m * 60_000, label: `${m}min` }));
  while (Date.now() < end) {
    const nextSnapshot = snapshots[0]?.at ?? Number.POSITIVE_INFINITY;
    await new Promise((r) =>
      setTimeout(r, Math.max(0, Math.min(INTERVAL_S * 1_000, end - Date.now(), nextSnapshot - Date.now()))),
    );
    if (snapshots.length > 0 && Date.now() >= snapshots[0]!.at - 1_000) {
      const { label } = snapshots.shift()!;
      const done = await request(child, { type: 'snapshot', label }, 'snapshotted', 600_000);
      process.stdout.write(`heap snapshot at ${label}: ${done.file as string}\n`);
      continue;
    }
    const { stats } = (await request(child, { type: 'stats' }, 'stats')) as unknown as { stats: Stats };
    const minute = (Date.now() - started) / 60_000;
    rows.push({ ...stats, minute });
    const rest = stats.rssMiB - stats.heapTotalMiB - stats.externalMiB;
    const mmss = `${Math.floor(minute)}:${String(Math.round((minute % 1) * 60)).padStart(2, '0')}`;
    process.stdout.write(
      `${mmss.padStart(7)}  ${stats.rssMiB.toFixed(1).padStart(8)}  ${stats.heapMiB.toFixed(1).padStart(8)}  ${stats.heapTotalMiB.toFixed(1).padStart(8)}  ${stats.externalMiB.toFixed(1).padStart(8)}  ${stats.arrayBuffersMiB.toFixed(1).padStart(8)}  ${rest.toFixed(1).padStart(8)}  ${stats.eldMeanMs.toFixed(2).padStart(11)}  ${stats.eldP99Ms.toFixed(2).padStart(10)}  ${stats.eldMaxMs.toFixed(1).padStart(10)}  ${stats.cpuPct.toFixed(0).padStart(5)}  ${String(stats.stalls).padStart(6)}  ${(stats.stallMs / 1000).toFixed(1).padStart(7)}  ${(stats.stallMs > 0 ? `${((100 * stats.stallCpuMs) / stats.stallMs).toFixed(0)}%` : '-').padStart(9)}  ${String(stats.subscriptions).padStart(4)}  ${String(counts.created).padStart(8)}  ${String(counts.reports).padStart(7)}\n`,
    );
  }
  // A snapshot due at the very end (SOAK_SNAPSHOTS=…,SOAK_MINUTES) is taken under load, before teardown.
  for (const { label } of snapshots.splice(0)) {
    const done = await request(child, { type: 'snapshot', label }, 'snapshotted', 600_000);
    process.stdout.write(`heap snapshot at ${label}: ${done.file as string}\n`);
  }
  clearInterval(loop);
  await Promise.allSettled([...pending]);
  for (const { id } of live.splice(0))
    await gql(print(StopSessionDocument), { input: { sessionId: id } }, token);
  const measured = rows.length > 2 ? rows.slice(1) : rows;
  const per = (f: (r: Stats) => number) => slope(measured.map((r) => [r.minute, f(r)]));
  const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)] ?? 0;
  process.stdout.write(
    `event-loop p99 over the intervals (first left out): median ${median(measured.map((r) => r.eldP99Ms)).toFixed(1)} ms, worst ${Math.max(...measured.map((r) => r.eldP99Ms)).toFixed(1)} ms; stalls ≥ 100 ms: ${measured.reduce((s, r) => s + r.stalls, 0)}, main-thread CPU within them ${(
      (100 * measured.reduce((s, r) => s + r.stallCpuMs, 0)) /
        Math.max(
          1,
          measured.reduce((s, r) => s + r.stallMs, 0),
        )
    ).toFixed(0)}% of their length\n`,
  );
  // Writing a heap snapshot raises RSS by tens of MiB at once (native memory the allocator keeps):
  // the RSS slope is also given between snapshots, where it is not distorted by one.
  const cuts = [0, ...SNAPSHOT_MINUTES.filter((m) => m < MINUTES), Number.POSITIVE_INFINITY];
  let segments = '';
  for (let i = 0; i + 1 < cuts.length; i++) {
    const part = measured.filter((r) => r.minute > cuts[i]! && r.minute < cuts[i + 1]!);
    if (part.length < 3) continue;
    const rss = slope(part.map((r) => [r.minute, r.rssMiB]));
    segments += `  rss slope ${part[0]!.minute.toFixed(1)}-${part.at(-1)!.minute.toFixed(1)} min: ${rss.toFixed(2)} MiB/min (${part[0]!.rssMiB.toFixed(0)} -> ${part.at(-1)!.rssMiB.toFixed(0)} MiB)\n`;
  }
  process.stdout.write(
    `slope per minute (first interval left out): rss ${per((r) => r.rssMiB).toFixed(2)} MiB/min, heap ${per((r) => r.heapMiB).toFixed(2)} MiB/min, external ${per((r) => r.externalMiB).toFixed(2)} MiB/min, event-loop p99 ${per((r) => r.eldP99Ms).toFixed(3)} ms/min\n` +
      segments +
      `totals: ${counts.created} sessions created, ${counts.stopped} stopped, ${counts.refused} refused; ${counts.reports} telemetry reports (${counts.reportErrors} not accepted); ${counts.events} subscription events; ${counts.failedCalls} failed calls\n`,
  );

  for (const unsubscribe of [...steady, ...churn]) unsubscribe();
  for (const client of clients) await client.dispose();
  await request(child, { type: 'stop' }, 'stopped').catch(() => child.kill('SIGKILL'));
  await redis.stop();
  await database.drop();
  repo.remove();
}

const entry = process.argv[1] ? resolve(process.argv[1]) : '';
if (entry === SELF) {
  if (process.argv.includes('--role=server')) await serverRole();
  else {
    await driver();
    process.exit(0);
  }
}
