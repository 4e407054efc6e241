// The production topology (R-DEP-1): three server processes behind a real nginx configured with
// deploy/nginx, on one PostgreSQL and one Redis, under a steady bounded mix through the proxy:
// creates and stops, telemetry and agent events from sandbox tokens, and `accountSessions` and
// `sessionEvents` subscribers on graphql-ws's own client. The replicas restart one at a time
// (SIGTERM, the replacement started on its port and ready, next): every acknowledged write is
// stored, every answer is a success or a 503 with Retry-After, and every subscriber, resuming with
// `after`, ends with exactly the stream's events in order. Then one replica is killed with SIGKILL
// mid-provisioning: the others finish or fail its creates, serve and stop its sessions, and every
// limit slot is free again.
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { TypedDocumentNode } from '@graphql-typed-document-node/core';
import { print } from 'graphql';
import { type Client, createClient } from 'graphql-ws';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import WebSocket from 'ws';
import {
  AccountSessionsDocument,
  CreateProjectDocument,
  CreateSessionDocument,
  ReportTelemetryDocument,
  SessionEventsDocument,
  StopSessionDocument,
  UpdateAccountDocument,
} from '../generated/graphql';
import { processesWith } from '../chaos/fleet';
import { type TestDatabase, createTestDatabase } from '../support/database';
import { type TestRepo, createTestRepo } from '../support/git';
import { type NginxProcess, startNginx } from '../support/nginx-process';
import { type RedisProcess, killLocalSandboxes, startRedisProcess } from '../support/server-process';
import { type SpawnedServer, postGraphql, spawnServer, spawnServers } from '../support/spawn-server';
import { waitFor } from '../support/wait';

const REPLICAS = 3;
/** Long-lived sessions whose sandbox tokens report telemetry and agent events all along. */
const REPORTERS = 2;
/** The account's limit during the SIGKILL phase: every slot must be usable again at the end. */
const KILL_LIMIT = 4;

const REPORT_AGENT_EVENTS = `mutation ReportAgentEvents($input: ReportAgentEventsInput!) {
  reportAgentEvents(input: $input) { __typename ... on ReportAgentEventsSuccess { accepted } ... on Error { code message } } }`;

interface Answer {
  status: number;
  retryAfter: string | null;
  data: Record<string, unknown> | null | undefined;
  errors: unknown;
}

/** Every answer through the proxy that was neither a success nor a 503 with Retry-After. */
const unexpected: Array<{ what: string; status: number; body: unknown }> = [];
/** 503s with Retry-After the clients waited out and retried. */
let retried = 0;

/**
 * A client that does what a client of this API should: on 503 with Retry-After it waits that long
 * and sends the request again. Any other failure is recorded as unexpected and returned.
 */
async function call(
  url: string,
  token: string,
  what: string,
  query: string,
  variables: unknown,
): Promise<Answer> {
  for (let attempt = 1; ; attempt++) {
    let answer: Answer;
    try {
      const r = await postGraphql(url, { query, variables }, token);
      answer = {
        status: r.status,
        retryAfter: r.headers.get('retry-after'),
        data: r.json.data,
        errors: r.json.errors,
      };
    } catch (error) {
      answer = { status: 0, retryAfter: null, data: null, errors: String(error) };
    }
    if (answer.status === 503 && answer.retryAfter !== null && attempt < 20) {
      retried++;
      await new Promise((resolve) => setTimeout(resolve, Number(answer.retryAfter) * 1000));
      continue;
    }
    if (answer.status !== 200 || answer.errors) {
      unexpected.push({ what, status: answer.status, body: answer.errors ?? answer.data });
    }
    return answer;
  }
}

/**
 * A subscriber through the proxy: a new graphql-ws client per attempt; whenever the stream ends
 * (its replica went away) it subscribes again with `after` = the last seq it received.
 */
interface Follower {
  seqs: number[];
  values: Array<Record<string, unknown>>;
  interruptions: number;
  close(): void;
}

function follow<T, V>(
  wsUrl: string,
  token: string,
  doc: TypedDocumentNode<T, V>,
  variables: (after: number) => V,
): Follower {
  const follower: Follower = { seqs: [], values: [], interruptions: 0, close: () => {} };
  let closed = false;
  let client: Client | null = null;
  const attempt = () => {
    if (closed) return;
    const own = createClient({
      url: wsUrl,
      webSocketImpl: WebSocket,
      connectionParams: { authorization: token },
      retryAttempts: 0,
    });
    client = own;
    let ended = false;
    const end = () => {
      if (ended) return;
      ended = true;
      follower.interruptions++;
      void own.dispose();
      if (!closed) setTimeout(attempt, 100);
    };
    own.subscribe(
      { query: print(doc), variables: variables(follower.seqs.at(-1) ?? 0) as Record<string, unknown> },
      {
        next: (value) => {
          if (value.errors?.length) return end();
          follower.seqs.push(Number((value.extensions as { seq?: number } | undefined)?.seq));
          follower.values.push(value.data as Record<string, unknown>);
        },
        error: end,
        complete: end,
      },
    );
  };
  attempt();
  follower.close = () => {
    closed = true;
    void client?.dispose();
  };
  return follower;
}

/** SINGULACOMP_TOKEN of the sandbox process of a session (LOCAL, unisolated: its environment). */
function sandboxToken(marker: string, sessionId: string): string | null {
  for (const pid of processesWith(marker)) {
    let environ = '';
    try {
      environ = readFileSync(`/proc/${pid}/environ`, 'utf8');
    } catch {
      continue;
    }
    const vars = new Map(
      environ
        .split('\0')
        .map((entry) => [entry.slice(0, entry.indexOf('=')), entry.slice(entry.indexOf('=') + 1)]),
    );
    if (vars.get('SINGULACOMP_SESSION_ID') === sessionId) return vars.get('SINGULACOMP_TOKEN') ?? null;
  }
  return null;
}

describe('three replicas behind nginx', { timeout: 600_000 }, () => {
  const marker = `sleep ${1600 + Math.floor(Math.random() * 900)}`;
  let database: TestDatabase;
  let redis: RedisProcess;
  let dataDir: string;
  let repo: TestRepo;
  const servers: SpawnedServer[] = [];
  const retired: SpawnedServer[] = [];
  let nginx: NginxProcess;
  let sql: pg.Client;
  let adminToken: string;
  let projectId: string;
  let accountId: string;
  const followers: Follower[] = [];

  // One data dir for every replica, as a single host configures: LOCAL sandboxes live on this
  // host, so any replica can stop any of them.
  const serverOptions = () => ({
    databaseUrl: database.url,
    redisUrl: redis.url,
    dataDir,
    startTimeoutMs: 180_000,
    env: {
      SINGULACOMP_LOCAL_ENTRY: `exec ${marker}`,
      SINGULACOMP_LOCAL_ISOLATION: 'none',
      SINGULACOMP_PROVISIONING_RESUME_MS: '5000',
      SINGULACOMP_RECOVERY_INTERVAL_MS: '2000',
      SINGULACOMP_JOB_HEARTBEAT_SECONDS: '10',
    },
  });
  const api = (what: string, query: string, variables: unknown, token = adminToken) =>
    call(nginx.graphqlUrl, token, what, query, variables);
  const count = async (query: string, params: unknown[] = []) =>
    Number((await sql.query<{ n: number }>(query, params)).rows[0]?.n ?? 0);
  const cursor = async (topic: string, key: string) =>
    count(`SELECT "seq" AS n FROM "RealtimeCursor" WHERE "topic" = $1 AND "key" = $2`, [topic, key]);

  beforeAll(async () => {
    database = await createTestDatabase('sc_topology');
    redis = await startRedisProcess();
    dataDir = mkdtempSync(join(tmpdir(), 'sc-topology-'));
    repo = createTestRepo({ 'README.md': '# topology\n' });
    // The first creates the bootstrap admin; the others start together.
    servers.push(await spawnServer(serverOptions()));
    servers.push(...(await spawnServers([serverOptions(), serverOptions()])));
    adminToken = servers[0]!.bootstrapToken()!;
    nginx = await startNginx(servers.map((s) => s.port));
    sql = new pg.Client({ connectionString: database.url });
    await sql.connect();
    const limited = await postGraphql(
      nginx.graphqlUrl,
      { query: print(UpdateAccountDocument), variables: { input: { concurrentSessionLimit: 100 } } },
      adminToken,
    );
    expect(limited.json.errors).toBeUndefined();
    const created = await postGraphql(
      nginx.graphqlUrl,
      {
        query: print(CreateProjectDocument),
        variables: { input: { name: 'topology', repositoryUrl: repo.url } },
      },
      adminToken,
    );
    projectId = (created.json.data!.createProject as { project: { id: string } }).project.id;
    accountId = (await sql.query('SELECT "accountId" FROM "Project" LIMIT 1')).rows[0].accountId;
  }, 600_000);

  afterAll(async () => {
    for (const f of followers) f.close();
    await sql?.end().catch(() => undefined);
    await nginx?.stop();
    await Promise.all([...servers, ...retired].map((s) => s.stop()));
    if (dataDir) killLocalSandboxes(dataDir);
    for (const pid of processesWith(marker)) {
      try {
        process.kill(pid, 'SIGKILL');
      } catch {}
    }
    await redis?.stop();
    await database?.drop();
    if (dataDir) rmSync(dataDir, { recursive: true, force: true });
    repo?.remove();
  });

  const createSession = async (prompt: string): Promise<string | null> => {
    const r = await api('createSession', print(CreateSessionDocument), { input: { projectId, prompt } });
    return (
      (r.data?.createSession as { session?: { sessionId: string } } | undefined)?.session?.sessionId ?? null
    );
  };
  const stopSession = async (sessionId: string): Promise<boolean> => {
    const r = await api('stopSession', print(StopSessionDocument), { input: { sessionId } });
    return (r.data?.stopSession as { __typename?: string } | undefined)?.__typename === 'StopSessionSuccess';
  };
  const running = (sessionId: string) =>
    waitFor(
      async () =>
        (await sql.query(`SELECT 1 FROM "Session" WHERE id = $1 AND status = 'RUNNING'`, [sessionId]))
          .rowCount === 1 && sandboxToken(marker, sessionId),
      { timeoutMs: 60_000, what: `session ${sessionId} RUNNING with its sandbox process` },
    );
  const sandboxOf = async (sessionId: string) =>
    (await sql.query(`SELECT id FROM "Sandbox" WHERE "sessionId" = $1`, [sessionId])).rows[0].id as string;

  test('a rolling restart under load loses no acknowledged write and no subscribed event', async () => {
    // Long-lived sessions whose sandbox tokens report through the proxy.
    const reporters: Array<{ sessionId: string; sandboxId: string; token: string }> = [];
    for (let i = 0; i < REPORTERS; i++) {
      const sessionId = (await createSession(`reporter ${i}`))!;
      expect(sessionId).toBeTruthy();
      const token = await running(sessionId);
      reporters.push({ sessionId, sandboxId: await sandboxOf(sessionId), token });
    }
    const accountFollowers = [0, 1].map(() =>
      follow(nginx.wsUrl, adminToken, AccountSessionsDocument, (after) => ({ after })),
    );
    const eventFollowers = reporters.map((r) =>
      follow(nginx.wsUrl, adminToken, SessionEventsDocument, (after) => ({ sessionId: r.sessionId, after })),
    );
    followers.push(...accountFollowers, ...eventFollowers);

    // The mix: three sequential loops, so the load stays bounded.
    let mixing = true;
    const churn = { created: [] as string[], stopped: [] as string[], cycles: 0 };
    const telemetry = new Map<string, { acked: number; sent: number }>(
      reporters.map((r) => [r.sandboxId, { acked: 0, sent: 0 }]),
    );
    const deltas = new Map<string, { acked: string[]; sent: number }>(
      reporters.map((r) => [r.sessionId, { acked: [], sent: 0 }]),
    );
    const loops = [
      (async () => {
        while (mixing) {
          const id = await createSession(`churn ${churn.cycles}`);
          if (id) {
            churn.created.push(id);
            if (await stopSession(id)) churn.stopped.push(id);
          }
          churn.cycles++;
        }
      })(),
      (async () => {
        for (let i = 0; mixing; i++) {
          const r = reporters[i % reporters.length]!;
          const t = telemetry.get(r.sandboxId)!;
          t.sent++;
          const answer = await api(
            'reportTelemetry',
            print(ReportTelemetryDocument),
            {
              input: {
                sandboxId: r.sandboxId,
                reason: 'INTERVAL',
                memoryUsedBytes: 1e8 + i,
                memoryLimitBytes: 4e9,
                load1: 0.5,
                diskUsedBytes: 1e9,
                diskTotalBytes: 2e10,
                daemonRssBytes: 3e7,
                opencodeRssBytes: 2e8,
              },
            },
            r.token,
          );
          if (
            (answer.data?.reportTelemetry as { __typename?: string } | undefined)?.__typename ===
            'ReportTelemetrySuccess'
          )
            t.acked++;
        }
      })(),
      (async () => {
        for (let i = 0; mixing; i++) {
          const r = reporters[i % reporters.length]!;
          const d = deltas.get(r.sessionId)!;
          const delta = `d${d.sent++}`;
          const event = {
            type: 'message.part.delta',
            properties: { sessionID: 'oc', messageID: 'm1', partID: 'p1', field: 'text', delta },
          };
          const answer = await api(
            'reportAgentEvents',
            REPORT_AGENT_EVENTS,
            { input: { sessionId: r.sessionId, events: [JSON.stringify(event)] } },
            r.token,
          );
          if ((answer.data?.reportAgentEvents as { accepted?: number } | undefined)?.accepted === 1)
            d.acked.push(delta);
        }
      })(),
    ];
    const progressed = async (cycles: number) => {
      const from = churn.cycles;
      await waitFor(() => churn.cycles >= from + cycles, {
        timeoutMs: 120_000,
        what: `${cycles} churn cycles`,
      });
    };
    await progressed(2);

    // The rolling restart: SIGTERM, the replacement ready on the same port, next.
    const exitCodes: Array<number | null> = [];
    for (let i = 0; i < REPLICAS; i++) {
      const old = servers[i]!;
      const exited = new Promise<number | null>((resolve) =>
        old.process.once('exit', (code) => resolve(code)),
      );
      old.process.kill('SIGTERM');
      exitCodes.push(await exited);
      retired.push(old);
      // In place, on the same port: nginx's upstream list stays as it is (a reload would close its
      // idle client connections under the clients, which is nginx's behaviour, not the servers').
      const fresh = await spawnServer({ ...serverOptions(), port: old.port });
      servers[i] = fresh;
      await waitFor(async () => (await fresh.readyz()).status === 200, {
        timeoutMs: 60_000,
        what: 'replacement ready',
      });
      await progressed(2);
    }
    mixing = false;
    await Promise.all(loops);

    // Every replica drained and exited cleanly; every answer was a success or a 503 with Retry-After.
    expect(exitCodes).toEqual([0, 0, 0]);
    expect(unexpected).toEqual([]);

    // Every acknowledged write is stored.
    expect(churn.created.length).toBeGreaterThanOrEqual(2 * (REPLICAS + 1));
    expect(churn.stopped).toEqual(churn.created);
    const stored = await sql.query<{ status: string; n: number }>(
      'SELECT status::text, count(*)::int AS n FROM "Session" WHERE id = ANY($1::uuid[]) GROUP BY status',
      [churn.created],
    );
    expect(stored.rows).toEqual([{ status: 'STOPPED', n: churn.created.length }]);
    for (const [sandboxId, t] of telemetry) {
      const samples = await count(`SELECT count(*)::int AS n FROM "TelemetrySample" WHERE "sandboxId" = $1`, [
        sandboxId,
      ]);
      expect(t.acked).toBeGreaterThan(0);
      expect(samples).toBeGreaterThanOrEqual(t.acked);
      expect(samples).toBeLessThanOrEqual(t.sent);
    }

    // Every subscriber was cut off by a restart, resumed with `after`, and ends with exactly the
    // stream's events in order; the agent-event stream holds every acknowledged delta, in order.
    const accountLast = await cursor('accountSessions', accountId);
    for (const f of accountFollowers) {
      await waitFor(() => f.seqs.at(-1) === accountLast, {
        timeoutMs: 60_000,
        what: 'accountSessions caught up',
      });
      expect(f.interruptions).toBeGreaterThan(0);
      expect(f.seqs).toEqual(Array.from({ length: accountLast }, (_, i) => i + 1));
    }
    for (const [i, r] of reporters.entries()) {
      const f = eventFollowers[i]!;
      const last = await cursor('sessionEvents', r.sessionId);
      await waitFor(() => f.seqs.at(-1) === last, { timeoutMs: 60_000, what: 'sessionEvents caught up' });
      expect(f.interruptions).toBeGreaterThan(0);
      expect(f.seqs).toEqual(Array.from({ length: last }, (_, j) => j + 1));
      const received = f.values.map((v) => (v.sessionEvents as { delta: string }).delta);
      const acked = deltas.get(r.sessionId)!.acked;
      expect(acked.length).toBeGreaterThan(0);
      // Unacknowledged reports may have been stored too; the acknowledged ones all are, in order.
      expect(received.filter((d) => acked.includes(d))).toEqual(acked);
    }
    console.log(
      `rolling restart: ${churn.cycles} create/stop cycles, ${[...telemetry.values()].reduce((n, t) => n + t.acked, 0)} telemetry reports, ${[...deltas.values()].reduce((n, d) => n + d.acked.length, 0)} agent-event reports, ${retried} answers 503 + Retry-After (retried)`,
    );

    for (const r of reporters) expect(await stopSession(r.sessionId)).toBe(true);
  });

  test('a replica killed with SIGKILL: the others finish its creates, serve and stop its sessions, and free every slot', async () => {
    const limited = await api('updateAccount', print(UpdateAccountDocument), {
      input: { concurrentSessionLimit: KILL_LIMIT },
    });
    expect(limited.errors).toBeUndefined();
    const live = () =>
      count(`SELECT count(*)::int AS n FROM "Session" WHERE status IN ('PROVISIONING', 'RUNNING')`);
    await waitFor(
      async () => {
        const { rows } = await sql.query<{ id: string }>(`SELECT id FROM "Session" WHERE status = 'RUNNING'`);
        for (const { id } of rows) await stopSession(id);
        return (await live()) === 0;
      },
      { timeoutMs: 60_000, what: 'no live session' },
    );
    unexpected.length = 0;
    const victim = servers[0]!;
    const onVictim = (prompt: string) =>
      call(victim.graphqlUrl, adminToken, 'create on the victim', print(CreateSessionDocument), {
        input: { projectId, prompt },
      });
    // Two sessions the victim created and runs, then two creates it is still provisioning.
    const runningIds: string[] = [];
    for (const prompt of ['victim 0', 'victim 1']) {
      const r = await onVictim(prompt);
      const id = (r.data!.createSession as { session: { sessionId: string } }).session.sessionId;
      await running(id);
      runningIds.push(id);
    }
    const before = await count(`SELECT count(*)::int AS n FROM "Session"`);
    const interrupted = [onVictim('victim 2'), onVictim('victim 3')].map((p) => p.catch(() => null));
    await waitFor(async () => (await count(`SELECT count(*)::int AS n FROM "Session"`)) > before, {
      timeoutMs: 60_000,
      intervalMs: 5,
      what: 'a create admitted by the victim',
    });
    victim.process.kill('SIGKILL');
    await Promise.all(interrupted);
    unexpected.length = 0;

    // The others resume or fail every create it left provisioning.
    await waitFor(
      async () =>
        (await count(`SELECT count(*)::int AS n FROM "Session" WHERE status = 'PROVISIONING'`)) === 0,
      { timeoutMs: 90_000, what: 'no session PROVISIONING' },
    );
    // Its running sessions are served through the proxy: their sandboxes report, users stop them.
    const { rows } = await sql.query<{ id: string }>(`SELECT id FROM "Session" WHERE status = 'RUNNING'`);
    expect(rows.map((r) => r.id)).toEqual(expect.arrayContaining(runningIds));
    for (const { id } of rows) {
      const token = await running(id);
      const answer = await api(
        'reportTelemetry',
        print(ReportTelemetryDocument),
        {
          input: {
            sandboxId: await sandboxOf(id),
            reason: 'INTERVAL',
            memoryUsedBytes: 1e8,
            memoryLimitBytes: 4e9,
            load1: 0.1,
            diskUsedBytes: 1e9,
            diskTotalBytes: 2e10,
            daemonRssBytes: 3e7,
            opencodeRssBytes: 2e8,
          },
        },
        token,
      );
      expect((answer.data!.reportTelemetry as { __typename: string }).__typename).toBe(
        'ReportTelemetrySuccess',
      );
      expect(await stopSession(id)).toBe(true);
    }
    await waitFor(async () => processesWith(marker).length === 0, {
      timeoutMs: 60_000,
      what: 'no sandbox process',
    });
    expect(await live()).toBe(0);

    // No slot stays held: the account can run its whole limit again, through the proxy.
    const fresh: string[] = [];
    for (let i = 0; i < KILL_LIMIT; i++) fresh.push((await createSession(`after ${i}`))!);
    expect(fresh.every((id) => typeof id === 'string')).toBe(true);
    for (const id of fresh) expect(await stopSession(id)).toBe(true);
    expect(unexpected).toEqual([]);
    await waitFor(
      async () =>
        (await count(
          `SELECT count(*)::int AS n FROM pgboss.job WHERE state IN ('created', 'retry', 'active')`,
        )) === 0,
      { timeoutMs: 60_000, what: 'no job pending' },
    );
    // The subscribers still follow the account's stream to its end, every event once and in order.
    const last = await cursor('accountSessions', accountId);
    for (const f of followers.slice(0, 2)) {
      await waitFor(() => f.seqs.at(-1) === last, { timeoutMs: 60_000, what: 'accountSessions caught up' });
      expect(f.seqs).toEqual(Array.from({ length: last }, (_, i) => i + 1));
    }
  });
});
