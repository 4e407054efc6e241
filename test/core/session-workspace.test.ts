// The workspace view's server side (R-REC-1, R-REC-2) on a real server, PostgreSQL and git: the
// session branch's diff, tree and files from the mirror (also once the upstream is gone), the ports
// a daemon reports, the live and kept log tail, the record's writes and its retention.
import { existsSync, readFileSync, renameSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { ApiClient } from '../../agent/api-client';
import { createLogger } from '../../agent/logger';
import { PortWatch } from '../../agent/port-watch';
import { createSessionRecord } from '../../resolvers/sessions/record';
import {
  ReportSandboxPortsDocument,
  SandboxDiagnosticsDocument,
  SessionRecordDocument,
  SessionWorkspaceDocument,
  StopSessionDocument,
} from '../generated/graphql';
import { type LiveSession, createProject, startSession } from '../leases/helpers';
import { type TestApp, startTestApp } from '../support/app';
import { type TestRepo, createTestRepo } from '../support/git';
import { waitFor } from '../support/wait';

describe('the session branch, ports and logs through the API', () => {
  let t: TestApp;
  let repo: TestRepo;
  let s: LiveSession;
  let other: LiveSession;

  beforeAll(async () => {
    repo = createTestRepo({ 'README.md': '# workspace\n', 'old.txt': 'to be renamed\nline two\n' });
    t = await startTestApp({ env: { SINGULACOMP_LOCAL_ENTRY: 'echo hello-from-entry; exec sleep 600' } });
    const projectId = await createProject(t, repo.url);
    s = await startSession(t, projectId);
    other = await startSession(t, projectId);
    // What the agent would push to its branch through the git proxy.
    repo.git('fetch', '-q', 'origin');
    repo.git('checkout', '-q', '-b', s.sessionId, `origin/${s.sessionId}`);
    repo.git('mv', 'old.txt', 'renamed.txt');
    repo.commit({
      'README.md': '# workspace\n\nEdited by the agent.\n',
      'src/app.ts': 'export const answer = 42;\n',
      'logo.bin': Buffer.from([0, 1, 2, 3, 0, 255]),
    });
  });
  afterAll(async () => {
    // The last test stopped this server's app already; stop() still drops its database.
    await t?.stop().catch(() => {});
    repo?.remove();
  });

  const workspace = (path: string | null, dir: string | null, file: string) =>
    t.request(SessionWorkspaceDocument, { id: s.sessionId, path, dir, file });

  test('changes lists each file the branch changed with its unified diff; tree and file read the branch', async () => {
    const res = await workspace(null, null, 'src/app.ts');
    expect(res.errors).toBeUndefined();
    const session = res.data!.session!;
    const changes = session.changes!;
    const byPath = Object.fromEntries(changes.files.map((f) => [f.path, f]));
    expect(Object.keys(byPath).sort()).toEqual(['README.md', 'logo.bin', 'renamed.txt', 'src/app.ts']);
    expect(byPath['README.md']).toMatchObject({
      status: 'MODIFIED',
      additions: 2,
      deletions: 0,
      binary: false,
    });
    expect(byPath['README.md']!.patch).toContain('+Edited by the agent.');
    expect(byPath['README.md']!.patch).toMatch(/^diff --git a\/README.md b\/README.md\n/);
    expect(byPath['src/app.ts']).toMatchObject({ status: 'ADDED', additions: 1, deletions: 0 });
    expect(byPath['src/app.ts']!.patch).toContain('+export const answer = 42;');
    expect(byPath['renamed.txt']).toMatchObject({ status: 'RENAMED', previousPath: 'old.txt' });
    expect(byPath['logo.bin']).toMatchObject({ status: 'ADDED', binary: true, patch: null });
    expect(changes.additions).toBe(3);
    expect(changes.headCommit).toBe(repo.branches()[s.sessionId]);

    expect(session.tree!.map((e) => [e.name, e.type])).toEqual([
      ['src', 'DIRECTORY'],
      ['logo.bin', 'FILE'],
      ['README.md', 'FILE'],
      ['renamed.txt', 'FILE'],
    ]);
    expect(session.file).toMatchObject({
      path: 'src/app.ts',
      text: 'export const answer = 42;\n',
      binary: false,
      truncated: false,
      sizeBytes: 26,
    });

    const one = await workspace('README.md', 'src', 'logo.bin');
    expect(one.data!.session!.changes!.files.map((f) => f.path)).toEqual(['README.md']);
    expect(one.data!.session!.tree!.map((e) => e.path)).toEqual(['src/app.ts']);
    expect(one.data!.session!.file).toMatchObject({ binary: true, text: null, sizeBytes: 6 });

    const missing = await workspace(null, 'nowhere', 'nothing.txt');
    expect(missing.data!.session!.tree).toBeNull();
    expect(missing.data!.session!.file).toBeNull();
    const climbing = await workspace(null, null, '../../etc/passwd');
    expect(climbing.errors?.[0]?.message).toContain('inside the repository');
  });

  test('a session without changes shows an empty diff', async () => {
    const res = await t.request(SessionWorkspaceDocument, { id: other.sessionId, file: 'README.md' });
    expect(res.data!.session!.changes).toMatchObject({ files: [], additions: 0, deletions: 0 });
    expect(res.data!.session!.file!.text).toBe('# workspace\n');
  });

  test('the daemon reports listening ports on change, its own excluded; another sandbox cannot report them', async () => {
    const api = new ApiClient({ apiUrl: t.url, token: s.token, logger: silentLogger(), maxAttempts: 1 });
    let found = new Set([3000, 4096, 8000]);
    const watch = new PortWatch({
      api,
      logger: silentLogger(),
      sandboxId: () => s.sandboxId,
      excluded: () => [4096, 8000],
      scan: async () => found,
    });
    const read = async () =>
      (await t.request(SandboxDiagnosticsDocument, { id: s.sessionId })).data!.session!.sandbox!;
    await watch.check();
    const first = await read();
    expect(first.ports).toEqual([3000]);
    await watch.check();
    expect((await read()).portsReportedAt).toBe(first.portsReportedAt);
    found = new Set([5173, 3000, 4096]);
    await watch.check();
    expect((await read()).ports).toEqual([3000, 5173]);
    await watch.stop();

    const foreign = await t.request(
      ReportSandboxPortsDocument,
      { input: { sandboxId: s.sandboxId, ports: [1] } },
      other.token,
    );
    expect(foreign.errors?.[0]?.extensions?.code).toBe('FORBIDDEN');
    const bad = await t.request(
      ReportSandboxPortsDocument,
      { input: { sandboxId: s.sandboxId, ports: [70_000] } },
      s.token,
    );
    expect(bad.data?.reportSandboxPorts).toMatchObject({ code: 'VALIDATION_FAILED' });
  });

  test('the log tail is read live, kept at stop, and LOCAL says its limits are not enforced', async () => {
    const live = await waitFor(async () => {
      const sandbox = (await t.request(SandboxDiagnosticsDocument, { id: other.sessionId })).data!.session!
        .sandbox!;
      return sandbox.logTail?.includes('hello-from-entry') ? sandbox : null;
    }, 10_000);
    expect(live).toMatchObject({ memoryLimitEnforced: false, cpuLimitEnforced: false });
    const stopped = await t.request(StopSessionDocument, { input: { sessionId: other.sessionId } });
    expect(stopped.data?.stopSession.__typename).toBe('StopSessionSuccess');
    const after = (await t.request(SandboxDiagnosticsDocument, { id: other.sessionId, maxBytes: 5 })).data!
      .session!.sandbox!;
    expect(after.status).toBe('DESTROYED');
    expect(after.ports).toEqual([]);
    const row = await t.app.services.db.sandboxReport.findUniqueOrThrow({
      where: { sandboxId: other.sandboxId },
    });
    expect(row.logTail).toContain('hello-from-entry');
    expect(after.logTail).toBe(row.logTail!.slice(-5));
  });

  test('the diff is read from the mirror once the upstream is gone', async () => {
    const before = (await workspace(null, null, 'src/app.ts')).data!.session!;
    renameSync(repo.url, `${repo.url}.gone`);
    try {
      const res = await workspace(null, null, 'src/app.ts');
      expect(res.errors).toBeUndefined();
      expect(res.data!.session!.changes).toEqual(before.changes);
      expect(res.data!.session!.file!.text).toBe('export const answer = 42;\n');
    } finally {
      renameSync(`${repo.url}.gone`, repo.url);
    }
  });

  test('the record folds deltas into their part, cuts long output with a marker, and retention deletes ended records', async () => {
    const record = createSessionRecord({
      db: t.app.services.db,
      sql: t.app.services.database.raw,
      logger: t.app.services.logger,
      maxOutputChars: 2_048,
      retentionMs: 60_000,
      apiUrl: () => t.url,
      now: () => Date.now() + 120_000,
    });
    const url = () => 'unused';
    const sessionId = other.sessionId;
    const message = (id: string, role: string) => ({
      type: 'message.updated',
      properties: { info: { id, role, sessionID: 'oc', time: { created: 1_700_000_000_000 } } },
    });
    const part = (id: string, messageID: string, extra: Record<string, unknown>) => ({
      type: 'message.part.updated',
      properties: { part: { id, messageID, sessionID: 'oc', ...extra } },
    });
    const delta = (partID: string, text: string) => ({
      type: 'message.part.delta',
      properties: { partID, messageID: 'm2', field: 'text', delta: text },
    });
    // A part before its message, deltas in the same batch and in the next ones.
    await record.ingest(
      sessionId,
      [part('p1', 'm1', { type: 'text', text: 'hello' }), message('m1', 'user'), message('m2', 'assistant')],
      url,
    );
    await record.ingest(sessionId, [part('p2', 'm2', { type: 'text', text: '' }), delta('p2', 'Hel')], url);
    await record.ingest(sessionId, [delta('p2', 'lo '), delta('p2', 'there')], url);
    await record.ingest(
      sessionId,
      [
        part('p3', 'm2', {
          type: 'tool',
          tool: 'bash',
          callID: 'c1',
          state: {
            status: 'completed',
            input: { command: 'yes' },
            output: 'y\n'.repeat(5_000),
            time: { start: 1_000, end: 1_250 },
          },
        }),
      ],
      url,
    );
    const admin = (await t.app.services.tokens.authenticate(`Bearer ${t.adminToken}`))!;
    const messages = await record.messages(admin, { id: sessionId, accountId: admin.accountId });
    expect(messages.map((m) => [m.id, m.role, m.text])).toEqual([
      ['m1', 'user', 'hello'],
      ['m2', 'assistant', 'Hello there'],
    ]);
    const tool = messages[1]!.parts.find((p) => p.type === 'tool')!;
    expect(tool.toolOutput!.startsWith('y\ny\n')).toBe(true);
    expect(tool.toolOutput!.endsWith(`\n[… ${10_000 - 2_048} characters cut]`)).toBe(true);
    expect(tool).toMatchObject({
      outputTruncated: true,
      startedAt: 1_000,
      endedAt: 1_250,
      toolStatus: 'completed',
    });
    const api = await t.request(SessionRecordDocument, { id: sessionId });
    expect(api.data!.session!.messages.edges.map((e) => e.node.text)).toEqual(['hello', 'Hello there']);
    expect(api.data!.session!.messages.edges[1]!.node.parts[1]).toMatchObject({ durationMs: 250 });

    // The session stopped (previous test) more than the retention ago on this record's clock; the
    // running one keeps its record.
    await record.ingest(s.sessionId, [message('k1', 'user')], url);
    expect(await record.prune()).toBe(5);
    expect(await t.app.services.db.sessionRecordMessage.count({ where: { sessionId } })).toBe(0);
    expect(await t.app.services.db.sessionRecordMessage.count({ where: { sessionId: s.sessionId } })).toBe(1);
  });

  test('a LOCAL entry that ended while no server watched fails its session with the log tail on the next pass', async () => {
    const lost = await startSession(t, await createProject(t, repo.url));
    const sandbox = await t.app.services.db.sandbox.findUniqueOrThrow({ where: { id: lost.sandboxId } });
    const dir = join(t.dataDir, 'sandboxes', sandbox.providerSandboxId!);
    await waitFor(
      () => existsSync(join(dir, 'entry.log')) && readFileSync(join(dir, 'entry.log'), 'utf8').length > 0,
    );
    await t.app.stop();
    process.kill(-Number(readFileSync(join(dir, 'entry.pid'), 'utf8')), 'SIGKILL');
    const next = await startTestApp({
      databaseUrl: t.database!.url,
      dataDir: t.dataDir,
      env: { SINGULACOMP_LOCAL_ENTRY: 'echo hello-from-entry; exec sleep 600' },
    });
    try {
      await next.app.services.reconciler.reconcile();
      const session = await waitFor(async () => {
        const row = await next.app.services.db.session.findUniqueOrThrow({ where: { id: lost.sessionId } });
        return row.status === 'FAILED' ? row : null;
      });
      expect(session.failureReason).toMatch(
        /^The sandbox's entry process exited while no server process watched it/,
      );
      expect(session.failureReason).toContain('hello-from-entry');
    } finally {
      await next.stop();
    }
  });
});

const silentLogger = () => createLogger('silent');
