// Execution leases and the idle reaper against real PostgreSQL and a real server: fencing, one stop
// across concurrent reapers, passive traffic, capability checks and the provider keep-alive.
import { createClient } from 'graphql-ws';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import WebSocket from 'ws';
import type { StopReason } from '../../prisma/generated/client/enums';
import { createReaper } from '../../resolvers/leases/reaper';
import type { Principal } from '../../resolvers/auth/principal';
import { createTelemetryService } from '../../resolvers/daemon/telemetry';
import {
  AgentSessionDocument,
  ClaimBootstrapDocument,
  ReleaseLeaseDocument,
  ReloadSessionDocument,
  RenewLeaseDocument,
  ReportReloadPhaseDocument,
  ReportRuntimeStateDocument,
  ReportTelemetryDocument,
} from '../generated/graphql';
import { type TestApp, startTestApp } from '../support/app';
import { createTestRepo } from '../support/git';
import { streamStarted, waitFor } from '../support/wait';
import { type LiveSession, createProject, recordingProvider, startSession } from './helpers';

const IDLE_MS = 60_000;

/** The principal a session's sandbox token authenticates as, for calling the telemetry service directly. */
function sandboxPrincipal(s: { sessionId: string; sandboxId: string }): Principal {
  return { kind: 'SANDBOX', sessionId: s.sessionId, sandboxId: s.sandboxId, accountId: '' } as never;
}
const TTL_MS = 180_000;

for (const db of ['postgres', 'pglite'] as const) {
  describe(`execution leases and the idle reaper on ${db}`, () => {
    let t: TestApp;
    let projectId: string;
    let cloudProjectId: string;
    const cloud = recordingProvider('DAYTONA');
    const repo = createTestRepo({ 'README.md': '# leases\n' });

    beforeAll(async () => {
      t = await startTestApp({
        db,
        providers: [cloud.provider],
        env: {
          SINGULACOMP_IDLE_TIMEOUT_MS: String(IDLE_MS),
          SINGULACOMP_LEASE_TTL_MS: String(TTL_MS),
          // The server's own reaper stays out of the way; tests drive reapers with their own clocks.
          SINGULACOMP_REAPER_INTERVAL_MS: String(3_600_000),
        },
      });
      projectId = await createProject(t, repo.url);
      cloudProjectId = await createProject(t, repo.url, 'DAYTONA');
    });
    afterAll(async () => t?.stop());

    /** A reaper on the server's database whose clock runs `aheadMs` in the future; records its stops. */
    function reaperAt(aheadMs: number, options: { singleton?: boolean; bootTimeoutMs?: number } = {}) {
      const stops: Array<{ sessionId: string; reason: StopReason }> = [];
      const reaper = createReaper({
        db: t.app.services.db,
        logger: t.app.services.logger,
        idleTimeoutMs: IDLE_MS,
        bootTimeoutMs: options.bootTimeoutMs,
        intervalMs: 3_600_000,
        singleton: options.singleton,
        now: () => Date.now() + aheadMs,
        stop: async (sessionId, reason) => {
          const stopped = await t.app.services.sessions.stopInternal(sessionId, reason);
          if (stopped) stops.push({ sessionId, reason });
          return stopped;
        },
      });
      return { reaper, stops };
    }

    async function renew(s: LiveSession, generation?: number, token: string | null = s.token) {
      return t.request(RenewLeaseDocument, { input: { sessionId: s.sessionId, generation } }, token);
    }

    async function lease(s: LiveSession) {
      return t.app.services.db.executionLease.findUnique({ where: { sandboxId: s.sandboxId } });
    }

    async function session(s: LiveSession) {
      return t.app.services.db.session.findUniqueOrThrow({ where: { id: s.sessionId } });
    }

    test('acquire, renew, stale and released generations follow the contract', async () => {
      const s = await startSession(t, projectId);
      const first = await renew(s);
      expect(first.data?.renewLease).toMatchObject({
        __typename: 'RenewLeaseSuccess',
        lease: { generation: 1 },
      });
      const acquired = await lease(s);
      expect(acquired?.releasedAt).toBeNull();
      expect(acquired!.expiresAt.getTime() - acquired!.renewedAt.getTime()).toBe(TTL_MS);

      const again = await renew(s, 1);
      expect(again.data?.renewLease).toMatchObject({ lease: { generation: 1 } });
      const renewed = await lease(s);
      expect(renewed!.acquiredAt.getTime()).toBe(acquired!.acquiredAt.getTime());
      expect(renewed!.expiresAt.getTime()).toBeGreaterThanOrEqual(acquired!.expiresAt.getTime());

      const stale = await renew(s, 7);
      expect(stale.data?.renewLease).toMatchObject({
        __typename: 'LeaseFencedError',
        code: 'LEASE_FENCED',
        field: ['input', 'generation'],
      });

      // A restarted daemon that lost its generation takes over with a new one, fencing the old holder.
      expect((await renew(s)).data?.renewLease).toMatchObject({ lease: { generation: 2 } });
      expect((await renew(s, 1)).data?.renewLease).toMatchObject({ code: 'LEASE_FENCED' });

      const released = await t.request(
        ReleaseLeaseDocument,
        { input: { sessionId: s.sessionId, generation: 2 } },
        s.token,
      );
      expect(released.data?.releaseLease).toMatchObject({
        __typename: 'ReleaseLeaseSuccess',
        lease: { generation: 2 },
      });
      expect((await lease(s))?.releasedAt).not.toBeNull();
      // The released generation given back acquires the next one.
      expect((await renew(s, 2)).data?.renewLease).toMatchObject({
        lease: { generation: 3, releasedAt: null },
      });

      // An expired generation cannot be renewed: the daemon must acquire again.
      await t.app.services.db.executionLease.update({
        where: { sandboxId: s.sandboxId },
        data: { expiresAt: new Date(Date.now() - 1_000) },
      });
      expect((await renew(s, 3)).data?.renewLease).toMatchObject({ code: 'LEASE_FENCED' });
      expect((await renew(s)).data?.renewLease).toMatchObject({ lease: { generation: 4 } });

      const view = await t.request(AgentSessionDocument, { id: s.sessionId });
      const stored = await lease(s);
      expect(view.data?.session?.sandbox?.leaseExpiresAt).toBe(stored!.expiresAt.toISOString());
      expect(view.data?.session?.sandbox?.keptAliveBecause).toContain('generation 4');
      expect(view.data?.session?.lease).toMatchObject({ generation: 4, live: true });
    });

    test('an acquire retried with its key answers the generation it took; any other acquire moves it on', async () => {
      const s = await startSession(t, projectId);
      const acquire = (acquisition?: string, generation?: number) =>
        t.request(
          RenewLeaseDocument,
          { input: { sessionId: s.sessionId, generation, acquisition } },
          s.token,
        );

      // The first attempt was applied but its answer lost: the retry with the same key gets it again.
      expect((await acquire('first-try')).data?.renewLease).toMatchObject({ lease: { generation: 1 } });
      const taken = await lease(s);
      expect(taken).toMatchObject({ generation: 1, holder: 'daemon:first-try', releasedAt: null });
      expect((await acquire('first-try')).data?.renewLease).toMatchObject({ lease: { generation: 1 } });
      const retried = await lease(s);
      expect(retried).toMatchObject({ generation: 1, holder: 'daemon:first-try' });
      expect(retried!.acquiredAt.getTime()).toBe(taken!.acquiredAt.getTime());
      expect(retried!.renewedAt.getTime()).toBeGreaterThanOrEqual(taken!.renewedAt.getTime());
      // Given with a generation, the key changes nothing: a renewal keeps generation and holder.
      expect((await acquire('someone-else', 1)).data?.renewLease).toMatchObject({ lease: { generation: 1 } });
      expect(await lease(s)).toMatchObject({ generation: 1, holder: 'daemon:first-try' });

      // Another key (a restarted daemon), and then the old key arriving late: each is a new acquire.
      expect((await acquire('restarted')).data?.renewLease).toMatchObject({ lease: { generation: 2 } });
      expect((await acquire('first-try')).data?.renewLease).toMatchObject({ lease: { generation: 3 } });
      // Without a key an acquire always moves the generation on.
      expect((await acquire()).data?.renewLease).toMatchObject({ lease: { generation: 4 } });
      expect((await acquire()).data?.renewLease).toMatchObject({ lease: { generation: 5 } });
      expect(await lease(s)).toMatchObject({ generation: 5, holder: 'daemon' });

      // A released or expired lease is not kept for its key.
      expect((await acquire('turn-6')).data?.renewLease).toMatchObject({ lease: { generation: 6 } });
      await t.request(ReleaseLeaseDocument, { input: { sessionId: s.sessionId, generation: 6 } }, s.token);
      expect((await acquire('turn-6')).data?.renewLease).toMatchObject({
        lease: { generation: 7, releasedAt: null },
      });
      await t.app.services.db.executionLease.update({
        where: { sandboxId: s.sandboxId },
        data: { expiresAt: new Date(Date.now() - 1_000) },
      });
      expect((await acquire('turn-6')).data?.renewLease).toMatchObject({ lease: { generation: 8 } });

      // A malformed key is refused and changes nothing.
      const before = await lease(s);
      for (const bad of ['', 'has space', 'x'.repeat(65), 'daemon:nested']) {
        const refused = await acquire(bad);
        expect(refused.data?.renewLease).toMatchObject({
          __typename: 'ValidationError',
          field: ['input', 'acquisition'],
        });
      }
      expect(await lease(s)).toEqual(before);
    });

    test('a sandbox token cannot touch another session’s lease or telemetry, and users cannot call daemon mutations', async () => {
      const a = await startSession(t, projectId);
      const b = await startSession(t, projectId);
      const cross = await renew(b, undefined, a.token);
      expect(cross.errors?.[0]?.extensions?.code).toBe('FORBIDDEN');
      const crossRelease = await t.request(
        ReleaseLeaseDocument,
        { input: { sessionId: b.sessionId, generation: 1 } },
        a.token,
      );
      expect(crossRelease.errors?.[0]?.extensions?.code).toBe('FORBIDDEN');
      const crossTelemetry = await t.request(
        ReportTelemetryDocument,
        {
          input: {
            sandboxId: b.sandboxId,
            memoryUsedBytes: 1,
            memoryLimitBytes: 2,
            load1: 0,
            diskUsedBytes: 1,
            diskTotalBytes: 2,
            daemonRssBytes: 1,
            opencodeRssBytes: 1,
            reason: 'INTERVAL',
          },
        },
        a.token,
      );
      expect(crossTelemetry.errors?.[0]?.extensions?.code).toBe('FORBIDDEN');
      expect(await lease(b)).toBeNull();
      expect(await t.app.services.db.telemetrySample.count({ where: { sandboxId: b.sandboxId } })).toBe(0);

      const asUser = await renew(a, undefined, t.adminToken);
      expect(asUser.errors?.[0]?.extensions?.code).toBe('FORBIDDEN');
      const claimAsUser = await t.request(ClaimBootstrapDocument, {}, t.adminToken);
      expect(claimAsUser.errors?.[0]?.extensions?.code).toBe('FORBIDDEN');
      const anonymous = await renew(a, undefined, null);
      expect(anonymous.errors?.[0]?.extensions?.code).toBe('UNAUTHENTICATED');
      expect(await lease(a)).toBeNull();
    });

    test('every renewal touches the provider, and a failing keep-alive does not fail the renewal', async () => {
      const s = await startSession(t, cloudProjectId);
      const sandbox = await t.app.services.db.sandbox.findUniqueOrThrow({ where: { id: s.sandboxId } });
      expect(sandbox.provider).toBe('DAYTONA');
      const before = cloud.keepAlives.length;
      expect((await renew(s)).data?.renewLease).toMatchObject({ lease: { generation: 1 } });
      expect((await renew(s, 1)).data?.renewLease).toMatchObject({ lease: { generation: 1 } });
      expect(cloud.keepAlives.slice(before)).toEqual([sandbox.providerSandboxId, sandbox.providerSandboxId]);

      cloud.state.failKeepAlive = true;
      try {
        const renewed = await renew(s, 1);
        expect(renewed.data?.renewLease).toMatchObject({ __typename: 'RenewLeaseSuccess' });
        expect(cloud.keepAlives.slice(before)).toHaveLength(3);
      } finally {
        cloud.state.failKeepAlive = false;
      }
    });

    test('a reaper holding an old generation cannot stop a sandbox that was renewed in between', async () => {
      const s = await startSession(t, projectId);
      expect((await renew(s)).data?.renewLease).toMatchObject({ lease: { generation: 1 } });
      await t.request(ReleaseLeaseDocument, { input: { sessionId: s.sessionId, generation: 1 } }, s.token);

      const { reaper, stops } = reaperAt(IDLE_MS + 5_000);
      const candidate = (await reaper.findCandidates()).find((c) => c.sessionId === s.sessionId);
      expect(candidate).toMatchObject({ generation: 1, reason: 'IDLE_REAPED' });

      // A turn starts before the (stale) reaper acts on what it read.
      expect((await renew(s)).data?.renewLease).toMatchObject({ lease: { generation: 2 } });
      expect(await reaper.reap(candidate!)).toBe(false);
      expect((await session(s)).status).toBe('RUNNING');
      expect(await lease(s)).toMatchObject({ generation: 2, holder: 'daemon', releasedAt: null });
      // A fresh tick sees the live lease and leaves the sandbox alone too.
      await reaper.tick();
      expect(stops.filter((x) => x.sessionId === s.sessionId)).toEqual([]);

      // The same holds for a sandbox that had no lease at all when the reaper looked.
      const fresh = await startSession(t, projectId);
      const unleased = (await reaper.findCandidates()).find((c) => c.sessionId === fresh.sessionId);
      expect(unleased).toMatchObject({ generation: null, reason: 'IDLE_REAPED' });
      expect((await renew(fresh)).data?.renewLease).toMatchObject({ lease: { generation: 1 } });
      expect(await reaper.reap(unleased!)).toBe(false);
      expect((await session(fresh)).status).toBe('RUNNING');

      // Once the turn ends and the sandbox idles past the timeout, it is reaped and says why.
      await t.request(ReleaseLeaseDocument, { input: { sessionId: s.sessionId, generation: 2 } }, s.token);
      const result = await reaper.tick();
      expect(result.ran).toBe(true);
      expect(stops).toContainEqual({ sessionId: s.sessionId, reason: 'IDLE_REAPED' });
      expect(await session(s)).toMatchObject({ status: 'STOPPED', stopReason: 'IDLE_REAPED' });
      const sandbox = await waitFor(async () => {
        const row = await t.app.services.db.sandbox.findUniqueOrThrow({ where: { id: s.sandboxId } });
        return row.status === 'DESTROYED' ? row : null;
      });
      expect(sandbox.stopReason).toBe('IDLE_REAPED');
      // The reaped lease is fenced: the old daemon can neither renew nor re-acquire it.
      const late = await t.app.services.leases
        .renew({ kind: 'SANDBOX', sessionId: s.sessionId, sandboxId: s.sandboxId } as never, {
          sessionId: s.sessionId,
        })
        .catch((error: Error) => error);
      expect((late as { code?: string }).code).toBe('CONFLICT');
    });

    test('two reapers running at once stop a session exactly once', async () => {
      const s = await startSession(t, projectId);
      const u = await startSession(t, projectId);
      expect((await renew(u)).data?.renewLease).toMatchObject({ lease: { generation: 1 } });
      await t.request(ReleaseLeaseDocument, { input: { sessionId: u.sessionId, generation: 1 } }, u.token);
      const ours = new Set([s.sessionId, u.sessionId]);

      // With the fleet-wide lock: two ticks in parallel.
      const a = reaperAt(IDLE_MS + 5_000);
      const b = reaperAt(IDLE_MS + 5_000);
      await Promise.all([a.reaper.tick(), b.reaper.tick()]);
      const locked = [...a.stops, ...b.stops].filter((x) => ours.has(x.sessionId));
      expect(locked.map((x) => x.sessionId).sort()).toEqual([...ours].sort());

      // Without the lock, fencing alone decides: each reaper reads the same candidates (sandboxes
      // that never held a lease, so every fence is a first insert), and each session stops once.
      const never = await Promise.all([1, 2, 3, 4].map(() => startSession(t, projectId)));
      const unlocked = [1, 2, 3].map(() => reaperAt(IDLE_MS + 5_000, { singleton: false }));
      const found = await Promise.all(unlocked.map((r) => r.reaper.findCandidates()));
      const attempts = never.flatMap((v) =>
        unlocked.map((r, i) => {
          const candidate = found[i]!.find((x) => x.sessionId === v.sessionId);
          expect(candidate).toMatchObject({ generation: null, reason: 'IDLE_REAPED' });
          return r.reaper.reap(candidate!).then((won) => ({ sessionId: v.sessionId, won }));
        }),
      );
      const outcomes = await Promise.all(attempts);
      for (const v of never) {
        expect(outcomes.filter((o) => o.sessionId === v.sessionId && o.won)).toHaveLength(1);
        expect(unlocked.flatMap((r) => r.stops).filter((x) => x.sessionId === v.sessionId)).toHaveLength(1);
        expect(await session(v)).toMatchObject({ status: 'STOPPED', stopReason: 'IDLE_REAPED' });
      }
    });

    test('a daemon’s first acquire racing the reaper’s fence ends in one clear outcome', async () => {
      const racing = await Promise.all([1, 2, 3, 4].map(() => startSession(t, projectId)));
      const r = reaperAt(IDLE_MS + 5_000, { singleton: false });
      const candidates = await r.reaper.findCandidates();
      const results = await Promise.all(
        racing.map(async (v) => {
          const candidate = candidates.find((x) => x.sessionId === v.sessionId)!;
          expect(candidate).toMatchObject({ generation: null });
          const [renewed, fenced] = await Promise.all([renew(v), r.reaper.fence(candidate)]);
          return { v, renewed, fenced };
        }),
      );
      for (const { v, renewed, fenced } of results) {
        expect(renewed.errors).toBeUndefined();
        const stored = await lease(v);
        if (fenced) {
          // The reaper inserted first: the daemon is refused and the lease stays the reaper's.
          expect(renewed.data?.renewLease).toMatchObject({ code: 'CONFLICT', field: ['input', 'sessionId'] });
          expect(stored).toMatchObject({ generation: 1, holder: 'reaper:IDLE_REAPED' });
        } else {
          expect(renewed.data?.renewLease).toMatchObject({ lease: { generation: 1, releasedAt: null } });
          expect(stored).toMatchObject({ generation: 1, releasedAt: null });
          expect(stored?.holder).not.toMatch(/^reaper:/);
        }
      }
    });

    test('queries, subscriptions and telemetry do not extend a sandbox’s life', async () => {
      const s = await startSession(t, projectId);
      const before = await t.app.services.db.sandbox.findUniqueOrThrow({ where: { id: s.sandboxId } });

      // A dashboard tab: a WebSocket subscription plus polling queries, and the daemon's telemetry.
      const client = createClient({
        url: t.wsUrl,
        webSocketImpl: WebSocket,
        connectionParams: { authorization: t.adminToken },
        lazy: false,
      });
      const received: unknown[] = [];
      const unsubscribe = client.subscribe(
        { query: `subscription { telemetry(sandboxId: "${s.sandboxId}") { at } }` },
        { next: (v) => received.push(v), error: () => {}, complete: () => {} },
      );
      try {
        // graphql-ws does not acknowledge a subscription: report until samples flow through it.
        for (let i = 0; i < 200 && received.length < 3; i++) {
          await t.request(AgentSessionDocument, { id: s.sessionId });
          const sent = await t.request(
            ReportTelemetryDocument,
            {
              input: {
                sandboxId: s.sandboxId,
                memoryUsedBytes: 1e9,
                memoryLimitBytes: 4e9,
                load1: 0.5,
                diskUsedBytes: 1e9,
                diskTotalBytes: 2e10,
                daemonRssBytes: 5e7,
                opencodeRssBytes: 2e8,
                reason: 'INTERVAL',
              },
            },
            s.token,
          );
          expect(sent.data?.reportTelemetry.__typename).toBe('ReportTelemetrySuccess');
          await new Promise((r) => setTimeout(r, 25));
        }
        expect(received.length).toBeGreaterThanOrEqual(3);
      } finally {
        unsubscribe();
        await client.dispose();
      }
      const after = await t.app.services.db.sandbox.findUniqueOrThrow({ where: { id: s.sandboxId } });
      expect(after.lastActivityAt.getTime()).toBe(before.lastActivityAt.getTime());
      expect(await lease(s)).toBeNull();

      const { reaper, stops } = reaperAt(IDLE_MS + 5_000);
      await reaper.tick();
      expect(stops).toContainEqual({ sessionId: s.sessionId, reason: 'IDLE_REAPED' });
    });

    test('a fenced sandbox cannot be re-acquired, and the next tick completes a stop that never happened', async () => {
      const s = await startSession(t, projectId);
      const { reaper, stops } = reaperAt(IDLE_MS + 5_000);
      const candidate = (await reaper.findCandidates()).find((c) => c.sessionId === s.sessionId)!;
      // The reaper process fences, then dies before stopping the session.
      expect(await reaper.fence(candidate)).toBe(true);
      expect(await lease(s)).toMatchObject({ holder: 'reaper:IDLE_REAPED' });
      const acquire = await renew(s);
      expect(acquire.data?.renewLease).toMatchObject({ __typename: 'ConflictError', code: 'CONFLICT' });
      expect((await session(s)).status).toBe('RUNNING');

      const next = reaperAt(0);
      await next.reaper.tick();
      expect(next.stops).toContainEqual({ sessionId: s.sessionId, reason: 'IDLE_REAPED' });
      expect(stops).toEqual([]);
      expect(await session(s)).toMatchObject({ status: 'STOPPED', stopReason: 'IDLE_REAPED' });
    });

    test('a lease that expires unreleased is reaped as LEASE_EXPIRED once idle past the timeout', async () => {
      const s = await startSession(t, projectId);
      expect((await renew(s)).data?.renewLease).toMatchObject({ lease: { generation: 1 } });
      // Live lease: even far past the idle timeout, nothing happens while it holds.
      const early = reaperAt(IDLE_MS + 5_000);
      await early.reaper.tick();
      expect((await session(s)).status).toBe('RUNNING');
      // Past expiry but not yet idle past the timeout measured from the expiry.
      const expiredNotIdle = reaperAt(TTL_MS + 5_000);
      await expiredNotIdle.reaper.tick();
      expect((await session(s)).status).toBe('RUNNING');

      const late = reaperAt(TTL_MS + IDLE_MS + 5_000);
      await late.reaper.tick();
      expect(late.stops).toContainEqual({ sessionId: s.sessionId, reason: 'LEASE_EXPIRED' });
      const view = await t.request(AgentSessionDocument, { id: s.sessionId });
      expect(view.data?.session).toMatchObject({ status: 'STOPPED', stopReason: 'LEASE_EXPIRED' });
    });

    test('a stop or a failure releases the lease in the transaction that ends the session: no reader sees it ended with its lease held', async () => {
      const sql = (text: string) => t.app.services.db.$executeRawUnsafe(text);
      // A constraint trigger deferred to commit records, for each session that became STOPPED or
      // FAILED, how many of its leases were still unreleased when that change became visible.
      await sql('CREATE TABLE "StopProbe" ("sessionId" uuid NOT NULL, "unreleased" int NOT NULL)');
      await sql(`CREATE FUNCTION stop_probe() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
          INSERT INTO "StopProbe" SELECT NEW."id", count(*)::int FROM "ExecutionLease"
            WHERE "sessionId" = NEW."id" AND "releasedAt" IS NULL;
          RETURN NULL;
        END $$`);
      await sql(`CREATE CONSTRAINT TRIGGER stop_probe AFTER UPDATE OF "status" ON "Session"
        DEFERRABLE INITIALLY DEFERRED FOR EACH ROW
        WHEN (NEW."status" IN ('STOPPED', 'FAILED') AND OLD."status" IN ('PROVISIONING', 'RUNNING'))
        EXECUTE FUNCTION stop_probe()`);
      try {
        const lifecycle = t.app.services.sessions;
        const ends = [
          { status: 'STOPPED', end: (id: string) => lifecycle.stopInternal(id, 'USER') },
          { status: 'FAILED', end: (id: string) => lifecycle.fail(id, 'the provider lost the sandbox') },
        ];
        for (const { status, end } of ends) {
          const s = await startSession(t, projectId);
          expect((await renew(s)).data?.renewLease).toMatchObject({ lease: { generation: 1 } });
          expect(await end(s.sessionId)).toMatchObject({ status });
          const seen = await t.app.services.db.$queryRawUnsafe<Array<{ unreleased: number }>>(
            `SELECT "unreleased" FROM "StopProbe" WHERE "sessionId" = '${s.sessionId}'`,
          );
          expect(seen).toEqual([{ unreleased: 0 }]);
          const lease = await t.app.services.db.executionLease.findUniqueOrThrow({
            where: { sessionId: s.sessionId },
          });
          const stored = await t.app.services.db.session.findUniqueOrThrow({ where: { id: s.sessionId } });
          expect(lease.releasedAt).toEqual(stored.stoppedAt);
          // The daemon's renewal after the end is refused: the lease stays as the end left it.
          await renew(s, 1);
          expect(
            await t.app.services.db.executionLease.findUniqueOrThrow({ where: { sessionId: s.sessionId } }),
          ).toEqual(lease);
        }
      } finally {
        await sql('DROP TRIGGER stop_probe ON "Session"');
        await sql('DROP FUNCTION stop_probe()');
        await sql('DROP TABLE "StopProbe"');
      }
    });

    test('a sandbox whose agent is still booting has the boot timeout; once it reported ready, the idle timeout', async () => {
      const BOOT_MS = 5 * IDLE_MS;
      const report = (s: LiveSession, state: 'STARTING' | 'HEALTHY') =>
        t.request(ReportRuntimeStateDocument, { input: { sessionId: s.sessionId, state } }, s.token);
      const silent = await startSession(t, projectId);
      const starting = await startSession(t, projectId);
      const ready = await startSession(t, projectId);
      // Ready, but its initial prompt has not started a turn (the daemon holds no lease yet).
      const prompted = await startSession(t, projectId, { prompt: 'start on this' });
      expect((await report(starting, 'STARTING')).errors).toBeUndefined();
      expect((await report(ready, 'STARTING')).errors).toBeUndefined();
      expect((await report(ready, 'HEALTHY')).errors).toBeUndefined();
      expect((await report(prompted, 'HEALTHY')).errors).toBeUndefined();

      // Past the idle timeout: only the sandbox whose agent reported ready counts as idle.
      const idle = reaperAt(IDLE_MS + 5_000, { bootTimeoutMs: BOOT_MS });
      await idle.reaper.tick();
      const mine = (stops: Array<{ sessionId: string }>) =>
        stops.filter((stop) => [silent, starting, ready].some((s) => s.sessionId === stop.sessionId));
      expect(mine(idle.stops)).toEqual([{ sessionId: ready.sessionId, reason: 'IDLE_REAPED' }]);
      expect((await session(silent)).status).toBe('RUNNING');
      expect((await session(starting)).status).toBe('RUNNING');
      expect(idle.stops.some((stop) => stop.sessionId === prompted.sessionId)).toBe(false);
      expect((await session(prompted)).status).toBe('RUNNING');

      // Past the boot timeout: a boot that never finished (or never reported) is stopped too.
      const booting = reaperAt(BOOT_MS + 5_000, { bootTimeoutMs: BOOT_MS });
      await booting.reaper.tick();
      expect(new Set(mine(booting.stops).map((stop) => stop.sessionId))).toEqual(
        new Set([silent.sessionId, starting.sessionId]),
      );
      expect(booting.stops.filter((stop) => stop.sessionId === prompted.sessionId)).toEqual([
        { sessionId: prompted.sessionId, reason: 'IDLE_REAPED' },
      ]);
      for (const s of [silent, starting, ready, prompted]) {
        expect(await session(s)).toMatchObject({ status: 'STOPPED', stopReason: 'IDLE_REAPED' });
        expect((await lease(s))?.holder).toBe('reaper:IDLE_REAPED');
      }
    });

    const SAMPLE = {
      memoryUsedBytes: 1e9,
      memoryLimitBytes: 4e9,
      load1: 0.5,
      diskUsedBytes: 1e9,
      diskTotalBytes: 2e10,
      daemonRssBytes: 5e7,
      opencodeRssBytes: 2e8,
      reason: 'INTERVAL' as const,
    };

    test('the prompt is claimed once; runtime states, memory-guard errors and telemetry are stored as reported', async () => {
      const s = await startSession(t, projectId, { prompt: 'fix the bug' });
      const first = await t.request(ClaimBootstrapDocument, {}, s.token);
      expect(first.data?.claimBootstrap).toMatchObject({
        __typename: 'ClaimBootstrapSuccess',
        sessionId: s.sessionId,
        sandboxId: s.sandboxId,
        prompt: 'fix the bug',
        agent: 'build',
        alreadyClaimed: false,
      });
      const stored = await session(s);
      expect(first.data?.claimBootstrap).toMatchObject({ turnLedgerId: stored.turnLedgerId });
      expect(stored.bootstrapClaimedAt).not.toBeNull();
      const again = await t.request(ClaimBootstrapDocument, {}, s.token);
      expect(again.data?.claimBootstrap).toMatchObject({
        prompt: null,
        turnLedgerId: null,
        alreadyClaimed: true,
      });

      const guard =
        'SandboxMemoryGuard: memory at 93.1% (used 3998000000 of 4294967296 bytes) reached the 92% guard';
      const state = await t.request(
        ReportRuntimeStateDocument,
        { input: { sessionId: s.sessionId, state: 'ERROR', message: guard } },
        s.token,
      );
      expect(state.data?.reportRuntimeState).toMatchObject({
        sandbox: { runtimeState: 'ERROR', error: guard },
      });
      await t.request(
        ReportRuntimeStateDocument,
        { input: { sessionId: s.sessionId, state: 'IDLE' } },
        s.token,
      );
      const view = await t.request(AgentSessionDocument, { id: s.sessionId });
      expect(view.data?.session?.sandbox).toMatchObject({ runtimeState: 'IDLE', error: guard });

      for (const bad of [{ load1: -1 }, { memoryUsedBytes: 1e300 }, { diskTotalBytes: -0.5 }]) {
        const res = await t.request(
          ReportTelemetryDocument,
          { input: { ...SAMPLE, ...bad, sandboxId: s.sandboxId } },
          s.token,
        );
        expect(res.data?.reportTelemetry).toMatchObject({
          __typename: 'ValidationError',
          field: ['input', Object.keys(bad)[0]],
        });
      }
      expect(await t.app.services.db.telemetrySample.count({ where: { sandboxId: s.sandboxId } })).toBe(0);
      // Concurrent reports are group-committed; each caller gets its own row back.
      const results = await Promise.all(
        Array.from({ length: 20 }, (_, i) =>
          t.request(
            ReportTelemetryDocument,
            { input: { ...SAMPLE, load1: i, sandboxId: s.sandboxId, reason: 'STATE_CHANGE' } },
            s.token,
          ),
        ),
      );
      expect(results.map((r) => r.data?.reportTelemetry)).toEqual(
        Array.from({ length: 20 }, (_, i) =>
          expect.objectContaining({ sample: expect.objectContaining({ load1: i, reason: 'STATE_CHANGE' }) }),
        ),
      );
      const latest = await t.request(AgentSessionDocument, { id: s.sessionId });
      expect(latest.data?.session?.sandbox?.telemetry.edges).toHaveLength(20);
    });

    test('telemetry retention keeps the newest samples per sandbox and drops old ones by age', async () => {
      const s = await startSession(t, projectId);
      const clock = { now: Date.now() - 10 * 24 * 3_600_000 };
      const telemetry = createTelemetryService({
        db: t.app.services.db,
        events: t.app.services.events,
        logger: t.app.services.logger,
        keepPerSandbox: 5,
        pruneEvery: 1_000,
        now: () => clock.now,
      });
      const principal = sandboxPrincipal(s);
      for (let i = 0; i < 12; i++) {
        clock.now += 60_000;
        await telemetry.report(principal, { ...SAMPLE, load1: i, sandboxId: s.sandboxId });
      }
      await telemetry.pruneSandbox(s.sandboxId);
      const kept = await t.app.services.db.telemetrySample.findMany({
        where: { sandboxId: s.sandboxId },
        orderBy: { at: 'asc' },
      });
      expect(kept.map((k) => k.load1)).toEqual([7, 8, 9, 10, 11]);
      // These samples are ten days old: past the seven-day retention.
      clock.now = Date.now();
      expect(await telemetry.pruneExpired()).toBeGreaterThanOrEqual(5);
      expect(await t.app.services.db.telemetrySample.count({ where: { sandboxId: s.sandboxId } })).toBe(0);
    });

    test('reports that arrive while an insert runs wait and go together in the next one', async () => {
      const s = await startSession(t, projectId);
      const raw = t.app.services.database.raw;
      // The real database, with the first INSERT held until the test lets it go.
      const inserts: number[] = [];
      let release!: () => void;
      const held = new Promise<void>((resolve) => {
        release = resolve;
      });
      const telemetry = createTelemetryService({
        db: t.app.services.db,
        events: t.app.services.events,
        logger: t.app.services.logger,
        maxFlushesInFlight: 1,
        sql: {
          ...raw,
          async query(text, params) {
            if (/INSERT INTO "TelemetrySample"/.test(text)) {
              inserts.push((params as unknown[][])[0]!.length);
              if (inserts.length === 1) await held;
            }
            return raw.query(text, params);
          },
        },
      });
      const principal = sandboxPrincipal(s);
      const report = (i: number) =>
        telemetry.report(principal, { ...SAMPLE, load1: i, sandboxId: s.sandboxId });
      const first = report(0);
      await waitFor(() => inserts.length === 1);
      // Nine more, each in a tick of its own: without the limit each tick would send its own INSERT.
      const rest: Promise<{ id: bigint; load1: number }>[] = [];
      for (let i = 1; i < 10; i++) {
        rest.push(report(i));
        await new Promise((resolve) => setImmediate(resolve));
      }
      expect(inserts).toEqual([1]);
      release();
      const samples = await Promise.all([first, ...rest]);
      expect(inserts).toEqual([1, 9]);
      expect(samples.map((r) => r.load1)).toEqual([0, 1, 2, 3, 4, 5, 6, 7, 8, 9]);
      expect(new Set(samples.map((r) => r.id)).size).toBe(10);
      expect(await t.app.services.db.telemetrySample.count({ where: { sandboxId: s.sandboxId } })).toBe(10);
    });

    test('each reported sample is returned exactly as it was stored and has exactly one event, live and in the log', async () => {
      const s = await startSession(t, projectId);
      const principal = sandboxPrincipal(s);
      const reasons = ['INTERVAL', 'STATE_CHANGE', 'MEMORY_GUARD'] as const;
      const live = t.app.services.pubsub.subscribe('telemetry', s.sandboxId);
      await streamStarted(live);
      const returned = await Promise.all(
        Array.from({ length: 7 }, (_, i) =>
          t.app.services.telemetry.report(principal, {
            ...SAMPLE,
            sandboxId: s.sandboxId,
            load1: i + 0.1 + 1 / 3,
            memoryUsedBytes: 1_234_567_891_011.5 + i,
            reason: reasons[i % 3]!,
          }),
        ),
      );
      expect(new Set(returned.map((r) => r.id)).size).toBe(7);
      const stored = await t.app.services.db.telemetrySample.findMany({
        where: { id: { in: returned.map((r) => r.id) } },
      });
      expect(stored.sort((a, b) => Number(a.id - b.id))).toEqual(
        [...returned].sort((a, b) => Number(a.id - b.id)),
      );
      // Each sample has exactly one event, numbered in the order the samples were stored; the log
      // (replay) and the live delivery carry the same payload.
      const expected = stored.map((sample, i) => ({
        topic: 'telemetry',
        key: s.sandboxId,
        seq: i + 1,
        payload: {
          sandboxId: s.sandboxId,
          sessionId: s.sessionId,
          accountId: '',
          sampleId: sample.id.toString(),
          sample: {
            at: sample.at.toISOString(),
            memoryUsedBytes: sample.memoryUsedBytes,
            memoryLimitBytes: sample.memoryLimitBytes,
            load1: sample.load1,
            diskUsedBytes: sample.diskUsedBytes,
            diskTotalBytes: sample.diskTotalBytes,
            daemonRssBytes: sample.daemonRssBytes,
            opencodeRssBytes: sample.opencodeRssBytes,
            reason: sample.reason,
          },
        },
      }));
      const delivered = [];
      for (let i = 0; i < 7; i++) delivered.push((await live.next()).value);
      await live.return?.();
      expect(delivered).toEqual(expected);
      const replay = t.app.services.pubsub.subscribe('telemetry', s.sandboxId, { after: 0 });
      const replayed = [];
      for (let i = 0; i < 7; i++) replayed.push((await replay.next()).value);
      await replay.return?.();
      expect(replayed).toEqual(expected);
      expect(await t.app.services.pubsub.currentSeq('telemetry', s.sandboxId)).toBe(7);
    });

    test('a reload whose daemon cannot be reached ends FAILED with the reason; phases come only from the session’s own token', async () => {
      const s = await startSession(t, projectId);
      const other = await startSession(t, projectId);
      const res = await t.request(ReloadSessionDocument, { input: { sessionId: s.sessionId, noRepo: true } });
      // The LOCAL entry here is `sleep`: nothing listens on the sandbox's service port.
      expect(res.data?.reloadSession).toMatchObject({
        __typename: 'ReloadSessionSuccess',
        reload: { status: 'FAILED', noRepo: true, force: false },
      });
      const reload =
        res.data?.reloadSession.__typename === 'ReloadSessionSuccess' ? res.data.reloadSession.reload : null;
      expect(reload?.error).toContain('could not be reached');
      const reloadUuid = Buffer.from(reload!.id, 'base64').toString('utf8').replace('Reload:', '');
      const stored = await t.app.services.db.reload.findUniqueOrThrow({ where: { id: reloadUuid } });
      expect(stored).toMatchObject({ status: 'FAILED', sessionId: s.sessionId });
      expect(stored.finishedAt).not.toBeNull();

      const foreign = await t.request(
        ReportReloadPhaseDocument,
        { input: { reloadId: reload!.id, phase: 'CHECK_SESSION', status: 'STARTED' } },
        other.token,
      );
      expect(foreign.errors?.[0]?.extensions?.code).toBe('FORBIDDEN');
      const own = await t.request(
        ReportReloadPhaseDocument,
        { input: { reloadId: reload!.id, phase: 'CHECK_SESSION', status: 'STARTED' } },
        s.token,
      );
      expect(own.data?.reportReloadPhase).toMatchObject({ reload: { status: 'FAILED' } });
      expect(await t.app.services.db.reloadPhase.count({ where: { reloadId: reloadUuid } })).toBe(1);
      // A report the daemon sends again (it did not get the answer) is stored once, also when the
      // attempts arrive together.
      const again = await Promise.all(
        [1, 2, 3].map(() =>
          t.request(
            ReportReloadPhaseDocument,
            { input: { reloadId: reload!.id, phase: 'CHECK_SESSION', status: 'STARTED' } },
            s.token,
          ),
        ),
      );
      for (const r of again)
        expect(r.data?.reportReloadPhase).toMatchObject({ reload: { status: 'FAILED' } });
      expect(await t.app.services.db.reloadPhase.count({ where: { reloadId: reloadUuid } })).toBe(1);

      const readOnly = await t.seedAccount({ scopes: ['sessions:read'] });
      const denied = await t.request(
        ReloadSessionDocument,
        { input: { sessionId: s.sessionId } },
        readOnly.token,
      );
      expect(denied.errors?.[0]?.extensions?.code).toBe('FORBIDDEN');
    });
  });
}
