// A session on DOCKER end to end, against rootful Podman: the template's image (FROM the local base
// image) is built through the Engine API with the runtime layer, the real daemon and OpenCode boot
// in a hardened container, a turn goes through the server's LLM gateway to the stub model, the
// telemetry shows the container's memory limit, a second session reuses the image, and stopping the
// session leaves no container behind.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Docker from 'dockerode';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { DockerProvider } from '../../resolvers/providers/docker';
import { buildRuntimePackage } from '../../scripts/build-runtime';
import { OFFLINE_OPENCODE_ENV } from '../fixtures/opencode-project';
import { type StubModel, startStubModel } from '../fixtures/stub-model';
import {
  AgentSessionDocument,
  ProviderSyncManifestDocument,
  SendMessageDocument,
  StopSessionDocument,
} from '../generated/graphql';
import { createProject, startSession } from '../leases/helpers';
import { type TestApp, startTestApp } from '../support/app';
import { createTestRepo, type TestRepo } from '../support/git';
import { baseImage, type PodmanService, startPodmanService } from '../support/podman';
import { waitFor } from '../support/wait';

const MEMORY_GIB = 2;

describe('a DOCKER session from create to stop', () => {
  let podman: PodmanService;
  let dir: string;
  let stub: StubModel;
  let repo: TestRepo;
  let t: TestApp;
  let provider: DockerProvider;
  let apiPort = 0;

  beforeAll(async () => {
    const base = baseImage();
    podman = await startPodmanService();
    dir = mkdtempSync(join(tmpdir(), 'sc-docker-e2e-'));
    const runtime = await buildRuntimePackage({ outDir: join(dir, 'runtime'), version: '0.0.0-test' });
    stub = await startStubModel({ reply: 'Done.' });
    repo = createTestRepo({
      'README.md': '# docker e2e\n',
      'singulacomp.yaml': `sandbox:\n  default: app\n  templates:\n    - slug: app\n      name: App\n      dockerfile: Dockerfile\n      cpu: 1\n      memory: ${MEMORY_GIB}\n      disk: 5\n`,
      // A label unique to this run keeps its snapshot key (and image) its own on the shared engine.
      Dockerfile: `FROM ${base}\nLABEL test.run=${Date.now()}-${process.pid}\nCOPY README.md /opt/readme.md\n`,
      '.opencode/opencode.json': `${JSON.stringify({
        $schema: 'https://opencode.ai/config.json',
        autoupdate: false,
        share: 'disabled',
        model: 'singulacomp/stub-model',
        small_model: 'singulacomp/stub-model',
        enabled_providers: ['singulacomp'],
      })}\n`,
    });
    let cloneWith: TestApp | null = null;
    provider = new DockerProvider({
      docker: new Docker({ socketPath: podman.socketPath }),
      dataDir: join(dir, 'sandboxes'),
      runtimeDir: runtime.imageContext,
      runtimeVersion: '0.0.0-test',
      packageFloor: false,
      apiPort: () => apiPort,
      labels: podman.labels,
      env: { ...OFFLINE_OPENCODE_ENV, SINGULACOMP_TELEMETRY_INTERVAL_MS: '1000' },
      clone: (source, branch, target, workspace) => {
        if (!cloneWith) throw new Error('app not started');
        return cloneWith.app.services.git.cloneWorkspace(source, branch, target, workspace);
      },
      stopTimeoutSeconds: 5,
    });
    t = await startTestApp({
      providers: [provider],
      env: {
        SINGULACOMP_LLM_OPENAI_BASE_URL: stub.baseURL,
        SINGULACOMP_LLM_OPENAI_API_KEY: 'sk-server-held',
        SINGULACOMP_RUNTIME_VERSION: '0.0.0-test',
      },
    });
    cloneWith = t;
    apiPort = Number(new URL(t.url).port);
  });

  afterAll(async () => {
    await t?.stop().catch(() => {});
    await provider?.close();
    await podman?.stop();
    await stub?.close();
    repo?.remove();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  test('create → RUNNING → agent ready → a turn through the gateway → stop, container gone; the image is reused', async ({
    onTestFailed,
  }) => {
    const projectId = await createProject(t, repo.url, 'DOCKER');
    const synced = await t.request(ProviderSyncManifestDocument, { input: { projectId } });
    expect(synced.data?.syncProjectManifest.__typename).toBe('SyncProjectManifestSuccess');
    const s = await startSession(t, projectId);
    const db = t.app.services.db;
    const sandbox = await db.sandbox.findUniqueOrThrow({
      where: { id: s.sandboxId },
      include: { snapshot: true },
    });
    onTestFailed(async () => {
      const logs = await provider.docker
        .getContainer(sandbox.providerSandboxId ?? '')
        .logs({ stdout: true, stderr: true, tail: 80 })
        .catch((e: unknown) => String(e));
      console.error(`container log:\n${String(logs)}`);
    });
    expect(sandbox.provider).toBe('DOCKER');
    expect(sandbox.snapshot?.status).toBe('ACTIVE');
    expect(sandbox.snapshot?.providerRef).toBe(`localhost/singulacomp-snapshot:${sandbox.snapshot?.key}`);
    expect(sandbox.snapshot?.buildLog).toMatch(/COPY README\.md \/opt\/readme\.md/);
    expect(provider.built).toHaveLength(1);

    await waitFor(
      async () => {
        const v = await t.request(AgentSessionDocument, { id: s.sessionId });
        return v.data?.session?.sandbox?.runtimeState === 'HEALTHY';
      },
      120_000,
      'the daemon in the container reports HEALTHY',
    );

    // Telemetry reads the container's cgroup: the template's memory, not the host's.
    const sample = await waitFor(
      () => db.telemetrySample.findFirst({ where: { sandboxId: s.sandboxId }, orderBy: { id: 'desc' } }),
      60_000,
      'a telemetry sample',
    );
    expect(sample.memoryLimitBytes).toBe(MEMORY_GIB * 1024 ** 3);

    stub.setReply('hello from the container');
    const before = stub.requests.length;
    const sent = await t.request(SendMessageDocument, {
      input: { sessionId: s.sessionId, text: 'Say hello.' },
    });
    expect(sent.data?.sendMessage.__typename).toBe('SendMessageSuccess');
    await waitFor(
      () => stub.requests.length > before,
      90_000,
      'the model call reaches the stub through the gateway',
    );
    // The upstream key is the server's: the sandbox's request carried only its own token.
    expect(JSON.stringify(stub.requests.at(-1))).toContain('sk-server-held');

    // A second session of the same template boots from the same image without a build.
    const second = await startSession(t, projectId);
    const secondSandbox = await db.sandbox.findUniqueOrThrow({ where: { id: second.sandboxId } });
    expect(secondSandbox.snapshotId).toBe(sandbox.snapshotId);
    expect(provider.built).toHaveLength(1);

    for (const session of [s, second]) {
      const stopped = await t.request(StopSessionDocument, { input: { sessionId: session.sessionId } });
      expect(stopped.data?.stopSession.__typename).toBe('StopSessionSuccess');
    }
    for (const row of [sandbox, secondSandbox]) {
      await waitFor(
        async () =>
          (await podman.api('GET', `/v1.41/containers/${row.providerSandboxId}/json`)).status === 404,
        60_000,
        `container of sandbox ${row.id} removed`,
      );
    }
  });
});
