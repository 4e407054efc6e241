// The provider conformance suite's contract checks (test/providers/adapter-suite.ts, the same ones
// the Daytona, E2B and Platinum adapters pass) against the DOCKER adapter and a real engine: rootful
// Podman on a private socket. The profile gives what differs from a cloud account:
// - images: the checks' Dockerfile starts FROM the local base image (no registry is reachable) and
//   carries the runtime layer, as provisioning composes it;
// - the daemon stand-in runs inside the container (`node -e` of the emulators' stand-in), behind
//   the adapter's bridges;
// - credentials: a Docker Engine has no API key; a tcp DOCKER_HOST's are the TLS client
//   certificate, so the refusal check talks to a TLS front of the same engine (tls-front.ts) with a
//   certificate of another CA, and expects ProviderAuthError naming DOCKER_CERT_PATH;
// - previews are served through the daemon at the service URL's loopback address, not at
//   `<port>-<id>.<domain>`;
// - the account's largest spec is the platform's: an engine has no per-sandbox quota (cgroups
//   enforce what the template asks).
// The emulator checks (request logs, injected faults) need an emulator's insides and do not apply;
// what they cover for DOCKER is in docker-provider.test.ts (an unreachable engine, a failed build).
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Docker from 'dockerode';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { HARDWARE_LIMITS } from '../../image/spec';
import { composeSandboxDockerfile } from '../../image/dockerfile';
import { DEFAULT_RUNTIME_IMAGE_REPO, DockerProvider } from '../../resolvers/providers/docker';
import { buildRuntimePackage } from '../../scripts/build-runtime';
import { FAKE_DAEMON_SOURCE } from '../emulators/harness';
import { sandboxRequest } from '../emulators/request';
import { contractChecks, type ContractTarget } from '../providers/adapter-suite';
import { baseImage, type PodmanService, startPodmanService } from '../support/podman';
import { startTlsFront, type TlsFront } from './tls-front';

const RUNTIME_VERSION = '0.0.0-conformance';
const RUN = `${Date.now().toString(36)}-${process.pid}`;

let podman: PodmanService;
let tls: TlsFront;
let dir: string;
let runtimeDir: string;
let base: string;
let provider: DockerProvider;
let image: string;

/** A Dockerfile FROM the base image with the runtime layer appended, as provisioning sends it. */
function composed(dockerfile: string): string {
  const out = composeSandboxDockerfile(dockerfile, {
    runtimeVersion: RUNTIME_VERSION,
    packageFloor: false,
    runtimeImage: DEFAULT_RUNTIME_IMAGE_REPO,
  });
  if (!out.ok) throw new Error(out.error);
  return out.dockerfile;
}

function make(connection: { host?: string; tls?: { certPath: string } } = {}): DockerProvider {
  return new DockerProvider({
    ...(connection.host ? connection : { docker: new Docker({ socketPath: podman.socketPath }) }),
    dataDir: join(dir, 'sandboxes'),
    runtimeDir,
    runtimeVersion: RUNTIME_VERSION,
    packageFloor: false,
    apiPort: () => null,
    labels: podman.labels,
    entryCommand: ['node', '--input-type=module', '-e', FAKE_DAEMON_SOURCE],
    stopTimeoutSeconds: 2,
    retry: { maxAttempts: 2, baseDelayMs: 20, maxDelayMs: 50, jitter: false },
  });
}

beforeAll(async () => {
  base = baseImage();
  podman = await startPodmanService();
  dir = mkdtempSync(join(tmpdir(), 'sc-docker-conf-'));
  tls = await startTlsFront(podman.socketPath, dir);
  runtimeDir = (await buildRuntimePackage({ outDir: join(dir, 'runtime'), version: RUNTIME_VERSION }))
    .imageContext;
  provider = make();
  image = await provider.buildSnapshot({
    key: `conformance-${RUN}`,
    dockerfile: composed(`FROM ${base}\nLABEL test.run=${RUN}\n`),
    spec: { cpu: 1, memoryGiB: 1, diskGiB: 1 },
  });
});

afterAll(async () => {
  await provider?.close();
  await tls?.close();
  await podman?.stop();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

const target = (): ContractTarget => ({
  provider,
  request: () => ({
    ...sandboxRequest({ labels: { team: 'core' }, env: () => ({ SINGULACOMP_TOKEN: 'sandbox-jwt' }) }),
    snapshotRef: image,
  }),
});

describe('the DOCKER adapter against rootful Podman', () => {
  contractChecks(target, {
    refusedCredentials: {
      what: 'a TLS client certificate the engine does not trust',
      envVar: 'DOCKER_CERT_PATH',
      make: () => make({ host: tls.host, tls: { certPath: tls.untrusted } }),
    },
    get dockerfile() {
      return composed(`FROM ${base}\nRUN echo conformance\n`);
    },
    expectedPreviewHost: (sandbox) => new URL(sandbox.serviceUrl as string).host,
    stoppedState: 'STOPPED',
    serviceAccess: null,
    accountMax: {
      cpu: HARDWARE_LIMITS.cpu.max,
      memoryGiB: HARDWARE_LIMITS.memoryGiB.max,
      diskGiB: HARDWARE_LIMITS.diskGiB.max,
    },
    unknownSnapshotRef: `localhost/singulacomp-snapshot:never-built-${RUN}`,
    timeoutMs: 300_000,
  });

  test('the same engine over tcp with a trusted client certificate answers', async () => {
    const trusted = make({ host: tls.host, tls: { certPath: tls.trusted } });
    try {
      expect(await trusted.status('no-such-container')).toBe('DESTROYED');
      expect((await trusted.docker.version()).Components?.some((c) => /podman/i.test(c.Name))).toBe(true);
    } finally {
      await trusted.close();
    }
  });
});
