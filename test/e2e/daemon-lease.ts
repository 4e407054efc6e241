// End to end on the LOCAL provider with real processes: createSession → the real daemon (default
// entry command) → a real `opencode serve` → RUNNING; telemetry over graphql-ws; a slow turn holds
// the lease past the idle timeout, the reaper stops the sandbox once the turn ended; a daemon
// killed mid-turn ends its sandbox (the entrypoint exits with it) and the session stops at once.
// Run once per database engine, from a test file each (daemon-lease.<db>.test.ts), so the two
// runs proceed in parallel. The server's clock is a test clock: the idle timeout and the lease
// TTL pass by moving it forward, not by waiting (the daemon's renewals still run on real time).
import { createClient } from 'graphql-ws';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import WebSocket from 'ws';
import { AgentSessionDocument, type AgentSessionQuery, TelemetryUpdatesDocument } from '../generated/graphql';
import { readFileSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { print } from 'graphql';
import { AGENT_NODE_FLAGS } from '../../image/runtime-layout';
import { createProject, startSession } from '../leases/helpers';
import { createTestClock } from '../support/clock';
import { waitFor } from '../support/wait';
import { E2E_SETUP_TIMEOUT_MS, type E2e, startE2e } from './helpers';

// Scaled down from 15 min / 180 s / 30 s / 60 s; the ratios of the real settings are kept
// (TTL several renew intervals, idle timeout longer than a renew interval). Booting the daemon and
// OpenCode on a loaded machine can take longer than the idle timeout; while the agent boots, the
// reaper applies the boot timeout instead (BOOT_MS). The idle timeout still covers the step from
// HEALTHY to the first turn's lease (over 15 s seen with two suites on two cores), and the TTL a
// server or daemon starved of CPU for several seconds (with two suites on two cores, the PGlite
// server once answered nothing for about 10 s, and a 10 s TTL expired mid-turn).
const IDLE_MS = 30_000;
const BOOT_MS = 300_000;
const TTL_MS = 20_000;
const RENEW_MS = 1_000;
/**
 * How far the server's clock moves after each renewal the daemon lands: well inside a TTL, so a
 * lease stays live only while the daemon keeps renewing it, as it would in real time.
 */
const STEP_MS = 5_000;

type Session = NonNullable<AgentSessionQuery['session']>;

export function describeDaemonLease(db: 'postgres' | 'pglite'): void {
  describe(`the daemon, its lease and the idle reaper, end to end on ${db}`, () => {
    let e: E2e;
    let projectId: string;
    const clock = createTestClock();

    beforeAll(async () => {
      e = await startE2e({
        db,
        now: clock.now,
        env: {
          SINGULACOMP_IDLE_TIMEOUT_MS: String(IDLE_MS),
          SINGULACOMP_BOOT_TIMEOUT_MS: String(BOOT_MS),
          SINGULACOMP_LEASE_TTL_MS: String(TTL_MS),
          SINGULACOMP_REAPER_INTERVAL_MS: '250',
        },
        daemonEnv: {
          SINGULACOMP_LEASE_RENEW_INTERVAL_MS: String(RENEW_MS),
          SINGULACOMP_TELEMETRY_INTERVAL_MS: '1000',
          SINGULACOMP_ATTACHMENT_OFFLOAD: '0',
        },
      });
      projectId = await createProject(e.t, e.repo.url);
    }, E2E_SETUP_TIMEOUT_MS);
    afterAll(async () => e?.stop());

    /** Waits until the session is BUSY with a live lease; on failure says where it got stuck. */
    async function untilBusy(s: { sessionId: string }, providerSandboxId: string): Promise<Session> {
      try {
        return await waitFor(
          async () => {
            const v = await view(s.sessionId);
            return v.sandbox?.runtimeState === 'BUSY' && v.lease?.live ? v : null;
          },
          90_000,
          'the session to be BUSY with a live lease',
        );
      } catch (error) {
        const log = await readFile(join(e.sandboxDir(providerSandboxId), 'entry.log'), 'utf8').catch(
          () => '',
        );
        throw new Error(
          `${(error as Error).message}\nsandbox: ${JSON.stringify({ ...(await view(s.sessionId)).sandbox, telemetry: undefined })}\ndaemon log:\n${log.slice(-4_000)}`,
        );
      }
    }

    async function view(sessionId: string): Promise<Session> {
      const res = await e.t.request(AgentSessionDocument, { id: sessionId });
      if (!res.data?.session) throw new Error(JSON.stringify(res));
      return res.data.session;
    }

    test('a busy turn keeps the sandbox past the idle timeout; once it ends the reaper stops it as IDLE_REAPED', async ({
      onTestFailed,
      onTestFinished,
    }) => {
      const endTurn = e.stub.holdReplies();
      onTestFinished(endTurn);
      const before = e.stub.requests.length;
      const s = await startSession(e.t, projectId, { prompt: 'Take your time.' });
      const sandbox = await e.t.app.services.db.sandbox.findUniqueOrThrow({ where: { id: s.sandboxId } });
      // Whatever step fails (the backstop timeout included), the session and the daemon's log say
      // where it stood.
      onTestFailed(async () => {
        const log = await readFile(join(e.sandboxDir(sandbox.providerSandboxId!), 'entry.log'), 'utf8').catch(
          () => '',
        );
        const v = await view(s.sessionId).catch((error: unknown) => String(error));
        console.error(`session at failure: ${JSON.stringify(v)}\ndaemon log:\n${log.slice(-6_000)}`);
      });

      // Telemetry from the daemon reaches a graphql-ws subscriber.
      const client = createClient({
        url: e.t.wsUrl,
        webSocketImpl: WebSocket,
        connectionParams: { authorization: e.t.adminToken },
      });
      const samples: Array<Record<string, unknown>> = [];
      const unsubscribe = client.subscribe(
        { query: print(TelemetryUpdatesDocument), variables: { sandboxId: s.sandboxId } },
        {
          next: (value) => {
            if (value.data?.telemetry) samples.push(value.data.telemetry as Record<string, unknown>);
          },
          error: () => {},
          complete: () => {},
        },
      );
      try {
        // The daemon claimed the prompt and OpenCode is working on it against the stub model.
        const busy = await untilBusy(s, sandbox.providerSandboxId!);
        const busySince = clock.now();
        expect(busy.status).toBe('RUNNING');
        expect(busy.sandbox?.keptAliveBecause).toContain(`generation ${busy.lease?.generation}`);
        expect(busy.sandbox?.leaseExpiresAt).toBe(busy.lease?.expiresAt);
        await waitFor(
          async () => e.stub.requests.length > before,
          30_000,
          'the turn to reach the stub model',
        );
        const claimed = await e.t.app.services.db.session.findUniqueOrThrow({ where: { id: s.sessionId } });
        expect(claimed.bootstrapClaimedAt).not.toBeNull();

        const sample = await waitFor(async () => samples[0], 30_000, 'a telemetry sample over graphql-ws');
        expect(sample.memoryLimitBytes as number).toBeGreaterThan(0);
        expect(sample.diskTotalBytes as number).toBeGreaterThan(0);
        expect(sample.daemonRssBytes as number).toBeGreaterThan(0);
        expect(['INTERVAL', 'STATE_CHANGE']).toContain(sample.reason);
        const stored = await e.t.app.services.db.telemetrySample.count({ where: { sandboxId: s.sandboxId } });
        expect(stored).toBeGreaterThanOrEqual(1);

        // The turn outlives the idle timeout and several lease TTLs of server time; the sandbox stays
        // RUNNING. The clock moves a step after each renewal the daemon lands, so the reaper runs
        // against a lease that only the daemon's renewals keep live. A stop mid-turn fails at once
        // (a throwing check would only count as "not yet").
        let stoppedMidTurn: Session | undefined;
        const midTurn = (v: Session) => v.status === 'RUNNING' && v.sandbox?.runtimeState === 'BUSY';
        let renewedAt = busy.lease!.renewedAt;
        while (clock.now() - busySince <= IDLE_MS + TTL_MS + 2_000) {
          // The next renewal, or the session leaving its turn (which ends the wait at once).
          const v = await waitFor(
            async () => {
              const v = await view(s.sessionId);
              return !midTurn(v) || v.lease?.renewedAt !== renewedAt ? v : null;
            },
            30_000,
            'the daemon to renew its lease mid-turn',
          );
          if (!midTurn(v)) {
            stoppedMidTurn = v;
            break;
          }
          renewedAt = v.lease!.renewedAt;
          clock.advance(STEP_MS);
        }
        expect(stoppedMidTurn).toBeUndefined();
        endTurn();
        const turnEnded = await waitFor(
          async () => {
            const v = await view(s.sessionId);
            if (v.status !== 'RUNNING') stoppedMidTurn = v;
            return stoppedMidTurn ?? (v.sandbox?.runtimeState === 'IDLE' ? v : null);
          },
          { timeoutMs: 90_000, what: 'the slow turn to end with the session RUNNING' },
        );
        expect(stoppedMidTurn).toBeUndefined();
        expect(clock.now() - busySince).toBeGreaterThan(IDLE_MS);
        const held = await e.t.app.services.db.executionLease.findUniqueOrThrow({
          where: { sandboxId: s.sandboxId },
        });
        // Renewed far beyond one TTL with one generation: the daemon kept it alive, nothing fenced it.
        expect(held.generation).toBe(busy.lease?.generation);
        expect(held.renewedAt.getTime() - held.acquiredAt.getTime()).toBeGreaterThan(TTL_MS);
        expect(turnEnded.status).toBe('RUNNING');
        expect(samples.length).toBeGreaterThanOrEqual(2);

        // The turn ended: the lease is released and the reaper stops the idle sandbox once the idle
        // timeout has passed since the sandbox's last sign of life (its release or a later report):
        // the clock is moved just past it, again whenever a report moved that point on.
        const stopped = await waitFor(
          async () => {
            const v = await view(s.sessionId);
            if (v.status === 'STOPPED') return v;
            const row = await e.t.app.services.db.sandbox.findUniqueOrThrow({
              where: { id: s.sandboxId },
              include: { lease: true },
            });
            const idleSince = Math.max(
              row.lastActivityAt?.getTime() ?? 0,
              row.lease?.releasedAt?.getTime() ?? Number.POSITIVE_INFINITY,
            );
            const due = idleSince + IDLE_MS + 1_000 - clock.now();
            if (due > 0 && Number.isFinite(due)) clock.advance(due);
            return null;
          },
          60_000,
          'the reaper to stop the idle session',
        );
        expect(stopped.stopReason).toBe('IDLE_REAPED');
        const lease = await e.t.app.services.db.executionLease.findUniqueOrThrow({
          where: { sandboxId: s.sandboxId },
        });
        expect(lease.holder).toBe('reaper:IDLE_REAPED');
        expect(lease.releasedAt).not.toBeNull();
        expect(new Date(stopped.stoppedAt!).getTime()).toBeGreaterThanOrEqual(
          lease.releasedAt!.getTime() + IDLE_MS,
        );
        const gone = await waitFor(
          async () => {
            const v = await view(s.sessionId);
            return v.sandbox?.status === 'DESTROYED' ? v : null;
          },
          30_000,
          'the sandbox to be destroyed',
        );
        expect(gone.sandbox?.stopReason).toBe('IDLE_REAPED');
        expect(gone.sandbox?.keptAliveBecause).toBeNull();
        await waitFor(
          async () => e.processesIn(sandbox.providerSandboxId!).length === 0,
          20_000,
          "the sandbox's processes to end",
        );
      } finally {
        unsubscribe();
        await client.dispose();
      }
      // A backstop above the sum of the steps' own waits: booting OpenCode on a loaded machine,
      // a renewal per step of the turn, then the reaper.
    }, 600_000);

    test('a daemon killed mid-turn stops renewing and ends its sandbox: the session fails and nothing pins it', async () => {
      e.stub.setDelayMs(600_000);
      const s = await startSession(e.t, projectId, { prompt: 'This turn never finishes.' });
      const sandbox = await e.t.app.services.db.sandbox.findUniqueOrThrow({ where: { id: s.sandboxId } });
      const busy = await untilBusy(s, sandbox.providerSandboxId!);
      const generation = busy.lease!.generation;

      const daemon = await e.daemonPid(sandbox.providerSandboxId!);
      const argv = readFileSync(`/proc/${daemon}/cmdline`, 'utf8').split('\0');
      expect(argv.slice(1, -1)).toEqual(expect.arrayContaining([...AGENT_NODE_FLAGS]));
      expect(argv.find((arg) => arg.endsWith('singulacomp-agent.mjs'))).toBeDefined();
      expect(argv.indexOf(AGENT_NODE_FLAGS[0])).toBeLessThan(argv.findIndex((arg) => arg.endsWith('.mjs')));
      // This server has no LLM upstream: its daemons are told the gateway serves no models, so none
      // asks the gateway before OpenCode's start.
      const environ = readFileSync(`/proc/${daemon}/environ`, 'utf8').split('\0');
      expect(environ).toContain('SINGULACOMP_LLM_MODELS=[]');
      process.kill(daemon, 'SIGKILL');

      const stopped = await waitFor(
        async () => {
          const v = await view(s.sessionId);
          return v.status === 'FAILED' ? v : null;
        },
        60_000,
        'the session of the killed daemon to fail',
      );
      // The entrypoint exits with its daemon, so the sandbox ends too; the server sees its entry exit
      // and fails the session, saying how, without waiting for the lease to expire: no reaper fenced it.
      expect(stopped.stopReason).toBe('FAILED');
      const row = await e.t.app.services.db.session.findUniqueOrThrow({ where: { id: s.sessionId } });
      expect(row.failureReason).toMatch(
        /^The sandbox's entry process (exited with code \d+|was killed by SIG\w+)/,
      );
      const lease = await e.t.app.services.db.executionLease.findUniqueOrThrow({
        where: { sandboxId: s.sandboxId },
      });
      expect(lease.generation).toBe(generation);
      expect(lease.holder).not.toMatch(/^reaper:/);
      expect(lease.releasedAt).not.toBeNull();
      // Nothing renews it once the daemon is dead: the last renewal landed before the stop, and with
      // every process of the sandbox gone the lease stays as the stop left it.
      expect(lease.renewedAt.getTime()).toBeLessThanOrEqual(new Date(stopped.stoppedAt!).getTime());
      expect(lease.expiresAt.getTime()).toBe(lease.renewedAt.getTime() + TTL_MS);
      await waitFor(
        async () => e.processesIn(sandbox.providerSandboxId!).length === 0,
        30_000,
        "the sandbox's processes to end",
      );
      expect(
        await e.t.app.services.db.executionLease.findUniqueOrThrow({ where: { sandboxId: s.sandboxId } }),
      ).toEqual(lease);
    }, 600_000);
  });
}
