// Triggers against a real server and repository: a signed webhook creates a session on its own
// branch cut at fire time; bad signatures, replays and over-limit firings are recorded and create
// nothing; a schedule fires each due time once with two server processes on one database.
import { print } from 'graphql';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { signWebhook } from '../../resolvers/triggers/triggers';
import {
  CreateProjectDocument,
  CreateTriggerDocument,
  PauseTriggerDocument,
  TriggerRunsDocument,
} from '../generated/graphql';
import { type TestApp, startTestApp } from '../support/app';
import { createTestDatabase, type TestDatabase } from '../support/database';
import { createTestRepo, type TestRepo } from '../support/git';
import { type ServerProcess, postGraphql, startServerProcess } from '../support/server-process';
import { waitFor } from '../support/wait';

describe('webhook triggers', () => {
  let t: TestApp;
  let repo: TestRepo;
  let projectId: string;
  let triggerId: string;
  let globalId: string;
  let secret: string;

  const deliver = (body: string, signature: string | null) =>
    fetch(`${t.url}/v1/triggers/${triggerId}/webhook`, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        ...(signature ? { 'x-hub-signature-256': signature } : {}),
      },
      body,
    });
  const runs = async () => {
    const res = await t.request(TriggerRunsDocument, { id: globalId });
    const node = res.data?.node as {
      runs?: { edges: Array<{ node: { status: string; reason: string | null; sessionId: string | null } }> };
    };
    return node.runs!.edges.map((e) => e.node);
  };
  const sessionCount = () => t.app.services.db.session.count({ where: { projectId } });

  beforeAll(async () => {
    t = await startTestApp();
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
  }, 240_000);
  afterAll(async () => t?.stop());

  test('a signed delivery creates a session on its own branch, cut from baseRef at fire time', async () => {
    const head = repo.commit({ 'later.txt': 'after the trigger was created\n' }, 'later');
    const body = JSON.stringify({ ref: 'refs/heads/main', after: head, n: 1 });
    const response = await deliver(body, signWebhook(secret, body));
    const answer = (await response.json()) as { status: string; sessionId: string };
    expect(response.status).toBe(202);
    expect(answer.status).toBe('SESSION_CREATED');
    const session = await t.app.services.db.session.findUniqueOrThrow({ where: { id: answer.sessionId } });
    expect(session).toMatchObject({
      branchName: answer.sessionId,
      baseRef: 'main',
      baseCommit: head,
      prompt: 'Triage the push',
    });
    expect(repo.branches()[answer.sessionId]).toBe(head);
    expect((await runs())[0]).toMatchObject({ status: 'SESSION_CREATED', sessionId: answer.sessionId });
  }, 60_000);

  test('a bad or missing signature is recorded and creates nothing', async () => {
    const before = await sessionCount();
    const body = JSON.stringify({ n: 2 });
    expect((await deliver(body, signWebhook('not-the-secret', body))).status).toBe(401);
    expect((await deliver(body, null)).status).toBe(401);
    expect(await sessionCount()).toBe(before);
    expect((await runs()).slice(0, 2)).toEqual([
      expect.objectContaining({
        status: 'FAILED',
        sessionId: null,
        reason: expect.stringContaining('signature'),
      }),
      expect.objectContaining({
        status: 'FAILED',
        sessionId: null,
        reason: expect.stringContaining('signature'),
      }),
    ]);
  }, 60_000);

  test('a replayed delivery is recorded and creates nothing', async () => {
    const body = JSON.stringify({ n: 3 });
    const signature = signWebhook(secret, body);
    expect((await deliver(body, signature)).status).toBe(202);
    const before = await sessionCount();
    const replay = await deliver(body, signature);
    expect(replay.status).toBe(409);
    expect(await sessionCount()).toBe(before);
    expect((await runs())[0]).toMatchObject({
      status: 'FAILED',
      sessionId: null,
      reason: expect.stringContaining('Replayed'),
    });
  }, 60_000);

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
      const body = JSON.stringify({ n: 4 });
      const response = await deliver(body, signWebhook(secret, body));
      expect(response.status).toBe(429);
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
  }, 60_000);
});

describe('schedule triggers across two server processes', () => {
  let database: TestDatabase;
  let a: ServerProcess;
  let b: ServerProcess;
  let repo: TestRepo;

  beforeAll(async () => {
    database = await createTestDatabase();
    const env = { SINGULACOMP_TRIGGER_TICK_MS: '100' };
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
  }, 120_000);
});
