// Redis killed and restarted under load: two server processes take a stream of createSession /
// stopSession calls through both of them while a subscriber on each follows the account's session
// stream. Every acknowledged write is stored, /readyz answers 503 during the outage and 200 after,
// each subscriber is told (PUBSUB_UNAVAILABLE), resumes with `after` and ends with every seq exactly
// once and in order, and nothing is left provisioning, queued or running.
import { print } from 'graphql';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { AccountSessionsDocument, CreateSessionDocument, StopSessionDocument } from '../generated/graphql';
import type { SpawnedServer } from '../support/spawn-server';
import { waitFor } from '../support/wait';
import { type Socket, openSocket } from '../realtime/helpers';
import { type ChaosFleet, startChaosFleet } from './fleet';

const CYCLES = 18;

/** A subscriber that resumes with `after` whenever its stream ends, as a client should. */
interface Follower {
  seqs: number[];
  /** Error codes that ended a stream (or refused a resume). */
  interruptions: string[];
  close(): void;
}

function follow(socket: Socket): Follower {
  const follower: Follower = { seqs: [], interruptions: [], close: () => {} };
  let closed = false;
  let unsubscribe = () => {};
  const resume = () => {
    if (closed) return;
    let ended = false;
    const end = (code: string) => {
      if (ended) return;
      ended = true;
      follower.interruptions.push(code);
      // Retry until the server takes the subscription again (it refuses while Redis is down).
      setTimeout(resume, 200);
    };
    unsubscribe = socket.client.subscribe(
      { query: print(AccountSessionsDocument), variables: { after: follower.seqs.at(-1) ?? 0 } },
      {
        next: (value) => {
          if (value.errors?.length) {
            end(String(value.errors[0]?.extensions?.code ?? value.errors[0]?.message));
            return;
          }
          follower.seqs.push(Number((value.extensions as { seq?: number } | undefined)?.seq));
        },
        error: (error) => {
          const first = Array.isArray(error) ? error[0] : error;
          end(String((first as { extensions?: { code?: string } })?.extensions?.code ?? first));
        },
        complete: () => end('COMPLETE'),
      },
    );
  };
  resume();
  follower.close = () => {
    closed = true;
    unsubscribe();
  };
  return follower;
}

describe('a Redis restart under load', { timeout: 300_000 }, () => {
  let fleet: ChaosFleet;
  let accountId: string;
  const sockets: Socket[] = [];
  const followers: Follower[] = [];

  beforeAll(async () => {
    fleet = await startChaosFleet({ name: 'redis', redis: true, markSandboxes: true, limit: 100 });
    accountId = (await fleet.sql.query('SELECT "accountId" FROM "Project" LIMIT 1')).rows[0].accountId;
  }, 600_000);

  afterAll(async () => {
    for (const f of followers) f.close();
    for (const s of sockets) await s.dispose();
    await fleet?.stop();
  });

  const cursor = async () => {
    const { rows } = await fleet.sql.query(
      `SELECT "seq" FROM "RealtimeCursor" WHERE "topic" = 'accountSessions' AND "key" = $1`,
      [accountId],
    );
    return rows[0] ? Number(rows[0].seq) : 0;
  };
  const readyz = async () => Promise.all(fleet.servers.map(async (s) => (await s.readyz()).status));

  test('writes are stored, subscribers resume with every event exactly once in order, /readyz goes 503 and back, nothing is stuck', async () => {
    for (const server of fleet.servers) {
      const socket = openSocket(server.wsUrl, fleet.adminToken);
      sockets.push(socket);
      followers.push(follow(socket));
    }
    await waitFor(async () => sockets.every((s) => s.connected), 20_000);

    // The stream of writes: a create and a stop per cycle, alternating processes.
    const created: string[] = [];
    const stopped: string[] = [];
    const failures: unknown[] = [];
    let cycle = 0;
    const server = (i: number): SpawnedServer => fleet.servers[i % 2]!;
    const writer = (async () => {
      for (; cycle < CYCLES; cycle++) {
        const c = await fleet.post(server(cycle), CreateSessionDocument, {
          input: { projectId: fleet.projectId, prompt: `redis ${cycle}` },
        });
        const session = (c.json.data?.createSession as { session?: { sessionId: string } } | undefined)
          ?.session;
        if (!session) {
          failures.push({ cycle, status: c.status, body: c.json });
          continue;
        }
        created.push(session.sessionId);
        const s = await fleet.post(server(cycle + 1), StopSessionDocument, {
          input: { sessionId: session.sessionId },
        });
        if (
          (s.json.data?.stopSession as { __typename?: string } | undefined)?.__typename ===
          'StopSessionSuccess'
        )
          stopped.push(session.sessionId);
        else failures.push({ cycle, status: s.status, body: s.json });
      }
    })();

    await waitFor(async () => cycle >= 4, 120_000);
    await fleet.redis!.kill();
    // Both processes notice and say so on /readyz while writes go on.
    await waitFor(async () => (await readyz()).every((status) => status === 503), 20_000);
    const during = await Promise.all(fleet.servers.map((s) => s.readyz()));
    for (const r of during) expect(r.body).toMatchObject({ pubsub: false, database: true });
    const killedAtCycle = cycle;
    await waitFor(async () => cycle >= killedAtCycle + 5, 120_000);
    expect((await readyz()).every((status) => status === 503)).toBe(true);

    await fleet.redis!.restart();
    await waitFor(async () => (await readyz()).every((status) => status === 200), 20_000);
    await writer;

    // Every acknowledged write is stored.
    expect(failures).toEqual([]);
    expect(created).toHaveLength(CYCLES);
    expect(stopped).toEqual(created);
    const { rows } = await fleet.sql.query<{ status: string; n: number }>(
      'SELECT status::text, count(*)::int AS n FROM "Session" WHERE id = ANY($1::uuid[]) GROUP BY status',
      [created],
    );
    expect(rows).toEqual([{ status: 'STOPPED', n: CYCLES }]);

    // Each subscriber was interrupted by the outage and, resuming with `after`, ends with every
    // seq of the account's stream exactly once and in order.
    const last = await cursor();
    expect(last).toBeGreaterThanOrEqual(CYCLES * 2);
    await waitFor(async () => followers.every((f) => f.seqs.at(-1) === last), 60_000);
    for (const f of followers) {
      expect(f.interruptions).toContain('PUBSUB_UNAVAILABLE');
      expect(f.seqs).toEqual(Array.from({ length: last }, (_, i) => i + 1));
    }

    // Nothing is stuck: no session provisioning, no job pending, no sandbox process left.
    await waitFor(async () => {
      const live = await fleet.sql.query<{ n: number }>(
        `SELECT count(*)::int AS n FROM "Session" WHERE status IN ('PROVISIONING', 'RUNNING')`,
      );
      const jobs = await fleet.sql.query<{ n: number }>(
        `SELECT count(*)::int AS n FROM pgboss.job WHERE state IN ('created', 'retry', 'active')`,
      );
      return live.rows[0]?.n === 0 && jobs.rows[0]?.n === 0;
    }, 60_000);
    await waitFor(async () => fleet.sandboxProcesses().length === 0, 30_000);
    expect(fleet.sandboxProcesses()).toEqual([]);
    expect((await readyz()).every((status) => status === 200)).toBe(true);
  });
});
