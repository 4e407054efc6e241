// Change requests against a real upstream: each merge method lands the expected commit on the
// default branch upstream; a conflict, or a fast-forward over a moved base, changes nothing.
import { execFile } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import {
  ChangeRequestUpdatedDocument,
  CloseChangeRequestDocument,
  CreateProjectDocument,
  CreateSessionDocument,
  MergeChangeRequestDocument,
  OpenChangeRequestDocument,
  ProjectChangeRequestsDocument,
} from '../generated/graphql';
import { openSocket, watch } from '../realtime/helpers';
import { type TestApp, startTestApp } from '../support/app';
import { type TestClock, createTestClock } from '../support/clock';
import { type TestRepo, createTestRepo, git } from '../support/git';

const run = promisify(execFile);

/** How far the server's clock runs ahead of the wall clock here: mergedAt and closedAt come from it. */
const CLOCK_AHEAD_MS = 3_600_000;

describe('change requests', () => {
  let t: TestApp;
  let repo: TestRepo;
  let projectId: string;
  let scratch: string;
  let clock: TestClock;

  /** The row of a change request by its global id. */
  const row = (id: string) =>
    t.app.services.db.changeRequest.findUniqueOrThrow({
      where: { id: Buffer.from(id, 'base64').toString().split(':')[1]! },
    });

  // Asynchronous: the server runs in this process, and a blocked event loop makes it drop
  // keep-alive connections the client is about to reuse.
  const gitAsync = async (...args: string[]) =>
    (
      await run('git', args, { cwd: scratch, env: { ...process.env, GIT_CONFIG_GLOBAL: '/dev/null' } })
    ).stdout.trim();

  /** Commits `files` on top of `branch` upstream (as someone pushing to it) and returns the commit. */
  async function commitOn(
    branch: string,
    files: Record<string, string>,
    message = 'change',
  ): Promise<string> {
    await gitAsync('fetch', '-q', repo.url, `refs/heads/${branch}`);
    await gitAsync('checkout', '-q', '--detach', 'FETCH_HEAD');
    for (const [path, content] of Object.entries(files)) writeFileSync(join(scratch, path), content);
    await gitAsync('add', '-A');
    await gitAsync('commit', '-q', '-m', message);
    await gitAsync('push', '-q', repo.url, `HEAD:refs/heads/${branch}`);
    return gitAsync('rev-parse', 'HEAD');
  }

  async function newSession(): Promise<{ id: string; sessionId: string }> {
    const res = await t.request(CreateSessionDocument, { input: { projectId } });
    if (res.data?.createSession.__typename !== 'CreateSessionSuccess') throw new Error(JSON.stringify(res));
    return res.data.createSession.session;
  }

  async function open(sessionId: string, title = 'Change', token?: string) {
    const res = await t.request(
      OpenChangeRequestDocument,
      { input: { sessionId, title, description: 'Why it matters.' } },
      token,
    );
    if (res.data?.openChangeRequest.__typename !== 'OpenChangeRequestSuccess')
      throw new Error(JSON.stringify(res));
    return res.data.openChangeRequest.changeRequest;
  }

  async function merge(changeRequestId: string, method: 'MERGE' | 'SQUASH' | 'FAST_FORWARD', token?: string) {
    return t.request(MergeChangeRequestDocument, { input: { changeRequestId, method } }, token);
  }

  beforeAll(async () => {
    clock = createTestClock();
    clock.advance(CLOCK_AHEAD_MS);
    t = await startTestApp({ now: clock.now });
    repo = createTestRepo({ 'README.md': '# cr\n', 'shared.txt': 'line one\nline two\n' });
    scratch = mkdtempSync(join(tmpdir(), 'sc-cr-'));
    git(scratch, 'init', '-q');
    git(scratch, 'config', 'user.name', 'Pusher');
    git(scratch, 'config', 'user.email', 'pusher@example.com');
    const res = await t.request(CreateProjectDocument, { input: { name: 'cr', repositoryUrl: repo.url } });
    if (res.data?.createProject.__typename !== 'CreateProjectSuccess') throw new Error(JSON.stringify(res));
    projectId = res.data.createProject.project.projectId;
  });
  afterAll(async () => t?.stop());

  test('opening reports head and base commits and diff statistics, and the project lists it', async () => {
    const s = await newSession();
    const head = await commitOn(s.sessionId, { 'feature.txt': 'a\nb\nc\n', 'README.md': '# cr!\n' });
    const cr = await open(s.sessionId, 'Add feature');
    expect(cr).toMatchObject({
      status: 'OPEN',
      headRef: s.sessionId,
      baseRef: 'main',
      headCommit: head,
      baseCommit: repo.head(),
      filesChanged: 2,
      additions: 4,
      deletions: 1,
      mergeable: true,
      conflicts: [],
      mergeCommit: null,
    });
    const listed = await t.request(ProjectChangeRequestsDocument, { id: projectId, status: 'OPEN' });
    expect(listed.data?.project?.changeRequests.edges.map((e) => e.node.id)).toContain(cr.id);

    const again = await t.request(OpenChangeRequestDocument, {
      input: { sessionId: s.sessionId, title: 'Twice' },
    });
    expect(again.data?.openChangeRequest).toMatchObject({ __typename: 'ConflictError', code: 'CONFLICT' });
  });

  test('FAST_FORWARD moves the default branch upstream to the session head', async () => {
    const s = await newSession();
    const head = await commitOn(s.sessionId, { 'ff.txt': 'ff\n' });
    const cr = await open(s.sessionId, 'Fast forward');
    const res = await merge(cr.id, 'FAST_FORWARD');
    expect(res.data?.mergeChangeRequest).toMatchObject({
      __typename: 'MergeChangeRequestSuccess',
      changeRequest: { status: 'MERGED', mergeMethod: 'FAST_FORWARD', mergeCommit: head },
    });
    expect(repo.head()).toBe(head);
    // Stamped on the server's clock (an hour ahead here), not the wall clock.
    const mergedAt = (await row(cr.id)).mergedAt!.getTime();
    expect(mergedAt).toBeGreaterThan(Date.now() + CLOCK_AHEAD_MS / 2);
    expect(mergedAt).toBeLessThanOrEqual(clock.now());
  });

  test('MERGE creates a merge commit of base and head on the default branch upstream', async () => {
    const s = await newSession();
    const head = await commitOn(s.sessionId, { 'merge-me.txt': 'session\n' });
    const base = await commitOn('main', { 'main-only.txt': 'main moved\n' });
    const cr = await open(s.sessionId, 'Merge me');
    const res = await merge(cr.id, 'MERGE');
    if (res.data?.mergeChangeRequest.__typename !== 'MergeChangeRequestSuccess')
      throw new Error(JSON.stringify(res));
    const merged = res.data.mergeChangeRequest.changeRequest.mergeCommit!;
    expect(repo.head()).toBe(merged);
    expect(git(repo.url, 'rev-list', '--parents', '-n', '1', merged).split(' ').slice(1)).toEqual([
      base,
      head,
    ]);
    expect(git(repo.url, 'show', `${merged}:merge-me.txt`)).toBe('session');
    expect(git(repo.url, 'show', `${merged}:main-only.txt`)).toBe('main moved');
    expect(git(repo.url, 'log', '-1', '--format=%s', merged)).toBe('Merge change request: Merge me');
  });

  test('SQUASH lands one commit whose parent is the base and whose tree holds the session work', async () => {
    const s = await newSession();
    await commitOn(s.sessionId, { 'squash-1.txt': 'one\n' });
    await commitOn(s.sessionId, { 'squash-2.txt': 'two\n' });
    const base = repo.head();
    const cr = await open(s.sessionId, 'Squashed work');
    const res = await merge(cr.id, 'SQUASH');
    if (res.data?.mergeChangeRequest.__typename !== 'MergeChangeRequestSuccess')
      throw new Error(JSON.stringify(res));
    const squashed = res.data.mergeChangeRequest.changeRequest.mergeCommit!;
    expect(repo.head()).toBe(squashed);
    expect(git(repo.url, 'rev-list', '--parents', '-n', '1', squashed).split(' ').slice(1)).toEqual([base]);
    expect(git(repo.url, 'log', '-1', '--format=%s', squashed)).toBe('Squashed work');
    expect(git(repo.url, 'show', `${squashed}:squash-2.txt`)).toBe('two');
  });

  test('a conflicting change request is refused with its paths and nothing changes', async () => {
    const s = await newSession();
    await commitOn(s.sessionId, { 'shared.txt': 'line one\nsession edit\n' });
    await commitOn('main', { 'shared.txt': 'line one\nmain edit\n' });
    const cr = await open(s.sessionId, 'Conflicts');
    expect(cr).toMatchObject({ mergeable: false, conflicts: ['shared.txt'] });
    const before = repo.branches();
    for (const method of ['MERGE', 'SQUASH'] as const) {
      const res = await merge(cr.id, method);
      expect(res.data?.mergeChangeRequest).toMatchObject({
        __typename: 'MergeConflictError',
        code: 'MERGE_CONFLICT',
        conflicts: ['shared.txt'],
      });
    }
    const ff = await merge(cr.id, 'FAST_FORWARD');
    expect(ff.data?.mergeChangeRequest).toMatchObject({
      __typename: 'NotFastForwardError',
      code: 'NOT_FAST_FORWARD',
    });
    expect(repo.branches()).toEqual(before);
    const listed = await t.request(ProjectChangeRequestsDocument, { id: projectId, status: 'OPEN' });
    expect(listed.data?.project?.changeRequests.edges.find((e) => e.node.id === cr.id)?.node.status).toBe(
      'OPEN',
    );
  });

  test('closing ends a change request: it cannot be merged afterwards, and watchers see each change', async () => {
    const s = await newSession();
    await commitOn(s.sessionId, { 'closed.txt': 'x\n' });
    const cr = await open(s.sessionId, 'To close');
    const socket = openSocket(t.wsUrl, t.adminToken);
    // after: the seq of the OPEN event, so the CLOSED event arrives even if it precedes the subscription.
    const updates = watch(socket, ChangeRequestUpdatedDocument, { id: cr.id, after: 1 });
    try {
      const closed = await t.request(CloseChangeRequestDocument, { input: { changeRequestId: cr.id } });
      expect(closed.data?.closeChangeRequest).toMatchObject({ changeRequest: { status: 'CLOSED' } });
      const closedAt = (await row(cr.id)).closedAt!.getTime();
      expect(closedAt).toBeGreaterThan(Date.now() + CLOCK_AHEAD_MS / 2);
      expect(closedAt).toBeLessThanOrEqual(clock.now());
      const [event] = await updates.waitForEvents(1);
      expect(event?.data.changeRequestUpdated).toMatchObject({ id: cr.id, status: 'CLOSED' });
    } finally {
      updates.unsubscribe();
      await socket.dispose();
    }
    const before = repo.head();
    const res = await merge(cr.id, 'MERGE');
    expect(res.data?.mergeChangeRequest).toMatchObject({ __typename: 'ConflictError' });
    expect(repo.head()).toBe(before);
  });

  test('merging needs projects:write: a read-only token and other accounts are refused', async () => {
    const s = await newSession();
    await commitOn(s.sessionId, { 'guarded.txt': 'x\n' });
    const cr = await open(s.sessionId, 'Guarded');
    const readOnly = await t.app.services.tokens.createPersonalAccessToken(
      {
        kind: 'USER',
        userId: (await t.app.services.db.user.findFirstOrThrow({ where: { role: 'ADMIN' } })).id,
        accountId: (await t.app.services.db.project.findUniqueOrThrow({ where: { id: projectId } }))
          .accountId,
        isAdmin: true,
        scopes: new Set(['projects:read', 'sessions:read']),
        tokenId: '',
        expiresAt: null,
      },
      { name: 'read-only', scopes: ['projects:read', 'sessions:read'] },
    );
    const denied = await merge(cr.id, 'MERGE', readOnly.secret);
    expect(denied.errors?.[0]?.extensions?.code).toBe('FORBIDDEN');
    const other = await t.seedAccount();
    const foreign = await merge(cr.id, 'MERGE', other.token);
    expect(foreign.data?.mergeChangeRequest).toMatchObject({ __typename: 'NotFoundError' });
    const stored = await t.app.services.db.changeRequest.findUniqueOrThrow({
      where: { id: cr.changeRequestId },
    });
    expect(stored.status).toBe('OPEN');
  });
});
