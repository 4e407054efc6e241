// The DOCKER adapter against a real Docker Engine API (rootful Podman on a private socket): images
// built through the API from the repository and the runtime layer, reused by key, rebuilt when a
// COPYed file changes, a failed build reported with the builder's message; containers with the
// template's limits enforced, no capabilities, a non-root user, a read-only root, no network but
// the forwarded API port, reachable through the forwarded service port, and gone after destroy.
import { execFileSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Docker from 'dockerode';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { composeSandboxDockerfile } from '../../image/dockerfile';
import { createGitTreeReader } from '../../image/repo-files';
import { computeSnapshotKey } from '../../image/snapshot';
import { LABEL_SANDBOX_ID } from '../../resolvers/providers/common';
import { DEFAULT_RUNTIME_IMAGE_REPO, DockerProvider } from '../../resolvers/providers/docker';
import {
  ProviderBuildError,
  ProviderError,
  ProviderNotFoundError,
  ProviderUnavailableError,
} from '../../resolvers/providers/errors';
import type { HardwareSpec } from '../../resolvers/providers/types';
import { buildRuntimePackage } from '../../scripts/build-runtime';
import { createTestRepo, type TestRepo } from '../support/git';
import { baseImage, type PodmanService, startPodmanService } from '../support/podman';
import { waitFor } from '../support/wait';

const RUNTIME_VERSION = '0.0.0-test';
const SPEC: HardwareSpec = { cpu: 1, memoryGiB: 1, diskGiB: 5 };
// Podman's storage is the machine's: a label of this run keeps its snapshot keys (and images) its own.
const RUN = randomUUID();

// The stand-in daemon: answers GET / on the service port with what the sandbox sees of itself.
const FACTS = `
const http = require('node:http');
const fs = require('node:fs');
const net = require('node:net');
const read = (p) => { try { return fs.readFileSync(p, 'utf8').trim(); } catch (e) { return 'ERR ' + e.code; } };
const tryWrite = (p) => { try { fs.writeFileSync(p, 'x'); return 'ok'; } catch (e) { return e.code; } };
const tryConnect = (host, port) => new Promise((resolve) => {
  const s = net.connect({ host, port, timeout: 2000 });
  s.on('connect', () => { s.destroy(); resolve('open'); });
  s.on('error', (e) => resolve(e.code));
  s.on('timeout', () => { s.destroy(); resolve('timeout'); });
});
http.createServer(async (req, res) => {
  let api;
  try { api = await (await fetch(process.env.SINGULACOMP_API_URL + '/ping')).text(); } catch (e) { api = 'ERR ' + e.message; }
  const status = read('/proc/self/status');
  res.end(JSON.stringify({
    uid: process.getuid(),
    capEff: /CapEff:\\s*(\\S+)/.exec(status)[1],
    noNewPrivs: /NoNewPrivs:\\s*(\\S+)/.exec(status)[1],
    memoryLimit: read('/sys/fs/cgroup/memory/memory.limit_in_bytes'),
    cpuQuota: read('/sys/fs/cgroup/cpu/cpu.cfs_quota_us'),
    pidsMax: read('/sys/fs/cgroup/pids/pids.max'),
    interfaces: read('/proc/net/dev').split('\\n').slice(2).map((l) => l.split(':')[0].trim()),
    rootWrite: tryWrite('/etc/probe'),
    workspaceWrite: tryWrite('/workspace/probe'),
    tmpWrite: tryWrite('/tmp/probe'),
    homeWrite: tryWrite(process.env.HOME + '/probe'),
    appFile: read('/opt/app.txt'),
    readme: read('/workspace/README.md'),
    opencode: fs.existsSync('/opt/singulacomp/bin/opencode'),
    postgres: await tryConnect('127.0.0.1', 5432),
    redis: await tryConnect('127.0.0.1', 6379),
    hostPostgres: await tryConnect(process.env.PROBE_HOST, 5432),
    hostRedis: await tryConnect(process.env.PROBE_HOST, 6379),
    api,
  }));
}).listen(8000, '127.0.0.1');
`;

let podman: PodmanService;
let base: string;
let dir: string;
let runtimeDir: string;
let repo: TestRepo;
let api: Server;
let apiPort: number;
let provider: DockerProvider;
const hostAddress = (): string => {
  // A non-loopback address of this host, where a database listening on all addresses would answer.
  const out = execFileSync('hostname', ['-I'], { encoding: 'utf8' }).trim().split(/\s+/)[0];
  return out || '192.0.2.1';
};

beforeAll(async () => {
  base = baseImage();
  podman = await startPodmanService();
  dir = mkdtempSync(join(tmpdir(), 'sc-docker-'));
  runtimeDir = (await buildRuntimePackage({ outDir: join(dir, 'runtime'), version: RUNTIME_VERSION }))
    .imageContext;
  api = createServer((req, res) => res.end(req.url === '/ping' ? 'api-ok' : 'no'));
  await new Promise<void>((resolve) => api.listen(0, '127.0.0.1', resolve));
  apiPort = (api.address() as { port: number }).port;
  repo = createTestRepo({
    'README.md': '# docker test\n',
    'app.txt': 'first\n',
    Dockerfile: `FROM ${base}\nLABEL test.run=${RUN}\nCOPY app.txt /opt/app.txt\n`,
  });
  provider = new DockerProvider({
    docker: new Docker({ socketPath: podman.socketPath }),
    dataDir: join(dir, 'sandboxes'),
    runtimeDir,
    runtimeVersion: RUNTIME_VERSION,
    packageFloor: false,
    apiPort: () => apiPort,
    labels: podman.labels,
    clone: async (source, branch, target) => {
      execFileSync('git', ['clone', '-q', '--branch', branch, source.url, target]);
    },
    entryCommand: ['node', '-e', FACTS],
    stopTimeoutSeconds: 2,
    retry: { maxAttempts: 2, baseDelayMs: 20, maxDelayMs: 50, jitter: false },
  });
});

afterAll(async () => {
  await provider?.close();
  await podman?.stop();
  api?.close();
  repo?.remove();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

const labelFilters = () => Object.entries(podman.labels).map(([k, v]) => `${k}=${v}`);

async function snapshotFor(commit: string) {
  const dockerfile = repo.git('show', `${commit}:Dockerfile`);
  const reader = createGitTreeReader(join(repo.url), commit);
  try {
    const { key } = await computeSnapshotKey({
      dockerfile,
      dockerfilePath: 'Dockerfile',
      spec: SPEC,
      runtimeVersion: RUNTIME_VERSION,
      packageFloor: false,
      runtimeImage: DEFAULT_RUNTIME_IMAGE_REPO,
      files: reader,
    });
    const composed = composeSandboxDockerfile(dockerfile, {
      runtimeVersion: RUNTIME_VERSION,
      packageFloor: false,
      runtimeImage: DEFAULT_RUNTIME_IMAGE_REPO,
    });
    if (!composed.ok) throw new Error(composed.error);
    return { key, dockerfile: composed.dockerfile, context: { gitDir: repo.url, commit } };
  } finally {
    reader.close();
  }
}

function request(snapshotRef: string) {
  const sandboxId = randomUUID();
  return {
    sandboxId,
    sessionId: randomUUID(),
    projectId: randomUUID(),
    installationId: 'docker-test',
    spec: SPEC,
    snapshotRef,
    env: { SINGULACOMP_TOKEN: 'sandbox-jwt', PROBE_HOST: hostAddress() },
    workspace: { repositoryUrl: repo.url, branch: 'main' },
    labels: { team: 'core' },
  };
}

describe('images', () => {
  test('built once per key, reused, rebuilt when a COPYed file changes; build output streamed', async () => {
    const first = await snapshotFor(repo.head());
    const lines: string[] = [];
    const ref = await provider.buildSnapshot({ ...first, spec: SPEC, onLog: (line) => lines.push(line) });
    expect(ref).toBe(`localhost/singulacomp-snapshot:${first.key}`);
    expect(lines.some((line) => /COPY app\.txt \/opt\/app\.txt/.test(line))).toBe(true);
    const builtBefore = provider.built.length;
    const again = await provider.buildSnapshot({ ...first, spec: SPEC });
    expect(again).toBe(ref);
    expect(provider.built.length).toBe(builtBefore);

    const changed = await snapshotFor(repo.commit({ 'app.txt': 'second\n' }));
    expect(changed.key).not.toBe(first.key);
    const changedRef = await provider.buildSnapshot({ ...changed, spec: SPEC });
    expect(provider.built.length).toBe(builtBefore + 1);
    const ids = await Promise.all(
      [ref, changedRef].map(async (r) => (await provider.docker.getImage(r).inspect()).Id),
    );
    expect(ids[0]).not.toBe(ids[1]);
    const labels = (await provider.docker.getImage(changedRef).inspect()).Config.Labels;
    expect(labels?.['singulacomp.snapshot-key']).toBe(changed.key);
  });

  test("a failed build fails with the builder's message", async () => {
    const broken = await snapshotFor(
      repo.commit({ Dockerfile: `FROM ${base}\nLABEL test.run=${RUN}\nCOPY missing.txt /opt/\n` }),
    );
    const error = await provider.buildSnapshot({ ...broken, spec: SPEC }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ProviderBuildError);
    expect((error as Error).message).toMatch(/missing\.txt/);
    repo.commit({ Dockerfile: `FROM ${base}\nLABEL test.run=${RUN}\nCOPY app.txt /opt/app.txt\n` });
  });

  test('prune removes snapshot images beyond the count that no container uses', async () => {
    const pruner = new DockerProvider({
      docker: provider.docker,
      dataDir: join(dir, 'sandboxes'),
      runtimeDir,
      runtimeVersion: RUNTIME_VERSION,
      packageFloor: false,
      apiPort: () => apiPort,
      labels: podman.labels,
      imageMaxCount: 1,
    });
    const before = await provider.docker.listImages({
      filters: JSON.stringify({ label: labelFilters() }),
    });
    expect(before.length).toBeGreaterThanOrEqual(2);
    const removed = await pruner.prune();
    expect(removed.length).toBe(before.length - 1);
    const after = await provider.docker.listImages({
      filters: JSON.stringify({ label: labelFilters() }),
    });
    expect(after.map((i) => i.Id)).toEqual([before.sort((a, b) => b.Created - a.Created)[0]!.Id]);
  });
});

describe('containers', () => {
  test('limits, hardening and network as the template and R-DOCK-1 say; stop, start, destroy', async () => {
    const snapshot = await snapshotFor(repo.head());
    const ref = await provider.buildSnapshot({ ...snapshot, spec: SPEC });
    const req = request(ref);
    const created = await provider.create(req);
    expect(created.state).toBe('STARTED');
    const facts = await waitFor(
      async () => {
        const res = await fetch(`${created.serviceUrl}/`);
        return res.ok ? ((await res.json()) as Record<string, unknown>) : null;
      },
      { timeoutMs: 60_000, intervalMs: 200 },
      'the stand-in daemon answers through the forwarded service port',
    );
    expect(facts.uid).toBe(1000);
    expect(facts.capEff).toBe('0000000000000000');
    expect(facts.noNewPrivs).toBe('1');
    expect(Number(facts.memoryLimit)).toBe(SPEC.memoryGiB * 1024 ** 3);
    expect(Number(facts.cpuQuota)).toBe(100_000);
    expect(facts.pidsMax).toBe('1024');
    expect(facts.interfaces).toEqual(['lo']);
    expect(facts.rootWrite).toBe('EROFS');
    expect(facts.workspaceWrite).toBe('ok');
    expect(facts.tmpWrite).toBe('ok');
    expect(facts.homeWrite).toBe('ok');
    expect(facts.appFile).toBe('second');
    expect(facts.readme).toBe('# docker test');
    expect(facts.opencode).toBe(true);
    expect(facts.api).toBe('api-ok');
    for (const probe of ['postgres', 'redis', 'hostPostgres', 'hostRedis'] as const) {
      expect(['ECONNREFUSED', 'ENETUNREACH', 'EHOSTUNREACH', 'timeout']).toContain(facts[probe]);
    }

    const tagged = await provider.listTagged('docker-test');
    expect(tagged).toContainEqual({
      providerSandboxId: created.providerSandboxId,
      state: 'STARTED',
      sandboxId: req.sandboxId,
      sessionId: req.sessionId,
    });
    const info = await provider.docker.getContainer(created.providerSandboxId).inspect();
    expect(info.Config.Labels?.[LABEL_SANDBOX_ID]).toBe(req.sandboxId);
    // Docker keeps "ALL"; Podman stores the list it expanded to.
    const dropped = (info.HostConfig.CapDrop ?? []).map((c: string) => c.replace(/^CAP_/, ''));
    expect(dropped.includes('ALL') || ['CHOWN', 'SETUID', 'NET_RAW'].every((c) => dropped.includes(c))).toBe(
      true,
    );
    expect(info.HostConfig.ReadonlyRootfs).toBe(true);

    await provider.keepAlive(created.providerSandboxId);
    expect((await provider.stop(created.providerSandboxId)).state).toBe('STOPPED');
    expect(await provider.status(created.providerSandboxId)).toBe('STOPPED');
    const restarted = await provider.start(created.providerSandboxId);
    expect(restarted.serviceUrl).toBe(created.serviceUrl);
    await waitFor(
      async () => (await fetch(`${restarted.serviceUrl}/`)).ok,
      { timeoutMs: 60_000, intervalMs: 200 },
      'the daemon answers again after start',
    );

    await provider.stop(created.providerSandboxId);
    await provider.destroy(created.providerSandboxId);
    expect(await provider.status(created.providerSandboxId)).toBe('DESTROYED');
    const gone = await podman.api('GET', `/v1.41/containers/${created.providerSandboxId}/json`);
    expect(gone.status).toBe(404);
    expect(existsSync(join(dir, 'sandboxes', req.sandboxId))).toBe(false);
    await provider.destroy(created.providerSandboxId); // idempotent
  });
});

// The provider conformance checks (test/providers/adapter-suite.ts) that do not need an emulator's
// fault injection, against the real engine.
describe('conformance with the other adapters', () => {
  const ours = async () =>
    (
      await provider.docker.listContainers({
        all: true,
        filters: JSON.stringify({ label: labelFilters() }),
      })
    ).map((c) => c.Id);

  test('stops a sandbox that is already stopped without an error; keepAlive of a destroyed one is not found', async () => {
    const ref = await provider.buildSnapshot({ ...(await snapshotFor(repo.head())), spec: SPEC });
    const { providerSandboxId } = await provider.create(request(ref));
    await provider.stop(providerSandboxId);
    expect((await provider.stop(providerSandboxId)).state).toBe('STOPPED');
    expect(await provider.status(providerSandboxId)).toBe('STOPPED');
    await provider.destroy(providerSandboxId);
    await expect(provider.keepAlive(providerSandboxId)).rejects.toBeInstanceOf(ProviderNotFoundError);
    expect(await ours()).toEqual([]);
  });

  test('a create from an unknown image fails with a typed provider error and leaves nothing behind', async () => {
    const req = request('localhost/singulacomp-snapshot:does-not-exist');
    const error = await provider.create(req).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ProviderError);
    expect(await ours()).toEqual([]);
  });

  test('an unreachable engine is ProviderUnavailableError after bounded retries', async () => {
    const down = new DockerProvider({
      host: `unix://${join(dir, 'no-such.sock')}`,
      dataDir: join(dir, 'sandboxes'),
      runtimeDir,
      runtimeVersion: RUNTIME_VERSION,
      apiPort: () => apiPort,
      retry: { maxAttempts: 2, baseDelayMs: 10, maxDelayMs: 20, jitter: false },
    });
    const error = await down.status('anything').catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ProviderUnavailableError);
    expect((error as ProviderUnavailableError).attempts).toBe(2);
    expect((error as Error).message).toMatch(/DOCKER unavailable during status/);
  });
});
