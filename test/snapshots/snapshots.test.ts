// Content-addressed snapshots through sessions (R-IMG-3): the key follows the Dockerfile, the files
// it copies, the spec and the runtime version; unrelated files do not matter; concurrent sessions
// on a new key share one build across server processes. Platinum's emulator does the builds (its
// adapter sends the Dockerfile as is). The sandboxes here run the emulators' stand-in daemon: these
// tests are about images, and ten real daemons at once would only slow the shared machine down
// (test/providers-e2e runs the real one).
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, test } from 'vitest';
import { createSnapshotService } from '../../resolvers/snapshots/snapshots';
import { repoRef } from '../../resolvers/git/project-repo';
import { fakeDaemonCommand } from '../emulators/harness';
import {
  CreateSessionDocument,
  ProviderCreateProjectDocument,
  ProviderSessionDocument,
  ProviderSyncManifestDocument,
} from '../generated/graphql';
import { startPlatinum } from '../providers-e2e/fixtures';
import { type TestApp, startTestApp } from '../support/app';
import { createTestRepo } from '../support/git';
import { waitFor } from '../support/wait';

const manifest = (spec: { cpu: number; memory: number; disk: number }) => `sandbox:
  default: app
  templates:
    - slug: app
      name: App
      dockerfile: Dockerfile
      cpu: ${spec.cpu}
      memory: ${spec.memory}
      disk: ${spec.disk}
`;

describe('content-addressed snapshots through sessions', () => {
  const repo = createTestRepo({
    'singulacomp.yaml': manifest({ cpu: 2, memory: 4, disk: 20 }),
    Dockerfile: 'FROM ubuntu:24.04\nCOPY package.json /app/\nRUN echo ready\n',
    'package.json': '{"name":"app","version":"1.0.0"}\n',
    'README.md': '# app\n',
  });
  const entryDir = mkdtempSync(join(tmpdir(), 'sc-snap-entry-'));
  let emulated: Awaited<ReturnType<typeof startPlatinum>>;
  let t: TestApp;
  let projectId: string;

  async function sync(): Promise<void> {
    const res = await t.request(ProviderSyncManifestDocument, { input: { projectId } });
    if (res.data?.syncProjectManifest.__typename !== 'SyncProjectManifestSuccess')
      throw new Error(JSON.stringify(res));
  }

  async function start(app: TestApp = t): Promise<string> {
    const res = await app.request(CreateSessionDocument, { input: { projectId } }, t.adminToken);
    if (res.data?.createSession.__typename !== 'CreateSessionSuccess') throw new Error(JSON.stringify(res));
    return res.data.createSession.session.sessionId;
  }

  const read = async (id: string) => {
    const res = await t.request(ProviderSessionDocument, { id });
    if (!res.data?.session) throw new Error(JSON.stringify(res));
    return res.data.session;
  };

  const running = (id: string) =>
    waitFor(async () => {
      const s = await read(id);
      if (s.status === 'FAILED') throw new Error(`session failed: ${s.failureReason}`);
      return s.status === 'RUNNING' ? s : null;
    }, 60_000);

  /** Runs one session to RUNNING and returns its snapshot key. */
  async function keyOfNewSession(): Promise<string> {
    const s = await running(await start());
    expect(s.sandbox?.snapshot?.status).toBe('ACTIVE');
    return s.sandbox?.snapshot?.key as string;
  }

  beforeAll(async () => {
    emulated = await startPlatinum({ entryCommand: fakeDaemonCommand(entryDir), buildDelayMs: 1_500 });
    t = await startTestApp({
      providers: [emulated.provider],
      // The test pushes to the upstream behind the server's back and expects the next session to
      // start from that push: no ref cache window (SINGULACOMP_REF_CACHE_MS, a documented trade-off).
      env: { SINGULACOMP_REF_CACHE_MS: '0' },
    });
    const created = await t.request(ProviderCreateProjectDocument, {
      input: { name: 'snapshots', repositoryUrl: repo.url, provider: 'PLATINUM' },
    });
    if (created.data?.createProject.__typename !== 'CreateProjectSuccess')
      throw new Error(JSON.stringify(created));
    projectId = created.data.createProject.project.id;
    await sync();
  });

  afterEach(async () => {
    const live = await t.app.services.db.session.findMany({
      where: { status: { in: ['PROVISIONING', 'RUNNING'] } },
    });
    for (const s of live) await t.app.services.sessions.stopInternal(s.id, 'USER');
    await t.app.services.provisioner.drain();
  });

  afterAll(async () => {
    await t?.stop();
    await emulated?.close();
    rmSync(entryDir, { recursive: true, force: true });
  });

  test('the key changes with one byte of the Dockerfile, of a copied file, of the spec or of the runtime version, and not with an unrelated file', async () => {
    const k1 = await keyOfNewSession();
    expect(k1).toMatch(/^[0-9a-f]{64}$/);
    expect(emulated.builds()).toBe(1);

    // Same commit: reuse.
    expect(await keyOfNewSession()).toBe(k1);
    // An unrelated file: same key, no build.
    repo.commit({ 'README.md': '# app, edited\n' });
    expect(await keyOfNewSession()).toBe(k1);
    expect(emulated.builds()).toBe(1);

    // A byte of a file the Dockerfile copies.
    repo.commit({ 'package.json': '{"name":"app","version":"1.0.1"}\n' });
    const k2 = await keyOfNewSession();
    expect(k2).not.toBe(k1);
    expect(emulated.builds()).toBe(2);

    // A byte of the Dockerfile.
    repo.commit({ Dockerfile: 'FROM ubuntu:24.04\nCOPY package.json /app/\nRUN echo readY\n' });
    const k3 = await keyOfNewSession();
    expect(new Set([k1, k2, k3]).size).toBe(3);
    expect(emulated.builds()).toBe(3);

    // The spec (through the manifest).
    repo.commit({ 'singulacomp.yaml': manifest({ cpu: 3, memory: 4, disk: 20 }) });
    await sync();
    const id = await start();
    const s = await running(id);
    const k4 = s.sandbox?.snapshot?.key as string;
    expect(s.sandbox?.cpu).toBe(3);
    expect(new Set([k1, k2, k3, k4]).size).toBe(4);
    expect(emulated.builds()).toBe(4);
    expect(s.template?.snapshot?.key).toBe(k4);

    // The runtime version: the same inputs planned by a server with another runtime version.
    const session = await t.app.services.db.session.findUniqueOrThrow({
      where: { id },
      include: { project: true },
    });
    const input = {
      repo: repoRef(session.project, t.app.services.keys.encryption),
      commit: session.baseCommit as string,
      template: { slug: 'app', dockerfile: 'Dockerfile', image: null },
      spec: { cpu: 3, memoryGiB: 4, diskGiB: 20 },
    };
    const same = await t.app.services.snapshots.plan(input);
    expect(same.key).toBe(k4);
    expect(same.contextFiles).toEqual(['package.json']);
    const other = createSnapshotService({
      db: t.app.services.db,
      git: t.app.services.git,
      logger: t.app.services.logger,
      runtimeVersion: '0.1.1',
    });
    expect((await other.plan(input)).key).not.toBe(k4);

    const rows = await t.app.services.db.snapshot.findMany({ where: { provider: 'PLATINUM' } });
    expect(rows.map((r) => r.status)).toEqual(['ACTIVE', 'ACTIVE', 'ACTIVE', 'ACTIVE']);
    expect(emulated.requests().filter((r) => r.method === 'POST' && r.path === '/v1/images')).toHaveLength(4);
  }, 180_000);

  test('ten concurrent sessions on a new key, split across two server instances sharing PostgreSQL, trigger exactly one build and show PREPARING_IMAGE while they wait', async () => {
    repo.commit({ 'package.json': '{"name":"app","version":"2.0.0"}\n' });
    const second = await startTestApp({
      databaseUrl: t.database?.url as string,
      // Shares the data dir too: it holds the bootstrap token and the git cache (locks work across processes).
      dataDir: t.dataDir,
      providers: [emulated.provider],
      env: { SINGULACOMP_REF_CACHE_MS: '0' },
    });
    // The build waits for the test: under load, sessions that reached the build after a timed
    // build had ended started from its snapshot, and the polls never saw two of them wait.
    const releaseBuild = emulated.emulator.holdImageBuilds();
    try {
      const buildsBefore = emulated.builds();
      const ids = await Promise.all(Array.from({ length: 10 }, (_, i) => start(i % 2 === 0 ? t : second)));
      const phases = await waitFor(async () => {
        const all = await Promise.all(ids.map(read));
        const preparing = all.filter((s) => s.provisioningPhase === 'PREPARING_IMAGE');
        return preparing.length >= 2 ? preparing : null;
      });
      expect(phases.every((s) => s.status === 'PROVISIONING')).toBe(true);
      releaseBuild();
      const sessions = await Promise.all(ids.map(running));
      expect(emulated.builds() - buildsBefore).toBe(1);
      const keys = new Set(sessions.map((s) => s.sandbox?.snapshot?.key));
      expect(keys.size).toBe(1);
      expect(sessions.every((s) => s.provisioningPhase === null)).toBe(true);
      const rows = await t.app.services.db.snapshot.findMany({ where: { key: [...keys][0] as string } });
      expect(rows).toHaveLength(1);
      expect(rows[0]?.status).toBe('ACTIVE');
    } finally {
      releaseBuild();
      const live = await t.app.services.db.session.findMany({
        where: { status: { in: ['PROVISIONING', 'RUNNING'] } },
      });
      for (const s of live) await t.app.services.sessions.stopInternal(s.id, 'USER');
      await t.app.services.provisioner.drain();
      await second.app.services.provisioner.drain();
      await second.stop();
    }
  }, 180_000);

  test("a spec above the provider's own caps is clamped further, with a warning on the template and the sandbox", async () => {
    repo.commit({ 'singulacomp.yaml': manifest({ cpu: 2, memory: 128, disk: 20 }) });
    await sync();
    const s = await running(await start());
    expect(s.sandbox?.memoryGiB).toBe(64);
    const warning = 'memoryGiB: 128 GiB exceeds the PLATINUM cap of 64; clamped to 64';
    expect(s.sandbox?.warnings).toEqual([warning]);
    expect(s.template?.warnings).toContain(warning);
  });
});
