// Cost through the API (R-SBX-5). Sessions really run on the Daytona and E2B emulators and teardown
// really meters them; then each finished running interval is pinned to exactly 90 s in the stored
// rows (runningSeconds and its SandboxInterval alike) instead of sleeping 90 s, and the API computes
// cost and usage from those rows with the real metering code.
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import {
  AccountUsageDocument,
  CreateSessionDocument,
  ProviderCreateProjectDocument,
  ProviderSessionDocument,
  StopSessionDocument,
} from '../generated/graphql';
import { type TestApp, startTestApp } from '../support/app';
import { createTestRepo } from '../support/git';
import { waitFor } from '../support/wait';
import { DAYTONA_TIER_1 } from '../emulators/daytona';
import { type EmulatedProvider, type EntryScript, daemonEntry, startDaytona, startE2B } from './fixtures';

const T0 = new Date('2026-03-01T10:00:00.000Z');
const at = (seconds: number) => new Date(T0.getTime() + seconds * 1000).toISOString();

describe('cost of sessions on cloud providers', () => {
  const repo = createTestRepo({ 'README.md': '# cost\n' });
  let entry: EntryScript;
  let daytona: EmulatedProvider;
  let e2b: EmulatedProvider;
  let t: TestApp;

  async function project(name: string, provider: 'DAYTONA' | 'E2B', token: string): Promise<string> {
    const res = await t.request(
      ProviderCreateProjectDocument,
      { input: { name, repositoryUrl: repo.url, provider } },
      token,
    );
    if (res.data?.createProject.__typename !== 'CreateProjectSuccess') throw new Error(JSON.stringify(res));
    return res.data.createProject.project.id;
  }

  /** Runs a session to RUNNING, stops it, then pins its one running interval to [T0, T0 + 90 s]. */
  async function ninetySeconds(projectId: string, token: string): Promise<string> {
    const res = await t.request(CreateSessionDocument, { input: { projectId } }, token);
    if (res.data?.createSession.__typename !== 'CreateSessionSuccess') throw new Error(JSON.stringify(res));
    const { id, sessionId } = res.data.createSession.session;
    await waitFor(async () => {
      const s = (await t.request(ProviderSessionDocument, { id: sessionId }, token)).data?.session;
      if (s?.status === 'FAILED') throw new Error(s.failureReason ?? 'failed');
      return s?.status === 'RUNNING';
    }, 60_000);
    await t.request(StopSessionDocument, { input: { sessionId: id } }, token);
    const db = t.app.services.db;
    const sandbox = await waitFor(async () => {
      const row = await db.sandbox.findUnique({ where: { sessionId } });
      return row?.status === 'DESTROYED' ? row : null;
    });
    // Teardown metered the real run: the interval and runningSeconds agree.
    const [interval] = await db.sandboxInterval.findMany({ where: { sandboxId: sandbox.id } });
    expect(interval?.stoppedAt).not.toBeNull();
    const measured = ((interval?.stoppedAt?.getTime() ?? 0) - (interval?.startedAt.getTime() ?? 0)) / 1000;
    expect(Math.abs(measured - sandbox.runningSeconds)).toBeLessThan(0.001);
    expect(sandbox.runningSeconds).toBeGreaterThan(0);
    await db.sandboxInterval.update({
      where: { id: interval?.id as string },
      data: { startedAt: T0, stoppedAt: new Date(at(90)) },
    });
    await db.sandbox.update({
      where: { id: sandbox.id },
      data: { runningSeconds: 90, startedAt: T0, stoppedAt: new Date(at(90)) },
    });
    return sessionId;
  }

  beforeAll(async () => {
    entry = daemonEntry(repo.url);
    // An account whose per-sandbox disk was raised to 20 GiB (Daytona's default maximum is 10), so
    // the default spec runs unclamped and costs the reference rate of R-SBX-5.
    daytona = await startDaytona({
      entryCommand: entry.command,
      daytona: {
        tier: { ...DAYTONA_TIER_1, maxDiskPerSandboxGiB: 20, totalDiskGiB: 60 },
        caps: { diskGiB: 20 },
      },
    });
    // A Pro team, whose sandboxes get the default spec's 20 GiB disk (Hobby's is 10).
    e2b = await startE2B({ entryCommand: entry.command, e2bPlan: 'pro' });
    t = await startTestApp({ providers: [daytona.provider, e2b.provider] });
  });

  afterAll(async () => {
    await t?.stop();
    await daytona?.close();
    await e2b?.close();
    entry?.remove();
  });

  test('90 s of the default spec cost $0.0025 on Daytona and twice that on E2B, and a TEAM account is billed what it cost', async () => {
    const onDaytona = await ninetySeconds(
      await project('cost-daytona', 'DAYTONA', t.adminToken),
      t.adminToken,
    );
    const onE2B = await ninetySeconds(await project('cost-e2b', 'E2B', t.adminToken), t.adminToken);

    const d = (await t.request(ProviderSessionDocument, { id: onDaytona })).data?.session;
    expect(d?.sandbox).toMatchObject({ provider: 'DAYTONA', cpu: 2, memoryGiB: 4, diskGiB: 20 });
    expect(d?.costUsd).toBe(0.0025);
    expect(d?.sandbox?.costUsd).toBe(0.0025);
    const e = (await t.request(ProviderSessionDocument, { id: onE2B })).data?.session;
    expect(e?.costUsd).toBe(0.005);
    expect(e?.sandbox?.costUsd).toBe(0.005);

    const usage = (await t.request(AccountUsageDocument, { from: at(-3600), to: at(3600) })).data
      ?.accountUsage;
    expect(usage).toEqual({
      tier: 'TEAM',
      billable: true,
      seconds: 180,
      costUsd: 0.0075,
      billedUsd: 0.0075,
      providers: [
        { provider: 'DAYTONA', sandboxCount: 1, seconds: 90, costUsd: 0.0025, billedUsd: 0.0025 },
        { provider: 'E2B', sandboxCount: 1, seconds: 90, costUsd: 0.005, billedUsd: 0.005 },
      ],
    });

    // A range that starts halfway through the intervals clips them to 45 s.
    const half = (await t.request(AccountUsageDocument, { from: at(45), to: at(3600) })).data?.accountUsage;
    expect(half?.providers.map((p) => [p.provider, p.seconds, p.costUsd])).toEqual([
      ['DAYTONA', 45, 0.00125],
      ['E2B', 45, 0.0025],
    ]);
    // Nothing ran before T0.
    const before = (await t.request(AccountUsageDocument, { from: at(-3600), to: at(0) })).data?.accountUsage;
    expect(before).toMatchObject({ seconds: 0, costUsd: 0, billedUsd: 0, providers: [] });
  }, 180_000);

  test('a non-TEAM account sees the cost of its sessions but is billed 0', async () => {
    const pro = await t.seedAccount({ tier: 'PRO' });
    const sessionId = await ninetySeconds(await project('cost-pro', 'DAYTONA', pro.token), pro.token);
    const s = (await t.request(ProviderSessionDocument, { id: sessionId }, pro.token)).data?.session;
    expect(s?.costUsd).toBe(0.0025);
    const usage = (await t.request(AccountUsageDocument, { from: at(-60), to: at(600) }, pro.token)).data
      ?.accountUsage;
    expect(usage).toEqual({
      tier: 'PRO',
      billable: false,
      seconds: 90,
      costUsd: 0.0025,
      billedUsd: 0,
      providers: [{ provider: 'DAYTONA', sandboxCount: 1, seconds: 90, costUsd: 0.0025, billedUsd: 0 }],
    });
  }, 180_000);

  test('accountUsage refuses an empty range and an anonymous caller', async () => {
    const res = await t.request(AccountUsageDocument, { from: at(10), to: at(10) });
    expect(res.errors?.[0]?.extensions?.code).toBe('BAD_USER_INPUT');
    const unauthenticated = await t.request(AccountUsageDocument, { from: at(0), to: at(10) }, null);
    expect(unauthenticated.errors?.[0]?.extensions?.code).toBe('UNAUTHENTICATED');
  });
});
