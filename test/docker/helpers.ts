// A server whose DOCKER provider runs sandboxes on a private rootful Podman service: the runtime
// package built for the run, a project whose manifest template builds FROM the local base image, the
// LLM gateway pointed at the stub model. Shared by the walk-through test and the DOCKER bench.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Docker from 'dockerode';
import { DockerProvider } from '../../resolvers/providers/docker';
import { buildRuntimePackage } from '../../scripts/build-runtime';
import { GATEWAY_OPENCODE_CONFIG, OFFLINE_OPENCODE_ENV } from '../fixtures/opencode-project';
import { type StubModel, startStubModel } from '../fixtures/stub-model';
import { ProviderSyncManifestDocument } from '../generated/graphql';
import { createProject } from '../leases/helpers';
import { type TestApp, startTestApp } from '../support/app';
import { createTestRepo, type TestRepo } from '../support/git';
import { baseImage, type PodmanService, startPodmanService } from '../support/podman';

export const DOCKER_TEST_RUNTIME_VERSION = '0.0.0-test';

export interface DockerE2e {
  t: TestApp;
  provider: DockerProvider;
  podman: PodmanService;
  stub: StubModel;
  repo: TestRepo;
  /** The local base image the template builds FROM. */
  base: string;
  /** A DOCKER project with the manifest synced. */
  projectId: string;
  stop(): Promise<void>;
}

export async function startDockerE2e(
  options: { memoryGiB?: number; env?: Record<string, string> } = {},
): Promise<DockerE2e> {
  const base = baseImage();
  const podman = await startPodmanService();
  const dir = mkdtempSync(join(tmpdir(), 'sc-docker-e2e-'));
  const runtime = await buildRuntimePackage({
    outDir: join(dir, 'runtime'),
    version: DOCKER_TEST_RUNTIME_VERSION,
  });
  const stub = await startStubModel({ reply: 'Done.' });
  const repo = createTestRepo({
    'README.md': '# docker e2e\n',
    'singulacomp.yaml': `sandbox:\n  default: app\n  templates:\n    - slug: app\n      name: App\n      dockerfile: Dockerfile\n      cpu: 1\n      memory: ${options.memoryGiB ?? 2}\n      disk: 5\n`,
    // A label unique to this run keeps its snapshot key (and image) its own on the shared engine.
    Dockerfile: `FROM ${base}\nLABEL test.run=${Date.now()}-${process.pid}\nCOPY README.md /opt/readme.md\n`,
    '.opencode/opencode.json': `${JSON.stringify(GATEWAY_OPENCODE_CONFIG)}\n`,
  });
  let app: TestApp | null = null;
  let apiPort = 0;
  const provider = new DockerProvider({
    docker: new Docker({ socketPath: podman.socketPath }),
    dataDir: join(dir, 'sandboxes'),
    runtimeDir: runtime.imageContext,
    runtimeVersion: DOCKER_TEST_RUNTIME_VERSION,
    packageFloor: false,
    apiPort: () => apiPort,
    labels: podman.labels,
    env: { ...OFFLINE_OPENCODE_ENV, SINGULACOMP_TELEMETRY_INTERVAL_MS: '1000', ...options.env },
    clone: (source, branch, target, workspace) => {
      if (!app) throw new Error('app not started');
      return app.app.services.git.cloneWorkspace(source, branch, target, workspace);
    },
    stopTimeoutSeconds: 5,
  });
  const t = await startTestApp({
    providers: [provider],
    env: {
      SINGULACOMP_LLM_OPENAI_BASE_URL: stub.baseURL,
      SINGULACOMP_LLM_OPENAI_API_KEY: 'sk-server-held',
      SINGULACOMP_RUNTIME_VERSION: DOCKER_TEST_RUNTIME_VERSION,
    },
  });
  app = t;
  apiPort = Number(new URL(t.url).port);
  const projectId = await createProject(t, repo.url, 'DOCKER');
  const synced = await t.request(ProviderSyncManifestDocument, { input: { projectId } });
  if (synced.data?.syncProjectManifest.__typename !== 'SyncProjectManifestSuccess')
    throw new Error(`manifest sync failed: ${JSON.stringify(synced)}`);
  return {
    t,
    provider,
    podman,
    stub,
    repo,
    base,
    projectId,
    async stop() {
      await t.stop().catch(() => {});
      await provider.close();
      await podman.stop();
      await stub.close();
      repo.remove();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
