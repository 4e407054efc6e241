// Triggers against a real server and repository: a signed webhook creates a session on its own
// branch cut at fire time; bad signatures and replays are counted on the trigger (no row each) and
// create nothing, over-limit firings are recorded and create
// nothing; a schedule fires each due time once with two server processes on one database.
import { print } from 'graphql';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { createHmac } from 'node:crypto';
import { signWebhook } from '../../resolvers/triggers/triggers';
import {
  CreateProjectDocument,
  CreateTriggerDocument,
  PauseTriggerDocument,
  TriggerRefusalsDocument,
  TriggerRunsDocument,
  UpdateTriggerScheduleDocument,
} from '../generated/graphql';
import { type TestApp, startTestApp } from '../support/app';
import { createTestClock } from '../support/clock';
import { createTestDatabase, type TestDatabase } from '../support/database';
import { createTestRepo, type TestRepo } from '../support/git';
import { type ServerProcess, postGraphql, startServerProcess } from '../support/server-process';
import { waitFor } from '../support/wait';

describe('webhook triggers', () => {
  const TOLERANCE = 300;
  const clock = createTestClock();
  let t: TestApp;
  let repo: TestRepo;
  let projectId: string;
  let triggerId: string;
  let globalId: string;
  let secret: string;

  const nowSeconds = () => Math.floor(clock.now() / 1000);
  const deliver = async (
    body: string,
    headers: { signature?: string | null; timestamp?: number | string | null },
  ) => {
    const response = await fetch(`${t.url}/v1/triggers/${triggerId}/webhook`, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        ...(headers.signature != null ? { 'x-hub-signature-256': headers.signature } : {}),
        ...(headers.timestamp != null ? { 'x-singulacomp-timestamp': String(headers.timestamp) } : {}),
      },
      body,
    });
    const answer = (await response.json()) as {
      code: string;
      message: string;
      status: string | null;
      sessionId: string | null;
      runId: string | null;
    };
    return { http: response.status, ...answer };
  };
  /** A delivery signed as documented: HMAC-SHA256 of `<timestamp>.<body>`. */
  const signed = (body: string, timestamp = nowSeconds()) =>
    deliver(body, { timestamp, signature: signWebhook(secret, timestamp, body) });
  const runs = async () => {
    const res = await t.request(TriggerRunsDocument, { id: globalId });
    const node = res.data?.node as {
      runs?: { edges: Array<{ node: { status: string; reason: string | null; sessionId: string | null } }> };
    };
    return node.runs!.edges.map((e) => e.node);
  };
  const sessionCount = () => t.app.services.db.session.count({ where: { projectId } });
  /** The replay store's rows for this trigger. */
  const remembered = async () =>
    (
      await t.app.services.db.triggerWebhookDelivery.findMany({
        where: { triggerId },
        orderBy: { signedAt: 'asc' },
      })
    ).map((row) => ({ signature: row.signature, signedAt: row.signedAt.getTime() / 1000 }));

  /** The trigger's refusal counter, as the API shows it. */
  const refusals = async () => {
    const res = await t.request(TriggerRefusalsDocument, { id: globalId });
    const node = res.data?.node as {
      refusedDeliveries: number;
      lastRefusedAt: string | null;
      lastRefusedCode: string | null;
    };
    return { count: node.refusedDeliveries, at: node.lastRefusedAt, code: node.lastRefusedCode };
  };

  /**
   * A refused delivery: its answer, counted on the trigger (count, time, code) without a run or any
   * other row (anyone can send deliveries), and no session or remembered signature.
   */
  async function expectRefused(
    delivery: () => Promise<Awaited<ReturnType<typeof deliver>>>,
    expected: { http: number; code: string; reason: string | RegExp },
  ): Promise<void> {
    const sessionsBefore = await sessionCount();
    const storeBefore = await remembered();
    const runsBefore = await t.app.services.db.triggerRun.count({ where: { triggerId } });
    const refusedBefore = await refusals();
    const startedAt = clock.now();
    const answer = await delivery();
    expect(answer).toMatchObject({
      http: expected.http,
      code: expected.code,
      status: null,
      runId: null,
      sessionId: null,
    });
    expect(answer.message).toMatch(expected.reason);
    expect(await sessionCount()).toBe(sessionsBefore);
    expect(await remembered()).toEqual(storeBefore);
    expect(await t.app.services.db.triggerRun.count({ where: { triggerId } })).toBe(runsBefore);
    const refusedAfter = await refusals();
    expect(refusedAfter).toMatchObject({ count: refusedBefore.count + 1, code: expected.code });
    expect(Date.parse(refusedAfter.at!)).toBeGreaterThanOrEqual(startedAt);
    expect(Date.parse(refusedAfter.at!)).toBeLessThanOrEqual(clock.now());
  }

  beforeAll(async () => {
    t = await startTestApp({
      now: clock.now,
      env: {
        SINGULACOMP_WEBHOOK_TOLERANCE_SECONDS: String(TOLERANCE),
        // The test pushes to the upstream behind the server's back and expects the next session to
        // start from that push: no ref cache window (SINGULACOMP_REF_CACHE_MS, a documented trade-off).
        SINGULACOMP_REF_CACHE_MS: '0',
      },
    });
    repo = createTestRepo({ 'README.md': '# triggers\n' });
    const res = await t.request(CreateProjectDocument, {
      input: { name: 'triggers', repositoryUrl: repo.url },
    });
    if (res.data?.createProject.__typename !== 'CreateProjectSuccess') throw new Error(JSON.stringify(res));
    projectId = res.data.createProject.project.projectId;
    const created = await t.request(CreateTriggerDocument, {
      input: { projectId, name: 'on-push', kind: 'WEBHOOK', prompt: 'Triage the push', baseRef: 'main' },
    });
    if (created.data?.createTrigger.__typename !== 'CreateTriggerSuccess')
      throw new Error(JSON.stringify(created));
    triggerId = created.data.createTrigger.trigger.triggerId;
    globalId = created.data.createTrigger.trigger.id;
    secret = created.data.createTrigger.webhookSecret!;
    expect(secret).toMatch(/^[0-9a-f]{64}$/);
    expect(created.data.createTrigger.trigger.webhookUrl).toContain(`/v1/triggers/${triggerId}/webhook`);
  });
  afterAll(async () => t?.stop());

  test('the signature is the documented HMAC-SHA256 of "<timestamp>.<body>"', () => {
    const body = '{"a":1}';
    expect(signWebhook('key', 1_700_000_000, body)).toBe(
      `sha256=${createHmac('sha256', 'key').update(`1700000000.${body}`).digest('hex')}`,
    );
  });

  test('a fresh signed delivery creates a session on its own branch, cut from baseRef at fire time', async () => {
    const head = repo.commit({ 'later.txt': 'after the trigger was created\n' }, 'later');
    const body = JSON.stringify({ ref: 'refs/heads/main', after: head, n: 1 });
    const timestamp = nowSeconds();
    const answer = await signed(body, timestamp);
    expect(answer).toMatchObject({ http: 202, code: 'SESSION_CREATED', status: 'SESSION_CREATED' });
    const session = await t.app.services.db.session.findUniqueOrThrow({ where: { id: answer.sessionId! } });
    expect(session).toMatchObject({
      branchName: answer.sessionId,
      baseRef: 'main',
      baseCommit: head,
      prompt: 'Triage the push',
    });
    expect(repo.branches()[answer.sessionId!]).toBe(head);
    expect((await runs())[0]).toMatchObject({ status: 'SESSION_CREATED', sessionId: answer.sessionId });
    expect(await remembered()).toContainEqual({
      signature: signWebhook(secret, timestamp, body),
      signedAt: timestamp,
    });
  });

  test('a bad or missing signature is counted and creates nothing', async () => {
    const body = JSON.stringify({ n: 2 });
    const timestamp = nowSeconds();
    await expectRefused(
      () => deliver(body, { timestamp, signature: signWebhook('not-the-secret', timestamp, body) }),
      { http: 401, code: 'SIGNATURE_INVALID', reason: /signature/ },
    );
    await expectRefused(() => deliver(body, { timestamp, signature: null }), {
      http: 401,
      code: 'SIGNATURE_INVALID',
      reason: /signature/,
    });
    // Signed for another timestamp than the one sent: the timestamp cannot be moved.
    await expectRefused(
      () => deliver(body, { timestamp, signature: signWebhook(secret, timestamp - 1, body) }),
      { http: 401, code: 'SIGNATURE_INVALID', reason: /signature/ },
    );
  });

  test('a flood of unsigned deliveries writes no row: each only counts on the trigger', async () => {
    const runsBefore = await t.app.services.db.triggerRun.count();
    const before = (await refusals()).count;
    for (let i = 0; i < 25; i++) {
      const answer = await deliver(JSON.stringify({ flood: i }), {
        timestamp: nowSeconds(),
        signature: 'sha256=00',
      });
      expect(answer).toMatchObject({ http: 401, code: 'SIGNATURE_INVALID', runId: null });
    }
    expect(await t.app.services.db.triggerRun.count()).toBe(runsBefore);
    expect(await refusals()).toMatchObject({ count: before + 25, code: 'SIGNATURE_INVALID' });
  });

  test('a schedule finer than one minute is a field error on create and on update', async () => {
    const create = (name: string, schedule: string) =>
      t.request(CreateTriggerDocument, { input: { projectId, name, kind: 'SCHEDULE', schedule } });
    for (const [i, schedule] of [
      '* * * * * *',
      '*/30 * * * * *',
      '0,30 * * * * *',
      '0-5 */2 * * * *',
    ].entries()) {
      const res = await create(`too-often-${i}`, schedule);
      expect(res.data?.createTrigger, schedule).toMatchObject({
        __typename: 'ValidationError',
        code: 'VALIDATION_FAILED',
        field: ['input', 'schedule'],
      });
      expect((res.data?.createTrigger as { message?: string } | undefined)?.message).toMatch(/once a minute/);
    }
    expect(await t.app.services.db.trigger.count({ where: { name: { startsWith: 'too-often-' } } })).toBe(0);

    // Once a minute is the finest: five fields, or a sixth (seconds) naming one second.
    const minutely = await create('minutely', '* * * * *');
    if (minutely.data?.createTrigger.__typename !== 'CreateTriggerSuccess')
      throw new Error(JSON.stringify(minutely));
    expect((await create('at-second-zero', '0 * * * * *')).data?.createTrigger.__typename).toBe(
      'CreateTriggerSuccess',
    );
    const update = await t.request(UpdateTriggerScheduleDocument, {
      input: { triggerId: minutely.data.createTrigger.trigger.id, schedule: '*/10 * * * * *' },
    });
    expect(update.data?.updateTrigger).toMatchObject({
      __typename: 'ValidationError',
      field: ['input', 'schedule'],
    });
    const stored = await t.app.services.db.trigger.findFirstOrThrow({ where: { name: 'minutely' } });
    expect(stored.schedule).toBe('* * * * *');
    await t.app.services.db.trigger.deleteMany({ where: { name: { in: ['minutely', 'at-second-zero'] } } });
  });

  test('a missing or malformed timestamp is refused, counted and creates nothing, even with a body-only signature', async () => {
    const body = JSON.stringify({ n: 5 });
    const bodyOnly = `sha256=${createHmac('sha256', secret).update(body).digest('hex')}`;
    for (const timestamp of [null, '', 'yesterday', '1.7e9', String(-nowSeconds())]) {
      await expectRefused(() => deliver(body, { timestamp, signature: bodyOnly }), {
        http: 401,
        code: 'TIMESTAMP_MISSING',
        reason: /Missing or malformed X-SingulaComp-Timestamp header/,
      });
    }
  });

  test('a stale or a future timestamp, correctly signed, is refused, counted and creates nothing', async () => {
    clock.freeze();
    try {
      await expectRefused(() => signed(JSON.stringify({ n: 6 }), nowSeconds() - TOLERANCE - 1), {
        http: 401,
        code: 'TIMESTAMP_OUTSIDE_WINDOW',
        reason: `X-SingulaComp-Timestamp is ${TOLERANCE + 1} s in the past; deliveries are accepted within ${TOLERANCE} s of the server's clock.`,
      });
      await expectRefused(() => signed(JSON.stringify({ n: 7 }), nowSeconds() + TOLERANCE + 1), {
        http: 401,
        code: 'TIMESTAMP_OUTSIDE_WINDOW',
        reason: `X-SingulaComp-Timestamp is ${TOLERANCE + 1} s in the future; deliveries are accepted within ${TOLERANCE} s of the server's clock.`,
      });
    } finally {
      clock.resume();
    }
  });

  test('a replay inside the window is counted and creates nothing', async () => {
    clock.freeze();
    try {
      // At the window's edge: accepted once, then refused as a replay however often it comes back.
      const body = JSON.stringify({ n: 3 });
      const timestamp = nowSeconds() - TOLERANCE;
      const first = await signed(body, timestamp);
      expect(first).toMatchObject({ http: 202, code: 'SESSION_CREATED' });
      for (let i = 0; i < 2; i++) {
        await expectRefused(() => signed(body, timestamp), {
          http: 409,
          code: 'REPLAYED',
          reason: /^Replayed delivery/,
        });
      }
      const store = await remembered();
      expect(store.filter((row) => row.signature === signWebhook(secret, timestamp, body))).toEqual([
        { signature: signWebhook(secret, timestamp, body), signedAt: timestamp },
      ]);
    } finally {
      clock.resume();
    }
  });

  test('the replay store forgets signatures once they are out of the window, and their replays are refused as stale', async () => {
    clock.freeze();
    try {
      const oldBody = JSON.stringify({ n: 8 });
      const oldAt = nowSeconds();
      expect(await signed(oldBody, oldAt)).toMatchObject({ http: 202, code: 'SESSION_CREATED' });
      expect((await remembered()).map((row) => row.signedAt)).toContain(oldAt);

      clock.advance((2 * TOLERANCE + 1) * 1000);
      // Still remembered until an accepted delivery prunes, and refused by the window meanwhile.
      await expectRefused(() => signed(oldBody, oldAt), {
        http: 401,
        code: 'TIMESTAMP_OUTSIDE_WINDOW',
        reason: /s in the past/,
      });
      const freshAt = nowSeconds();
      expect(await signed(JSON.stringify({ n: 9 }), freshAt)).toMatchObject({
        http: 202,
        code: 'SESSION_CREATED',
      });
      const store = await remembered();
      expect(store).toEqual([
        { signature: signWebhook(secret, freshAt, JSON.stringify({ n: 9 })), signedAt: freshAt },
      ]);
      // The store of the whole table, not just this trigger, holds nothing older than two windows.
      expect(
        await t.app.services.db.triggerWebhookDelivery.count({
          where: { signedAt: { lt: new Date((freshAt - 2 * TOLERANCE) * 1000) } },
        }),
      ).toBe(0);
      // A replay of the pruned signature is still refused: by the window.
      await expectRefused(() => signed(oldBody, oldAt), {
        http: 401,
        code: 'TIMESTAMP_OUTSIDE_WINDOW',
        reason: /s in the past/,
      });
    } finally {
      clock.resume();
    }
  });

  test('a firing over the concurrent-session limit is recorded as SKIPPED_LIMIT and creates nothing', async () => {
    const accountId = (await t.app.services.db.project.findUniqueOrThrow({ where: { id: projectId } }))
      .accountId;
    const live = await t.app.services.db.session.count({
      where: { accountId, status: { in: ['PROVISIONING', 'RUNNING'] } },
    });
    await t.app.services.db.account.update({
      where: { id: accountId },
      data: { concurrentSessionLimit: live },
    });
    try {
      const before = await sessionCount();
      const answer = await signed(JSON.stringify({ n: 4 }));
      expect(answer).toMatchObject({ http: 429, code: 'CONCURRENT_SESSION_LIMIT', sessionId: null });
      expect(await sessionCount()).toBe(before);
      expect((await runs())[0]).toMatchObject({
        status: 'SKIPPED_LIMIT',
        sessionId: null,
        reason: expect.stringContaining('Concurrent session limit'),
      });
    } finally {
      await t.app.services.db.account.update({
        where: { id: accountId },
        data: { concurrentSessionLimit: null },
      });
    }
  });
});

describe('schedule triggers across two server processes', () => {
  let database: TestDatabase;
  let a: ServerProcess;
  let b: ServerProcess;
  let repo: TestRepo;

  beforeAll(async () => {
    database = await createTestDatabase();
    // Schedules finer than a minute are refused by default; here every 2 s keeps the test short.
    const env = { SINGULACOMP_TRIGGER_TICK_MS: '100', SINGULACOMP_TRIGGER_MIN_INTERVAL_SECONDS: '2' };
    a = await startServerProcess({ databaseUrl: database.url, env });
    b = await startServerProcess({ databaseUrl: database.url, env });
    repo = createTestRepo({ 'README.md': '# schedule\n' });
  }, 300_000);
  afterAll(async () => {
    await Promise.all([a?.stop(), b?.stop()]);
    await database?.drop();
  });

  test('each due time fires once, creating one session per firing', async () => {
    const token = a.bootstrapToken() ?? b.bootstrapToken();
    const gql = async (server: ServerProcess, doc: Parameters<typeof print>[0], variables: unknown) =>
      (await postGraphql(server.graphqlUrl, { query: print(doc), variables }, token)).json.data as never;
    const project: { createProject: { project: { projectId: string } } } = await gql(
      a,
      CreateProjectDocument,
      {
        input: { name: 'sched', repositoryUrl: repo.url },
      },
    );
    const projectId = project.createProject.project.projectId;
    const created: { createTrigger: { trigger: { id: string; triggerId: string } } } = await gql(
      b,
      CreateTriggerDocument,
      {
        input: { projectId, name: 'every-2s', kind: 'SCHEDULE', schedule: '*/2 * * * * *' },
      },
    );
    const trigger = created.createTrigger.trigger;

    const sql = new pg.Client({ connectionString: database.url });
    await sql.connect();
    const count = async (where: string) =>
      Number(
        (
          await sql.query(`SELECT count(*) AS n FROM "TriggerRun" WHERE "triggerId" = $1 AND ${where}`, [
            trigger.triggerId,
          ])
        ).rows[0].n,
      );
    try {
      await waitFor(async () => (await count(`"status" = 'SESSION_CREATED'`)) >= 3, 60_000);
      await gql(a, PauseTriggerDocument, { input: { triggerId: trigger.id, paused: true } });
      // A firing that had already started when the pause landed still finishes.
      await waitFor(async () => (await count(`"reason" = 'firing'`)) === 0);
      const fired = (
        await sql.query<{ scheduledFor: Date; status: string; sessionId: string }>(
          'SELECT "scheduledFor", "status", "sessionId" FROM "TriggerRun" WHERE "triggerId" = $1 ORDER BY "scheduledFor"',
          [trigger.triggerId],
        )
      ).rows;
      const times = fired.map((run) => run.scheduledFor.toISOString());
      expect(new Set(times).size).toBe(times.length);
      for (const time of times) expect(new Date(time).getUTCSeconds() % 2).toBe(0);
      expect(fired.map((run) => run.status)).toEqual(fired.map(() => 'SESSION_CREATED'));
      const sessions = (
        await sql.query<{ id: string }>('SELECT "id" FROM "Session" WHERE "projectId" = $1', [projectId])
      ).rows;
      expect(sessions.map((s) => s.id).sort()).toEqual(fired.map((run) => run.sessionId).sort());
    } finally {
      await sql.end();
    }
  });
});
