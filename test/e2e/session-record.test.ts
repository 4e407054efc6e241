// The session record end to end on LOCAL (R-REC-1): a real `opencode serve` whose stub model asks
// for a bash tool call, then answers. The record the control plane kept shows the user message, the
// tool call with its output and the answer after stopSession, after a server restart and in the
// download; deleteSession removes it. A sandbox whose entry exits fails with its exit code and the
// tail of its log (R-REC-2).
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import WebSocket from 'ws';
import {
  AgentSessionDocument,
  DeleteSessionDocument,
  SandboxDiagnosticsDocument,
  SendMessageDocument,
  SessionEventsDocument,
  SessionRecordDocument,
  StopSessionDocument,
} from '../generated/graphql';
import type { StubModelRequest } from '../fixtures/stub-model';
import { createProject, startSession } from '../leases/helpers';
import { openSocket, watch } from '../realtime/helpers';
import { type TestApp, startTestApp } from '../support/app';
import { createTestRepo } from '../support/git';
import { waitFor } from '../support/wait';
import { E2E_SETUP_TIMEOUT_MS, type E2e, startE2e } from './helpers';

const MARKER = 'record-marker-42';
const ANSWER = `The command printed ${MARKER}.`;

/** A tool call while the conversation has no tool result yet, then the answer. */
function toolThenAnswer(request: StubModelRequest) {
  const last = request.messages.at(-1) as { role?: string } | undefined;
  if (Array.isArray(request.body.tools) && last?.role !== 'tool') {
    return { tool: 'bash', input: { command: `echo ${MARKER}`, description: 'Print the marker' } };
  }
  return ANSWER;
}

type Record = NonNullable<Awaited<ReturnType<typeof readRecord>>>;

async function readRecord(t: TestApp, sessionId: string) {
  const res = await t.request(SessionRecordDocument, { id: sessionId });
  if (res.errors) throw new Error(JSON.stringify(res.errors));
  return res.data?.session ?? null;
}

function expectTurn(record: Record): void {
  const messages = record.messages.edges.map((edge) => edge.node);
  expect(messages[0]).toMatchObject({ role: 'user', text: 'Run the echo command.' });
  const parts = messages.flatMap((m) => m.parts);
  const tool = parts.find((p) => p.type === 'tool');
  expect(tool).toMatchObject({ tool: 'bash', toolStatus: 'completed', outputTruncated: false });
  expect(tool!.toolOutput).toContain(MARKER);
  expect(JSON.parse(tool!.toolInput!)).toMatchObject({ command: `echo ${MARKER}` });
  expect(tool!.startedAt).not.toBeNull();
  expect(tool!.durationMs).toBeGreaterThanOrEqual(0);
  const answer = messages.at(-1)!;
  expect(answer.role).toBe('assistant');
  expect(answer.text).toBe(ANSWER);
  expect(messages.filter((m) => m.role === 'user')).toHaveLength(1);
}

describe('the session record outlives the sandbox', () => {
  let e: E2e;
  let restarted: TestApp | null = null;
  let sessionId: string;

  beforeAll(async () => {
    e = await startE2e({ daemonEnv: { SINGULACOMP_ATTACHMENT_OFFLOAD: '0' } });
    const s = await startSession(e.t, await createProject(e.t, e.repo.url));
    sessionId = s.sessionId;
    await waitFor(async () => {
      const v = await e.t.request(AgentSessionDocument, { id: sessionId });
      return v.data?.session?.sandbox?.runtimeState === 'HEALTHY';
    }, 90_000);
  }, E2E_SETUP_TIMEOUT_MS);
  afterAll(async () => {
    await restarted?.stop();
    await e?.stop();
  });

  test("a writer opens OpenCode's PTY over the agent route's WebSocket; a read-only token is refused", async () => {
    const base = `${e.t.url}/v1/sessions/${sessionId}/agent`;
    const created = await fetch(`${base}/pty`, {
      method: 'POST',
      headers: { authorization: `Bearer ${e.t.adminToken}`, 'content-type': 'application/json' },
      body: JSON.stringify({ command: '/bin/sh', args: [] }),
    });
    expect(created.status).toBe(200);
    const pty = (await created.json()) as { id: string };
    const wsUrl = `${base.replace(/^http/, 'ws')}/pty/${pty.id}/connect`;

    const socket = new WebSocket(wsUrl, { headers: { authorization: `Bearer ${e.t.adminToken}` } });
    let output = '';
    socket.on('message', (data) => {
      output += data.toString();
    });
    await new Promise<void>((resolve, reject) => {
      socket.once('open', () => resolve());
      socket.once('error', reject);
    });
    socket.send('echo pty-$((40 + 2))\n');
    await waitFor(() => output.includes('pty-42'), 20_000, 'the shell to echo through the PTY');
    socket.close();

    const admin = await e.t.app.services.tokens.authenticate(`Bearer ${e.t.adminToken}`);
    if (admin?.kind !== 'USER') throw new Error('the bootstrap token is a user token');
    const { secret: reader } = await e.t.app.services.tokens.createPersonalAccessToken(admin, {
      name: 'read-only',
      scopes: ['sessions:read'],
    });
    const refused = new WebSocket(wsUrl, { headers: { authorization: `Bearer ${reader}` } });
    const status = await new Promise<number>((resolve, reject) => {
      refused.once('unexpected-response', (_req, res) => resolve(res.statusCode ?? 0));
      refused.once('open', () => reject(new Error('a read-only token opened the PTY')));
      refused.once('error', () => {});
    });
    refused.terminate();
    expect(status).toBe(403);
  });

  test('a turn that runs a tool is recorded as it streams and still reads back after stopSession', async ({
    onTestFailed,
  }) => {
    onTestFailed(async () => {
      console.error(`stub requests: ${e.stub.requests.length}\n${await e.describeSession(sessionId)}`);
    });
    e.stub.setReply(toolThenAnswer);
    const sent = await e.t.request(SendMessageDocument, {
      input: { sessionId, text: 'Run the echo command.' },
    });
    expect(sent.data?.sendMessage.__typename).toBe('SendMessageSuccess');
    const live = await waitFor(async () => {
      const record = await readRecord(e.t, sessionId);
      const last = record?.messages.edges.at(-1)?.node;
      return last?.role === 'assistant' && last.text === ANSWER && last.completedAt ? record : null;
    }, 90_000);
    expectTurn(live!);

    const stopped = await e.t.request(StopSessionDocument, { input: { sessionId } });
    expect(stopped.data?.stopSession.__typename).toBe('StopSessionSuccess');
    const after = await readRecord(e.t, sessionId);
    expect(after!.status).toBe('STOPPED');
    expectTurn(after!);
    expect(after!.messages).toEqual(live!.messages);
    // The sandbox is gone; its log tail was kept with the row.
    const diag = await e.t.request(SandboxDiagnosticsDocument, { id: sessionId, maxBytes: 4_096 });
    expect(diag.data?.session?.sandbox?.status).toBe('DESTROYED');
    expect(diag.data?.session?.sandbox?.logTail).toContain('daemon');
    expect(diag.data?.session?.sandbox?.memoryLimitEnforced).toBe(false);
  });

  test('the record survives a server restart and downloads as one JSON document', async () => {
    const before = await readRecord(e.t, sessionId);
    const url = e.t.database?.url;
    expect(url).toBeTruthy();
    await e.t.app.stop();
    restarted = await startTestApp({
      databaseUrl: url!,
      dataDir: e.t.dataDir,
      env: { SINGULACOMP_LOCAL_ENTRY: 'exec sleep 600' },
    });
    const token = e.t.adminToken;
    const res = await restarted.request(SessionRecordDocument, { id: sessionId }, token);
    expect(res.data?.session?.messages).toEqual(before!.messages);
    expectTurn(res.data!.session!);

    const recordUrl = res.data!.session!.recordUrl;
    expect(recordUrl).toBe(`${restarted.url}/v1/sessions/${sessionId}/record`);
    const download = await fetch(recordUrl, { headers: { authorization: `Bearer ${token}` } });
    expect(download.status).toBe(200);
    expect(download.headers.get('content-disposition')).toContain(`session-${sessionId}.json`);
    const document = (await download.json()) as {
      format: string;
      session: { id: string; status: string };
      messages: Array<{
        role: string;
        text: string;
        parts: Array<{ type: string; toolOutput: string | null }>;
      }>;
    };
    expect(document.format).toBe('singulacomp.session-record/1');
    expect(document.session).toMatchObject({ id: sessionId, status: 'STOPPED' });
    expect(document.messages.map((m) => m.role)).toEqual(
      res.data!.session!.messages.edges.map((edge) => edge.node.role),
    );
    expect(document.messages.flatMap((m) => m.parts).find((p) => p.type === 'tool')?.toolOutput).toContain(
      MARKER,
    );
    const anonymous = await fetch(recordUrl);
    expect(anonymous.status).toBe(401);
  });

  test('a sessionEvents resume the event log no longer keeps is served from the record', async () => {
    const t = restarted!;
    const current = await t.app.services.pubsub.currentSeq('sessionEvents', sessionId);
    expect(current).toBeGreaterThan(0);
    // What the hourly prune does to a stream older than an hour.
    await t.app.services.database.raw.query(`DELETE FROM "RealtimeEvent" WHERE "key" = $1`, [sessionId]);
    const socket = openSocket(t.wsUrl, e.t.adminToken);
    try {
      const stream = watch(socket, SessionEventsDocument, { sessionId, after: 0 });
      const record = (await readRecord(t, sessionId))!.messages.edges.map((edge) => edge.node);
      const expected = record.length + record.reduce((n, m) => n + m.parts.length, 0);
      const events = (await stream.waitForEvents(expected)).map((r) => r.data.sessionEvents);
      expect(events.every((ev) => ev.seq === current)).toBe(true);
      expect(
        events.filter((ev) => ev.kind === 'MESSAGE_UPDATED').map((ev) => [ev.messageId, ev.role]),
      ).toEqual(record.map((m) => [m.id, m.role]));
      const tool = events.find((ev) => ev.kind === 'TOOL_CALL');
      expect(tool?.part).toMatchObject({ type: 'tool', tool: 'bash', toolStatus: 'completed' });
      expect(events.filter((ev) => ev.kind === 'TEXT_DELTA')).toEqual([]);
      stream.unsubscribe();
    } finally {
      await socket.dispose();
    }
  });

  test("deleteSession by its owner removes the session's record; usage stays", async () => {
    const t = restarted!;
    const db = t.app.services.db;
    const sandbox = await db.sandbox.findUniqueOrThrow({ where: { sessionId } });
    const intervals = await db.sandboxInterval.count({ where: { sandboxId: sandbox.id } });
    expect(intervals).toBeGreaterThan(0);
    expect(await db.sandboxReport.count({ where: { sandboxId: sandbox.id } })).toBe(1);
    const other = await t.seedAccount();
    const foreign = await t.request(DeleteSessionDocument, { input: { sessionId } }, other.token);
    expect(foreign.data?.deleteSession).toMatchObject({ code: 'NOT_FOUND' });
    expect(await db.sessionRecordPart.count({ where: { sessionId } })).toBeGreaterThan(0);

    const deleted = await t.request(DeleteSessionDocument, { input: { sessionId } }, e.t.adminToken);
    expect(deleted.data?.deleteSession).toEqual({
      __typename: 'DeleteSessionSuccess',
      deletedSessionId: sessionId,
    });
    const after = await readRecord(t, sessionId);
    expect(after!.messages.edges).toEqual([]);
    expect(await db.sessionRecordMessage.count({ where: { sessionId } })).toBe(0);
    expect(await db.sessionRecordPart.count({ where: { sessionId } })).toBe(0);
    expect(await db.sandboxReport.count({ where: { sandboxId: sandbox.id } })).toBe(0);
    expect(await db.sandboxInterval.count({ where: { sandboxId: sandbox.id } })).toBe(intervals);
    const download = await fetch(`${t.url}/v1/sessions/${sessionId}/record`, {
      headers: { authorization: `Bearer ${e.t.adminToken}` },
    });
    expect(((await download.json()) as { messages: unknown[] }).messages).toEqual([]);
  });
});

describe('a sandbox that fails says why', () => {
  let t: TestApp;
  const repo = createTestRepo({ 'README.md': '# failing\n' });

  beforeAll(async () => {
    t = await startTestApp({
      env: {
        // Runs until the test lets it go, then fails the way a broken entry does.
        SINGULACOMP_LOCAL_ENTRY:
          'echo starting the agent; echo "fatal: config is broken" >&2; while [ ! -f {workspace}/.go ]; do sleep 0.1; done; exit 3',
      },
    });
  });
  afterAll(async () => {
    await t?.stop();
    repo.remove();
  });

  test("failureReason holds the entry's exit code and the tail of its log, which stays readable", async () => {
    const s = await startSession(t, await createProject(t, repo.url));
    const sandbox = await t.app.services.db.sandbox.findUniqueOrThrow({ where: { id: s.sandboxId } });
    writeFileSync(join(t.dataDir, 'sandboxes', sandbox.providerSandboxId!, 'workspace', '.go'), '');
    const failed = await waitFor(async () => {
      const res = await t.request(SandboxDiagnosticsDocument, { id: s.sessionId, maxBytes: 1_024 });
      return res.data?.session?.status === 'FAILED' ? res.data.session : null;
    }, 60_000);
    expect(failed.failureReason).toContain('exited with code 3');
    expect(failed.failureReason).toContain('fatal: config is broken');
    expect(failed.failureReason).toContain('starting the agent');
    expect(failed.sandbox?.logTail).toContain('fatal: config is broken');
    const row = await t.app.services.db.session.findUniqueOrThrow({ where: { id: s.sessionId } });
    expect(row.stopReason).toBe('FAILED');
  });
});
