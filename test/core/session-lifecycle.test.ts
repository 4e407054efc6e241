import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import {
  CreateProjectDocument,
  CreateSessionDocument,
  SessionDocument,
  SessionsDocument,
  StopSessionDocument,
} from '../generated/graphql';
import { startSession } from '../leases/helpers';
import { type TestApp, startTestApp } from '../support/app';
import { createTestRepo, git } from '../support/git';
import { waitFor } from '../support/wait';

for (const db of ['postgres', 'pglite'] as const) {
  describe(`session lifecycle on ${db}`, () => {
    let t: TestApp;
    const repo = createTestRepo({ 'README.md': '# hello\n', 'src/a.txt': 'a\n' });
    let projectId: string;

    beforeAll(async () => {
      // No reconcile pass runs during the file: a session stopped for its sandbox's end was stopped
      // by the LOCAL entry's exit, not by a pass.
      t = await startTestApp({ db, env: { SINGULACOMP_RECONCILE_INTERVAL_MS: '3600000' } });
      const created = await t.request(CreateProjectDocument, {
        input: { name: 'demo', repositoryUrl: repo.url },
      });
      if (created.data?.createProject.__typename !== 'CreateProjectSuccess')
        throw new Error(JSON.stringify(created));
      projectId = created.data.createProject.project.id;
    });
    afterAll(async () => t?.stop());

    test('createSession cuts the session branch from the default branch and the sandbox starts', async () => {
      const base = repo.head();
      const res = await t.request(CreateSessionDocument, { input: { projectId, prompt: 'fix it' } });
      const payload = res.data?.createSession;
      if (payload?.__typename !== 'CreateSessionSuccess') throw new Error(JSON.stringify(res));
      const session = payload.session;
      expect(session.status).toBe('PROVISIONING');
      expect(session.branchName).toBe(session.sessionId);
      expect(session.baseRef).toBe('main');
      expect(session.baseCommit).toBe(base);
      expect(repo.branches()[session.sessionId]).toBe(base);

      const running = await waitFor(async () => {
        const r = await t.request(SessionDocument, { id: session.sessionId });
        return r.data?.session?.status === 'RUNNING' ? r.data.session : null;
      });
      expect(running.sandbox?.status).toBe('STARTED');
      expect(running.sandbox?.provider).toBe('LOCAL');

      const stored = await t.app.services.db.session.findUniqueOrThrow({ where: { id: session.sessionId } });
      expect(stored.status).toBe('RUNNING');
      expect(stored.prompt).toBe('fix it');
      // The workspace is a clone of the session branch.
      const sandbox = await t.app.services.db.sandbox.findUniqueOrThrow({ where: { sessionId: stored.id } });
      const workspace = `${t.dataDir}/sandboxes/${sandbox.providerSandboxId}/workspace`;
      expect(git(workspace, 'rev-parse', 'HEAD')).toBe(base);
      expect(git(workspace, 'rev-parse', '--abbrev-ref', 'HEAD')).toBe(session.sessionId);

      const stopped = await t.request(StopSessionDocument, { input: { sessionId: session.id } });
      expect(stopped.data?.stopSession).toMatchObject({
        __typename: 'StopSessionSuccess',
        session: { status: 'STOPPED', stopReason: 'USER' },
      });
      const after = await waitFor(async () => {
        const s = await t.app.services.db.sandbox.findUniqueOrThrow({ where: { sessionId: stored.id } });
        return s.status === 'DESTROYED' ? s : null;
      });
      expect(after.stopReason).toBe('USER');
      const tokens = await t.app.services.db.token.findMany({ where: { sessionId: stored.id } });
      expect(tokens.length).toBe(1);
      expect(tokens[0]?.revokedAt).not.toBeNull();
    });

    test("each change of a session reaches the account's list once, stamped with the session event's seq", async () => {
      const res = await t.request(CreateSessionDocument, { input: { projectId } });
      if (res.data?.createSession.__typename !== 'CreateSessionSuccess') throw new Error(JSON.stringify(res));
      const { id, sessionId } = res.data.createSession.session;
      await waitFor(
        async () => (await t.request(SessionDocument, { id: sessionId })).data?.session?.status === 'RUNNING',
      );
      await t.request(StopSessionDocument, { input: { sessionId: id } });
      type Row = { topic: string; seq: number; payload: Record<string, unknown> | string };
      const rows = await t.app.services.database.raw.query<Row>(
        `SELECT "topic", "seq", "payload" FROM "RealtimeEvent"
         WHERE ("topic" = 'sessionUpdated' AND "key" = $1) OR ("topic" = 'accountSessions' AND "payload"->>'sessionId' = $1)
         ORDER BY "topic", "seq"`,
        [sessionId],
      );
      const parsed = rows.map((r) => ({
        ...r,
        payload: (typeof r.payload === 'string' ? JSON.parse(r.payload) : r.payload) as Record<
          string,
          unknown
        >,
      }));
      const own = parsed.filter((r) => r.topic === 'sessionUpdated');
      const listed = parsed.filter((r) => r.topic === 'accountSessions');
      expect(own.map((r) => r.payload.status)).toEqual(
        expect.arrayContaining(['PROVISIONING', 'RUNNING', 'STOPPED']),
      );
      // One account event per session event, in the same order, carrying the same snapshot and the
      // session event's seq.
      expect(listed.map((r) => r.payload.sessionSeq)).toEqual(own.map((r) => r.seq));
      expect(listed.map(({ payload: { sessionSeq: _, ...rest } }) => rest)).toEqual(
        own.map((r) => r.payload),
      );
      const stored = await t.app.services.db.session.findUniqueOrThrow({ where: { id: sessionId } });
      expect(stored.seq).toBe(own.at(-1)?.seq);
    });

    test('session(id:) accepts the raw UUID and the global id alike', async () => {
      const res = await t.request(CreateSessionDocument, { input: { projectId } });
      if (res.data?.createSession.__typename !== 'CreateSessionSuccess') throw new Error(JSON.stringify(res));
      const { id, sessionId } = res.data.createSession.session;
      const byUuid = await t.request(SessionDocument, { id: sessionId });
      const byGlobal = await t.request(SessionDocument, { id });
      expect(byUuid.data?.session?.id).toBe(id);
      expect(byGlobal.data?.session?.sessionId).toBe(sessionId);
      const list = await t.request(SessionsDocument, { first: 1, projectId });
      expect(list.data?.sessions.edges).toHaveLength(1);
      expect(list.data?.sessions.pageInfo.hasNextPage).toBe(true);
    });

    test('an unknown base ref is a typed error that writes nothing', async () => {
      const before = await t.app.services.db.session.count();
      const res = await t.request(CreateSessionDocument, { input: { projectId, baseRef: 'no-such-branch' } });
      expect(res.data?.createSession).toMatchObject({
        __typename: 'BaseRefNotFoundError',
        code: 'BASE_REF_NOT_FOUND',
        field: ['input', 'baseRef'],
      });
      expect(await t.app.services.db.session.count()).toBe(before);
    });

    test('a session whose sandbox entry exits on its own fails at once, saying how, and its sandbox is destroyed', async () => {
      const { sessionId, sandboxId } = await startSession(t, projectId);
      const sandbox = await t.app.services.db.sandbox.findUniqueOrThrow({ where: { id: sandboxId } });
      const dir = join(t.dataDir, 'sandboxes', sandbox.providerSandboxId!);
      const pid = Number(readFileSync(join(dir, 'entry.pid'), 'utf8'));
      // Killed from outside (an OOM killer, an operator): the entry and its process group.
      process.kill(-pid, 'SIGKILL');

      const failed = await waitFor(async () => {
        const r = await t.request(SessionDocument, { id: sessionId });
        return r.data?.session?.status === 'FAILED' ? r.data.session : null;
      });
      expect(failed.stopReason).toBe('FAILED');
      const session = await t.app.services.db.session.findUniqueOrThrow({ where: { id: sessionId } });
      expect(session.failureReason).toMatch(/^The sandbox's entry process was killed by SIGKILL/);
      const row = await waitFor(async () => {
        const s = await t.app.services.db.sandbox.findUniqueOrThrow({ where: { sessionId } });
        return s.status === 'DESTROYED' ? s : null;
      });
      expect(row.stopReason).toBe('FAILED');
      expect(row.runningSince).toBeNull();
      expect(existsSync(dir)).toBe(false);
      const tokens = await t.app.services.db.token.findMany({ where: { sessionId } });
      expect(tokens.map((token) => token.revokedAt === null)).toEqual([false]);
    });
  });
}
