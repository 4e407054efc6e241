// Subscription fan-out: how many concurrent subscriptions one server process holds, memory per idle
// subscription, and publish → client latency at a fixed event rate. Measured for our server (token
// auth, capability checks, PostgreSQL event log, Redis broker, replay bookkeeping) and, in the same
// run, for a bare graphql-ws server with an in-memory pub/sub, so the ratio shows what our layers
// cost. Each server and the load generator run in their own process (this file, by role).
import { type ChildProcess, fork } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { EventEmitter, on } from 'node:events';
import { createServer } from 'node:http';
import { performance } from 'node:perf_hooks';
import { fileURLToPath, pathToFileURL } from 'node:url';
import type { BenchResult } from './support/harness';
export type { BenchResult };

const SELF = fileURLToPath(import.meta.url);
/** Goal 20,000; override with BENCH_SUBSCRIPTIONS. */
const TARGET = Number(process.env.BENCH_SUBSCRIPTIONS ?? 20_000);
const PER_SOCKET = 200;
const EVENTS_PER_SECOND = 1_000;
const PUBLISH_MS = 5_000;
const SUBSCRIBE_BUDGET_MS = 25_000;
const QUERY = 'subscription($id: ID!) { telemetry(sandboxId: $id) { memoryUsedBytes } }';

const now = () => performance.timeOrigin + performance.now();

type Msg = Record<string, unknown> & { type: string };

function request(child: ChildProcess, message: Msg, reply: string, timeoutMs = 120_000): Promise<Msg> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`no ${reply} within ${timeoutMs} ms`)), timeoutMs);
    const onMessage = (m: Msg) => {
      if (m.type !== reply) return;
      clearTimeout(timer);
      child.off('message', onMessage);
      resolve(m);
    };
    child.on('message', onMessage);
    child.send(message);
  });
}

function spawnRole(role: string): ChildProcess {
  return fork(SELF, [`--role=${role}`], {
    execArgv: ['--import', 'tsx', '--expose-gc', '--max-old-space-size=1536'],
    env: { ...process.env, LOG_LEVEL: 'silent', NODE_ENV: 'production' },
    stdio: ['ignore', 'ignore', 'inherit', 'ipc'],
  });
}

// ---------------------------------------------------------------- server roles

interface Publisher {
  url: string;
  token: string;
  keys: string[];
  publish(key: string, sentAt: number): Promise<unknown>;
  subscriptions(): number;
  close(): Promise<void>;
}

function sample(sentAt: number) {
  return {
    at: new Date().toISOString(),
    memoryUsedBytes: sentAt,
    memoryLimitBytes: 4e9,
    load1: 0.5,
    diskUsedBytes: 1e9,
    diskTotalBytes: 2e10,
    daemonRssBytes: 5e7,
    opencodeRssBytes: 2e8,
    reason: 'INTERVAL' as const,
  };
}

async function oursServer(keys: number): Promise<Publisher> {
  const { mkdtempSync, rmSync } = await import('node:fs');
  const { tmpdir } = await import('node:os');
  const { join } = await import('node:path');
  const { createTestDatabase } = await import('../test/support/database');
  const { startRedisProcess } = await import('../test/support/server-process');
  const { buildApp } = await import('../server/app');
  const { parseEnv } = await import('../server/env');
  const { SCOPES } = await import('../resolvers/auth/principal');
  const database = await createTestDatabase('sc_bench');
  const redis = await startRedisProcess();
  const dataDir = mkdtempSync(join(tmpdir(), 'sc-bench-'));
  const app = await buildApp({
    env: parseEnv({
      NODE_ENV: 'test',
      PORT: '0',
      HOST: '127.0.0.1',
      LOG_LEVEL: 'silent',
      SINGULACOMP_DATA_DIR: dataDir,
      SINGULACOMP_SECRET_KEY: Buffer.alloc(32, 9).toString('base64'),
      DATABASE_URL: database.url,
      REDIS_URL: redis.url,
    }),
    realtime: { maxConnectionsPerToken: 10_000 },
    printBootstrapToken: false,
  });
  await app.start();
  const db = app.services.db;
  const account = await db.account.create({ data: { name: 'bench', tier: 'ENTERPRISE' } });
  const user = await db.user.create({
    data: { accountId: account.id, email: 'bench@example.com', name: 'bench', role: 'ADMIN' },
  });
  const { secret } = await app.services.tokens.createPersonalAccessToken(
    {
      kind: 'USER',
      userId: user.id,
      accountId: account.id,
      isAdmin: true,
      scopes: new Set(SCOPES),
      tokenId: '',
      expiresAt: null,
    },
    { name: 'bench', scopes: ['sessions:read'] },
  );
  const project = await db.project.create({
    data: { accountId: account.id, name: 'bench', repositoryUrl: '/dev/null' },
  });
  const ids = Array.from({ length: keys }, () => ({ session: randomUUID(), sandbox: randomUUID() }));
  for (let i = 0; i < ids.length; i += 2_000) {
    const chunk = ids.slice(i, i + 2_000);
    await db.session.createMany({
      data: chunk.map((id) => ({
        id: id.session,
        accountId: account.id,
        projectId: project.id,
        status: 'STOPPED' as const,
        branchName: id.session,
        baseRef: 'main',
      })),
    });
    await db.sandbox.createMany({
      data: chunk.map((id) => ({
        id: id.sandbox,
        sessionId: id.session,
        accountId: account.id,
        provider: 'LOCAL' as const,
        status: 'STOPPED' as const,
        cpu: 2,
        memoryGiB: 4,
        diskGiB: 20,
      })),
    });
  }
  const byKey = new Map<string, string>(ids.map((id) => [id.sandbox, id.session]));
  return {
    url: app.url.replace(/^http/, 'ws') + '/graphql',
    token: secret,
    keys: ids.map((id) => id.sandbox),
    publish: (key, sentAt) =>
      app.services.events.telemetry({
        sandboxId: key,
        sessionId: byKey.get(key)!,
        accountId: account.id,
        sampleId: '1',
        sample: sample(sentAt),
      }),
    subscriptions: () => app.services.pubsub.subscriptionCount(),
    async close() {
      await app.stop();
      await redis.stop();
      await database.drop();
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

async function bareServer(keys: number): Promise<Publisher> {
  const { buildSchema } = await import('graphql');
  const { useServer } = await import('graphql-ws/use/ws');
  const { WebSocketServer } = await import('ws');
  const schema = buildSchema(`
    type Query { ok: Boolean }
    type Sample { memoryUsedBytes: Float! }
    type Subscription { telemetry(sandboxId: ID!): Sample! }
  `);
  const bus = new EventEmitter();
  bus.setMaxListeners(0);
  let count = 0;
  const roots = {
    subscription: {
      telemetry: async function* (args: { sandboxId: string }) {
        count++;
        try {
          for await (const [payload] of on(bus, args.sandboxId)) yield { telemetry: payload };
        } finally {
          count--;
        }
      },
    },
  };
  const server = createServer();
  const wss = new WebSocketServer({ server, path: '/graphql' });
  const ws = useServer({ schema, roots }, wss);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  const port = typeof address === 'object' && address ? address.port : 0;
  return {
    url: `ws://127.0.0.1:${port}/graphql`,
    token: 'none',
    keys: Array.from({ length: keys }, () => randomUUID()),
    async publish(key, sentAt) {
      bus.emit(key, sample(sentAt));
    },
    subscriptions: () => count,
    async close() {
      await ws.dispose();
      server.close();
    },
  };
}

async function serverRole(kind: 'ours' | 'bare'): Promise<void> {
  const keys = TARGET;
  const publisher = kind === 'ours' ? await oursServer(keys) : await bareServer(keys);
  const send = (m: Msg) => process.send?.(m);
  send({ type: 'ready', url: publisher.url, token: publisher.token, keys: publisher.keys });
  process.on('message', async (m: Msg) => {
    if (m.type === 'mem') {
      for (let i = 0; i < 3; i++) {
        global.gc?.();
        await new Promise((r) => setTimeout(r, 100));
      }
      const usage = process.memoryUsage();
      send({ type: 'mem', heapUsed: usage.heapUsed, rss: usage.rss, external: usage.external });
    } else if (m.type === 'count') {
      send({ type: 'count', count: publisher.subscriptions() });
    } else if (m.type === 'publish') {
      const perTick = EVENTS_PER_SECOND / 100;
      const ticks = PUBLISH_MS / 10;
      let sent = 0;
      const pending: Array<Promise<unknown>> = [];
      const started = now();
      for (let t = 0; t < ticks; t++) {
        for (let i = 0; i < perTick; i++) {
          const key = publisher.keys[(sent * 7919) % publisher.keys.length]!;
          pending.push(publisher.publish(key, now()));
          sent++;
        }
        const next = started + (t + 1) * 10;
        await new Promise((r) => setTimeout(r, Math.max(0, next - now())));
      }
      await Promise.all(pending);
      send({ type: 'published', sent });
    } else if (m.type === 'close') {
      await publisher.close();
      send({ type: 'closed' });
      process.exit(0);
    }
  });
}

// ---------------------------------------------------------------- load generator role

async function loadRole(): Promise<void> {
  const { createClient } = await import('graphql-ws');
  const WebSocket = (await import('ws')).default;
  const send = (m: Msg) => process.send?.(m);
  const clients: Array<ReturnType<typeof createClient>> = [];
  let latencies: number[] = [];
  let errors = 0;
  process.on('message', async (m: Msg) => {
    if (m.type === 'connect') {
      const sockets = Number(m.sockets);
      await Promise.all(
        Array.from(
          { length: sockets },
          () =>
            new Promise<void>((resolve) => {
              const client = createClient({
                url: String(m.url),
                webSocketImpl: WebSocket,
                connectionParams: { authorization: String(m.token) },
                lazy: false,
                retryAttempts: 0,
                keepAlive: 0,
                on: { connected: () => resolve(), closed: () => resolve() },
                onNonLazyError: () => {},
              });
              clients.push(client);
            }),
        ),
      );
      send({ type: 'connected' });
    } else if (m.type === 'subscribe') {
      const keys = m.keys as string[];
      keys.forEach((key, i) => {
        clients[i % clients.length]!.subscribe(
          { query: QUERY, variables: { id: key } },
          {
            next: (value) => {
              const sentAt = (value.data as { telemetry?: { memoryUsedBytes: number } } | null)?.telemetry
                ?.memoryUsedBytes;
              if (typeof sentAt === 'number') latencies.push(now() - sentAt);
              else errors++;
            },
            error: () => {
              errors++;
            },
            complete: () => {},
          },
        );
      });
      send({ type: 'subscribing' });
    } else if (m.type === 'reset') {
      latencies = [];
      send({ type: 'reset' });
    } else if (m.type === 'latency') {
      const sorted = [...latencies].sort((a, b) => a - b);
      const pct = (p: number) =>
        sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? Number.NaN;
      send({ type: 'latency', p50: pct(50), p99: pct(99), received: sorted.length, errors });
    } else if (m.type === 'close') {
      await Promise.all(clients.map((c) => c.dispose()));
      send({ type: 'closed' });
      process.exit(0);
    }
  });
}

// ---------------------------------------------------------------- orchestration

interface Measured {
  subscriptions: number;
  bytesPerSubscription: number;
  rssPerSubscription: number;
  subscribeSeconds: number;
  p50: number;
  p99: number;
  received: number;
  sent: number;
}

async function measure(kind: 'ours' | 'bare'): Promise<Measured> {
  const server = spawnRole(kind);
  const load = spawnRole('load');
  try {
    const ready = await new Promise<Msg>((resolve, reject) => {
      server.once('message', (m: Msg) => resolve(m));
      server.once('exit', (code) => reject(new Error(`${kind} server exited with ${code}`)));
    });
    const keys = ready.keys as string[];
    const sockets = Math.ceil(keys.length / PER_SOCKET);
    await request(
      load,
      { type: 'connect', url: ready.url as string, token: ready.token as string, sockets },
      'connected',
    );
    const before = await request(server, { type: 'mem' }, 'mem');
    const started = now();
    await request(load, { type: 'subscribe', keys }, 'subscribing');
    let count = 0;
    while (now() - started < SUBSCRIBE_BUDGET_MS) {
      count = Number((await request(server, { type: 'count' }, 'count')).count);
      if (count >= keys.length) break;
      await new Promise((r) => setTimeout(r, 200));
    }
    const subscribeSeconds = (now() - started) / 1000;
    const after = await request(server, { type: 'mem' }, 'mem');
    await request(load, { type: 'reset' }, 'reset');
    const published = await request(server, { type: 'publish' }, 'published');
    await new Promise((r) => setTimeout(r, 1_000));
    const latency = await request(load, { type: 'latency' }, 'latency');
    return {
      subscriptions: count,
      bytesPerSubscription:
        (Number(after.heapUsed) +
          Number(after.external) -
          Number(before.heapUsed) -
          Number(before.external)) /
        Math.max(1, count),
      rssPerSubscription: (Number(after.rss) - Number(before.rss)) / Math.max(1, count),
      subscribeSeconds,
      p50: Number(latency.p50),
      p99: Number(latency.p99),
      received: Number(latency.received),
      sent: Number(published.sent),
    };
  } finally {
    await request(load, { type: 'close' }, 'closed', 20_000).catch(() => load.kill('SIGKILL'));
    await request(server, { type: 'close' }, 'closed', 20_000).catch(() => server.kill('SIGKILL'));
  }
}

export async function run(): Promise<BenchResult[]> {
  const bare = await measure('bare');
  const ours = await measure('ours');
  const sockets = Math.ceil(TARGET / PER_SOCKET);
  return [
    {
      name: 'concurrent subscriptions held (one server process)',
      value: ours.subscriptions,
      unit: 'subscriptions',
      baseline: bare.subscriptions,
      note: `goal ${TARGET} over ${sockets} sockets × ${PER_SOCKET}; established in ${ours.subscribeSeconds.toFixed(1)} s (bare ${bare.subscribeSeconds.toFixed(1)} s); Hasura publishes 10,000 live queries on 2 vCPU`,
    },
    {
      name: 'memory per idle subscription (heap + external)',
      value: Math.round(ours.bytesPerSubscription),
      unit: 'bytes',
      baseline: Math.round(bare.bytesPerSubscription),
      note: `goal ≤ 8 KB; RSS delta ${Math.round(ours.rssPerSubscription)} B (bare ${Math.round(bare.rssPerSubscription)} B)`,
    },
    {
      name: `publish → client latency p50 at ${EVENTS_PER_SECOND} events/s`,
      value: Number(ours.p50.toFixed(2)),
      unit: 'ms',
      baseline: Number(bare.p50.toFixed(2)),
      note: `received ${ours.received}/${ours.sent} (bare ${bare.received}/${bare.sent}); ours includes the PostgreSQL append and the Redis hop`,
    },
    {
      name: `publish → client latency p99 at ${EVENTS_PER_SECOND} events/s`,
      value: Number(ours.p99.toFixed(2)),
      unit: 'ms',
      baseline: Number(bare.p99.toFixed(2)),
      note: 'goal ≤ 50 ms',
    },
  ];
}

const role = process.argv.find((a) => a.startsWith('--role='))?.slice('--role='.length);
if (role === 'ours' || role === 'bare') {
  void serverRole(role);
} else if (role === 'load') {
  void loadRole();
} else if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  run().then(
    (results) => {
      console.table(
        results.map((r) => ({
          name: r.name,
          ours: r.value,
          bare: r.baseline,
          unit: r.unit,
          ratio: r.baseline ? Number((r.value / r.baseline).toFixed(2)) : undefined,
          note: r.note,
        })),
      );
      process.exit(0);
    },
    (error: unknown) => {
      console.error(error);
      process.exit(1);
    },
  );
}
