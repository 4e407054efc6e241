import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import { chmod, chown, mkdir, rm } from 'node:fs/promises';
import { join } from 'node:path';
import type { Readable } from 'node:stream';
import type Docker from 'dockerode';
import { freePort } from '../../contract/ports';
import { SANDBOX_WORKSPACE } from '../../image/dockerfile';
import { AGENT_COMMAND, ENTRYPOINT_BINARY, RUNTIME_DIR, RUNTIME_PREFIX } from '../../image/runtime-layout';
import {
  errorContext,
  idTags,
  LABEL_INSTALLATION_ID,
  LABEL_KEYS,
  SERVICE_PORT,
  taggedSandbox,
} from './common';
import {
  ProviderBuildError,
  ProviderNotFoundError,
  ProviderSnapshotUnusableError,
  type RetryOptions,
  withProviderRetry,
} from './errors';
import { BRIDGE_SCRIPT, type HostBridges, openHostBridges, SANDBOX_RUN_DIR } from './local-isolation';
import {
  dockerClient,
  asHttpError,
  stateOf,
  run,
  type ContextFile,
  walk,
  sha256File,
  packTar,
  contextTar,
  type BuildEvent,
} from './docker-engine';
import type {
  CreateSandboxRequest,
  ProviderSandbox,
  SandboxProvider,
  SandboxState,
  SnapshotBuildRequest,
  TaggedSandbox,
} from './types';

/** Labels on what this adapter creates (besides the id labels of common.ts). */
export const LABEL_MANAGED = 'singulacomp.managed';
export const LABEL_SNAPSHOT_KEY = 'singulacomp.snapshot-key';
export const LABEL_RUNTIME_DIGEST = 'singulacomp.runtime-digest';
/** The loopback port on the server's host that reaches this container's daemon. */
export const LABEL_SERVICE_PORT = 'singulacomp.service-port';
/** The API port as seen inside the container (the bridge listens on it). */
export const LABEL_API_PORT = 'singulacomp.api-port';

export const DEFAULT_RUNTIME_IMAGE_REPO = 'localhost/singulacomp-runtime';
export const SNAPSHOT_IMAGE_REPO = 'localhost/singulacomp-snapshot';
/** Where the bridge script lives inside the runtime image (and so inside every sandbox image). */
export const BRIDGE_IN_IMAGE = `${RUNTIME_DIR}/local-bridge.mjs`;
export const SANDBOX_HOME = '/home/sandbox';
/** uid:gid the sandbox runs as; owns the workspace and home directories on the host. */
export const DEFAULT_SANDBOX_USER = { uid: 1000, gid: 1000 };
const GiB = 1024 ** 3;
/** Build failures from the engine's storage changing under a build, not from the Dockerfile. */
const STORAGE_RACE = /layer not known|image not known/i;

export interface Ulimit {
  Name: string;
  Soft: number;
  Hard: number;
}

export interface DockerProviderOptions {
  /** DOCKER_HOST: unix:///path or tcp://host:port. @default unix:///var/run/docker.sock */
  host?: string;
  /** TLS for tcp hosts: the directory with ca.pem, cert.pem, key.pem (DOCKER_CERT_PATH). */
  tls?: { certPath: string } | null;
  /** A client to use instead of one built from `host` (tests). */
  docker?: Docker;
  /** Directory on the Docker host (this machine) holding each sandbox's workspace and home. */
  dataDir: string;
  /** The runtime package's files (`runtime/`, `bin/`): `npm run build:runtime`'s image/ context. */
  runtimeDir: string;
  runtimeVersion: string;
  /** @default localhost/singulacomp-runtime */
  runtimeImageRepo?: string;
  /**
   * false: sandbox images without the apt/toolchain package floor; the runtime image then carries
   * Node.js (`nodeBinary`) and OpenCode (`opencodeBinary`). @default true
   */
  packageFloor?: boolean;
  /** @default this process's Node.js */
  nodeBinary?: string;
  /** @default the opencode-linux-x64 npm package's binary */
  opencodeBinary?: string;
  /** This server's API port on the host's loopback, forwarded into every sandbox. */
  apiPort: () => number | null;
  /** Further host loopback ports sandboxes may reach (e.g. a model endpoint). @default [] */
  egressPorts?: number[];
  /** Clones the session branch into the workspace (the server's git service). */
  clone?: (
    repo: { url: string; credential: string | null },
    branch: string,
    dir: string,
    workspace: { originUrl: string; config: Record<string, string> },
  ) => Promise<unknown>;
  /** @default 1024 */
  pidsLimit?: number;
  /** On create and build (Podman refuses setrlimit without them). @default nofile and nproc 1024:1024 */
  ulimits?: Ulimit[];
  /** /tmp's size. @default 1 GiB */
  tmpSizeBytes?: number;
  /** Put on every container and image (a test's cleanup label, a deployment's own). */
  labels?: Record<string, string>;
  /** What the bridge runs instead of the entrypoint and daemon (stand-in daemons in tests). */
  entryCommand?: string[];
  /** Further variables in every container (the injected ones and the platform's win). */
  env?: Record<string, string>;
  /** Prune: snapshot images older than this (and not used by a container) go. @default 7 days */
  imageMaxAgeMs?: number;
  /** Prune: at most this many snapshot images are kept. @default 50 */
  imageMaxCount?: number;
  /** How long stop() lets the daemon exit before SIGKILL. @default 10 */
  stopTimeoutSeconds?: number;
  retry?: RetryOptions;
}

export class DockerProvider implements SandboxProvider {
  readonly name = 'DOCKER' as const;
  readonly runtimeSource = 'image' as const;
  readonly packageFloor: boolean;
  readonly runtimeImage: string;
  readonly docker: Docker;
  private readonly options: DockerProviderOptions;
  private readonly bridges = new Map<string, HostBridges>();
  private runtimeDigest: Promise<string> | null = null;
  /** Images built by this process (tests assert reuse with it). */
  readonly built: string[] = [];

  constructor(options: DockerProviderOptions) {
    this.options = options;
    this.docker = dockerClient(options);
    this.packageFloor = options.packageFloor ?? true;
    this.runtimeImage = options.runtimeImageRepo ?? DEFAULT_RUNTIME_IMAGE_REPO;
  }

  private call<T>(operation: string, fn: () => Promise<T>): Promise<T> {
    return withProviderRetry(
      async () => {
        try {
          return await fn();
        } catch (error) {
          throw asHttpError(error);
        }
      },
      errorContext('DOCKER', operation, this.credentialsVar),
      this.options.retry,
    );
  }

  /** What a refused connection names: a tcp host's TLS client certificate, or the host itself. */
  private get credentialsVar(): string {
    return this.options.tls ? 'DOCKER_CERT_PATH' : 'DOCKER_HOST';
  }

  private podman: Promise<boolean> | null = null;

  /** Whether the engine is Podman's Docker-compatible service (it differs in a few parameters). */
  private isPodman(): Promise<boolean> {
    this.podman ??= this.call('version', () => this.docker.version()).then((v) =>
      (v.Components ?? []).some((c) => /podman/i.test(c.Name)),
    );
    this.podman.catch(() => {
      this.podman = null;
    });
    return this.podman;
  }

  private get ulimits(): Ulimit[] {
    return (
      this.options.ulimits ?? [
        { Name: 'nofile', Soft: 1024, Hard: 1024 },
        { Name: 'nproc', Soft: 1024, Hard: 1024 },
      ]
    );
  }

  private containerName(sandboxId: string): string {
    return `singulacomp-${sandboxId.replace(/[^a-zA-Z0-9_.-]/g, '')}`;
  }

  private sandboxDir(sandboxId: string): string {
    return join(this.options.dataDir, sandboxId.replace(/[^a-zA-Z0-9-]/g, ''));
  }

  /** Socket directory: short, since a socket path is limited to 107 bytes. */
  private runDir(sandboxId: string): string {
    return join('/tmp', `sc-dock-${createHash('sha256').update(sandboxId).digest('hex').slice(0, 20)}`);
  }

  // ---- images -----------------------------------------------------------------------------------

  private async runtimeFiles(): Promise<ContextFile[]> {
    const files = await walk(this.options.runtimeDir, '');
    const runtime = files.filter((f) => f.path.startsWith('runtime/') || f.path.startsWith('bin/'));
    if (!runtime.some((f) => f.path.startsWith('bin/')))
      throw new Error(`${this.options.runtimeDir} holds no runtime package (run npm run build:runtime)`);
    runtime.push({ path: 'runtime/local-bridge.mjs', mode: 0o644, source: BRIDGE_SCRIPT });
    if (!this.packageFloor) {
      const node = this.options.nodeBinary ?? process.execPath;
      const opencode =
        this.options.opencodeBinary ??
        new URL('../../node_modules/opencode-linux-x64/bin/opencode', import.meta.url).pathname;
      if (!existsSync(opencode)) throw new Error(`no OpenCode binary at ${opencode}`);
      runtime.push({ path: 'tools/node', mode: 0o755, source: node });
      runtime.push({ path: 'tools/opencode', mode: 0o755, source: opencode });
    }
    return runtime.sort((a, b) => (a.path < b.path ? -1 : 1));
  }

  /** SHA-256 over the runtime image's files: a snapshot image built on another runtime is rebuilt. */
  private digest(): Promise<string> {
    this.runtimeDigest ??= (async () => {
      const hash = createHash('sha256');
      for (const file of await this.runtimeFiles()) {
        hash.update(`${file.path}\0${file.mode}\0${await sha256File(file.source)}\n`);
      }
      return hash.digest('hex');
    })();
    this.runtimeDigest.catch(() => {
      this.runtimeDigest = null;
    });
    return this.runtimeDigest;
  }

  private async imageLabels(ref: string): Promise<Record<string, string> | null> {
    try {
      const info = await this.docker.getImage(ref).inspect();
      return (info.Config?.Labels as Record<string, string> | null) ?? {};
    } catch (error) {
      if ((error as { statusCode?: number }).statusCode === 404) return null;
      throw asHttpError(error);
    }
  }

  /**
   * Runs a build; resolves with the builder's output, rejects with its message. A build that met
   * the engine's storage changing under it (Podman: "layer not known" while another client removed
   * an image its cache lookup was reading) is run once more from a fresh context.
   */
  private async build(
    context: () => Readable | Promise<Readable>,
    tag: string,
    labels: Record<string, string>,
    dockerfile: string,
    onLog?: (line: string) => void,
  ): Promise<string> {
    try {
      return await this.buildOnce(await context(), tag, labels, dockerfile, onLog);
    } catch (error) {
      if (!(error instanceof ProviderBuildError) || !STORAGE_RACE.test(error.message)) throw error;
      onLog?.("the engine's storage changed during the build; building again");
      return this.buildOnce(await context(), tag, labels, dockerfile, onLog);
    }
  }

  private async buildOnce(
    context: Readable,
    tag: string,
    labels: Record<string, string>,
    dockerfile: string,
    onLog?: (line: string) => void,
  ): Promise<string> {
    const stream = await this.call('buildSnapshot', async () =>
      this.docker.buildImage(
        context as unknown as NodeJS.ReadableStream,
        {
          t: tag,
          dockerfile,
          labels,
          rm: true,
          forcerm: true,
          pull: false,
          ulimits: JSON.stringify(
            // Docker takes {Name, Soft, Hard}; Podman's compatibility API only "name=soft:hard".
            (await this.isPodman()) ? this.ulimits.map((u) => `${u.Name}=${u.Soft}:${u.Hard}`) : this.ulimits,
          ),
        } as Docker.ImageBuildOptions,
      ),
    );
    let output = '';
    let failure: string | null = null;
    await new Promise<void>((resolve, reject) => {
      this.docker.modem.followProgress(
        stream,
        (error: Error | null) => (error ? reject(error) : resolve()),
        (event: BuildEvent) => {
          const text = event.stream ?? (event.status ? `${event.status}\n` : '');
          if (text) {
            output = `${output}${text}`.slice(-64 * 1024);
            for (const line of text.split('\n')) if (line.trim()) onLog?.(line);
          }
          if (event.error) {
            failure = event.errorDetail?.message ?? event.error;
            onLog?.(failure);
          }
        },
      );
    }).catch((error: unknown) => {
      failure ??= (error as Error).message;
    });
    if (failure !== null) {
      throw new ProviderBuildError(
        `DOCKER image build failed: ${failure}`,
        errorContext('DOCKER', 'buildSnapshot', 'DOCKER_HOST'),
      );
    }
    // Podman reports some failures only as missing output; check the tag exists.
    if ((await this.imageLabels(tag)) === null) {
      throw new ProviderBuildError(
        `DOCKER image build produced no image: ${output.slice(-2_000)}`,
        errorContext('DOCKER', 'buildSnapshot', 'DOCKER_HOST'),
      );
    }
    return output;
  }

  /** The runtime image the layer copies from, built here when missing or out of date. */
  async ensureRuntimeImage(onLog?: (line: string) => void): Promise<string> {
    const tag = `${this.runtimeImage}:${this.options.runtimeVersion}`;
    const digest = await this.digest();
    const labels = await this.imageLabels(tag);
    if (labels?.[LABEL_RUNTIME_DIGEST] === digest) return tag;
    const files = await this.runtimeFiles();
    const dockerfile = [
      'FROM scratch',
      `COPY runtime/ ${RUNTIME_DIR}/`,
      'COPY bin/ /usr/local/bin/',
      ...(this.packageFloor ? [] : [`COPY tools/ ${RUNTIME_PREFIX}/bin/`]),
      '',
    ].join('\n');
    const context = () =>
      packTar([
        { path: 'Dockerfile', mode: 0o644, data: Buffer.from(dockerfile) },
        ...files.map((f) => ({ path: f.path, mode: f.mode, source: f.source })),
      ]);
    await this.build(
      context,
      tag,
      // Shared by every sandbox image of this runtime: not tagged with this adapter's own labels.
      { [LABEL_MANAGED]: 'runtime', [LABEL_RUNTIME_DIGEST]: digest },
      'Dockerfile',
      onLog,
    );
    return tag;
  }

  /** Builds the composed Dockerfile, or reuses the image tagged with its key and this runtime. */
  async buildSnapshot(request: SnapshotBuildRequest): Promise<string> {
    const tag = `${SNAPSHOT_IMAGE_REPO}:${request.key}`;
    const digest = await this.digest();
    const existing = await this.imageLabels(tag);
    if (existing?.[LABEL_RUNTIME_DIGEST] === digest) {
      request.onLog?.(`reusing image ${tag}`);
      return tag;
    }
    await this.ensureRuntimeImage(request.onLog);
    const dockerfilePath = '.singulacomp/Dockerfile';
    const context = () =>
      contextTar(request.context, [{ path: dockerfilePath, data: Buffer.from(request.dockerfile) }]);
    await this.build(
      context,
      tag,
      {
        ...this.options.labels,
        [LABEL_MANAGED]: 'snapshot',
        [LABEL_SNAPSHOT_KEY]: request.key,
        [LABEL_RUNTIME_DIGEST]: digest,
      },
      dockerfilePath,
      request.onLog,
    );
    this.built.push(tag);
    await this.prune().catch(() => undefined);
    return tag;
  }

  /**
   * Removes snapshot images (carrying this adapter's labels) that no container uses and that are
   * older than imageMaxAgeMs, or beyond the newest imageMaxCount. Runs after every build. Returns
   * the removed image ids.
   */
  async prune(now = Date.now()): Promise<string[]> {
    const maxAge = this.options.imageMaxAgeMs ?? 7 * 24 * 3_600_000;
    const maxCount = this.options.imageMaxCount ?? 50;
    const images = await this.call('prune', () =>
      this.docker.listImages({ filters: JSON.stringify({ label: [`${LABEL_MANAGED}=snapshot`] }) }),
    );
    // Our own labels checked here: engines differ in how they combine several label filters.
    const own = Object.entries(this.options.labels ?? {});
    const ours = images.filter((image) => own.every(([k, v]) => image.Labels?.[k] === v));
    const containers = await this.call('prune', () => this.docker.listContainers({ all: true }));
    const inUse = new Set(containers.map((c) => c.ImageID));
    const sorted = [...ours].sort((a, b) => b.Created - a.Created);
    const removed: string[] = [];
    sorted.forEach((image, index) => {
      if (inUse.has(image.Id)) return;
      const old = now - image.Created * 1000 > maxAge;
      if (old || index >= maxCount) removed.push(image.Id);
    });
    for (const id of removed) {
      await this.docker
        .getImage(id)
        .remove({ force: false })
        .catch(() => undefined);
    }
    return removed;
  }

  // ---- containers -------------------------------------------------------------------------------

  private async openBridges(sandboxId: string, servicePort: number, apiPortInside: number | null) {
    if (this.bridges.has(sandboxId)) return;
    const runDir = this.runDir(sandboxId);
    const egress = new Map<number, number>();
    const apiPort = this.options.apiPort();
    if (apiPortInside && apiPort) egress.set(apiPortInside, apiPort);
    for (const port of this.options.egressPorts ?? []) egress.set(port, port);
    const bridges = await openHostBridges({ runDir, egress, servicePort });
    this.bridges.set(sandboxId, bridges);
    // The sandbox user connects to the egress sockets and creates the ingress one.
    for (const port of egress.keys()) await chmod(join(runDir, 'egress', `${port}.sock`), 0o777);
    await this.own(join(runDir, 'ingress'));
  }

  private async own(path: string): Promise<void> {
    await chown(path, DEFAULT_SANDBOX_USER.uid, DEFAULT_SANDBOX_USER.gid).catch(() => chmod(path, 0o777));
  }

  private async closeBridges(sandboxId: string): Promise<void> {
    const open = this.bridges.get(sandboxId);
    this.bridges.delete(sandboxId);
    await open?.close();
  }

  async create(request: CreateSandboxRequest): Promise<ProviderSandbox> {
    const image = request.snapshotRef;
    if (!image) {
      throw new ProviderBuildError(
        'DOCKER needs an image: the template names no Dockerfile or image and there is no default',
        errorContext('DOCKER', 'create', 'DOCKER_HOST'),
      );
    }
    const dir = this.sandboxDir(request.sandboxId);
    const workspace = join(dir, 'workspace');
    const home = join(dir, 'home');
    const apiPortInside = this.options.apiPort();
    const apiUrl = apiPortInside
      ? `http://127.0.0.1:${apiPortInside}`
      : (request.env.SINGULACOMP_API_URL ?? '');
    // Three independent steps at once: the image check, the workspace and the host half of the
    // network (the clone is the longest; the others would wait on it for nothing).
    // An image pruned or removed since it was recorded: provisioning rebuilds it (an engine would
    // otherwise try to pull it from a registry, or answer a bare 404 like a missing container).
    const imageFound = this.call('create', () => this.imageLabels(image)).then((labels) => labels !== null);
    const prepared = (async () => {
      await mkdir(home, { recursive: true });
      if (this.options.clone) {
        await rm(workspace, { recursive: true, force: true });
        await this.options.clone(
          { url: request.workspace.repositoryUrl, credential: request.workspace.credential ?? null },
          request.workspace.branch,
          workspace,
          {
            originUrl: `${apiUrl}/v1/git/${request.projectId}.git`,
            config: { [`credential.${apiUrl}.helper`]: '!singulacomp git-credential' },
          },
        );
      } else {
        await mkdir(workspace, { recursive: true });
      }
      await run('chown', [
        '-R',
        `${DEFAULT_SANDBOX_USER.uid}:${DEFAULT_SANDBOX_USER.gid}`,
        workspace,
        home,
      ]).catch(() => undefined);
    })();
    const bridged = (async () => {
      const port = await freePort();
      await this.openBridges(request.sandboxId, port, apiPortInside);
      return port;
    })();
    const [found, ready, port] = await Promise.allSettled([imageFound, prepared, bridged]);
    const failure =
      found.status === 'fulfilled' && !found.value
        ? new ProviderSnapshotUnusableError(
            errorContext('DOCKER', 'create', this.credentialsVar),
            image,
            'missing',
            'the engine has no such image',
          )
        : [found, ready, port].find((r) => r.status === 'rejected')?.reason;
    if (failure !== undefined || port.status !== 'fulfilled') {
      await this.discard(request.sandboxId, dir);
      throw failure;
    }
    const servicePort = port.value;

    const env: Record<string, string> = {
      ...this.options.env,
      ...request.env,
      HOME: SANDBOX_HOME,
      SINGULACOMP_API_URL: apiUrl,
      SINGULACOMP_SERVICE_PORT: String(SERVICE_PORT),
      SINGULACOMP_WORKSPACE: SANDBOX_WORKSPACE,
    };
    const spec = {
      runDir: SANDBOX_RUN_DIR,
      egressPorts: [
        ...new Set([...(apiPortInside ? [apiPortInside] : []), ...(this.options.egressPorts ?? [])]),
      ],
      servicePort: SERVICE_PORT,
    };
    // The daemon's home (OpenCode's data) must be writable: the root file system is not.
    const entry = this.options.entryCommand ?? [ENTRYPOINT_BINARY, AGENT_COMMAND, '--home', SANDBOX_HOME];
    const labels: Record<string, string> = {
      ...this.options.labels,
      ...idTags(request, LABEL_KEYS),
      [LABEL_MANAGED]: 'sandbox',
      [LABEL_SERVICE_PORT]: String(servicePort),
      ...(apiPortInside ? { [LABEL_API_PORT]: String(apiPortInside) } : {}),
    };
    const memory = request.spec.memoryGiB * GiB;
    try {
      const container = await this.call('create', () =>
        this.docker.createContainer({
          name: this.containerName(request.sandboxId),
          Image: image,
          User: `${DEFAULT_SANDBOX_USER.uid}:${DEFAULT_SANDBOX_USER.gid}`,
          Entrypoint: ['node', '--no-warnings', BRIDGE_IN_IMAGE],
          Cmd: [JSON.stringify(spec), ...entry],
          Env: Object.entries(env).map(([k, v]) => `${k}=${v}`),
          WorkingDir: SANDBOX_WORKSPACE,
          Labels: labels,
          StopSignal: 'SIGTERM',
          HostConfig: {
            NetworkMode: 'none',
            Memory: memory,
            MemorySwap: memory,
            NanoCpus: request.spec.cpu * 1e9,
            PidsLimit: this.options.pidsLimit ?? 1024,
            CapDrop: ['ALL'],
            SecurityOpt: ['no-new-privileges'],
            ReadonlyRootfs: true,
            Tmpfs: { '/tmp': `rw,nosuid,nodev,size=${this.options.tmpSizeBytes ?? GiB}` },
            Binds: [
              `${workspace}:${SANDBOX_WORKSPACE}:rw`,
              `${home}:${SANDBOX_HOME}:rw`,
              `${this.runDir(request.sandboxId)}:${SANDBOX_RUN_DIR}:rw`,
            ],
            Ulimits: this.ulimits,
            RestartPolicy: { Name: 'no' },
          },
        }),
      );
      await this.call('create', () => container.start());
      return {
        providerSandboxId: container.id,
        state: 'STARTED',
        serviceUrl: `http://127.0.0.1:${servicePort}`,
      };
    } catch (error) {
      await this.docker
        .getContainer(this.containerName(request.sandboxId))
        .remove({ force: true, v: true })
        .catch(() => undefined);
      await this.discard(request.sandboxId, dir);
      throw error;
    }
  }

  /** Undoes a create's host side: the bridges, the run directory and the sandbox's directories. */
  private async discard(sandboxId: string, dir: string): Promise<void> {
    await this.closeBridges(sandboxId);
    await rm(this.runDir(sandboxId), { recursive: true, force: true });
    await rm(dir, { recursive: true, force: true });
  }

  private async inspect(operation: string, id: string): Promise<Docker.ContainerInspectInfo> {
    return this.call(operation, () => this.docker.getContainer(id).inspect());
  }

  private sandboxIdOf(info: Docker.ContainerInspectInfo): string {
    return info.Config.Labels?.[LABEL_KEYS.sandboxId] ?? info.Id;
  }

  /** Opens the host half of a container's network from its labels, unless open already. */
  private async reattach(info: Docker.ContainerInspectInfo): Promise<number> {
    const labels = info.Config.Labels ?? {};
    const servicePort = Number(labels[LABEL_SERVICE_PORT]);
    const apiPort = labels[LABEL_API_PORT] ? Number(labels[LABEL_API_PORT]) : null;
    if (Number.isInteger(servicePort) && servicePort > 0)
      await this.openBridges(this.sandboxIdOf(info), servicePort, apiPort);
    return servicePort;
  }

  async start(providerSandboxId: string): Promise<ProviderSandbox> {
    const info = await this.inspect('start', providerSandboxId);
    const servicePort = await this.reattach(info);
    if (!info.State.Running)
      await this.call('start', () => this.docker.getContainer(providerSandboxId).start());
    return { providerSandboxId, state: 'STARTED', serviceUrl: `http://127.0.0.1:${servicePort}` };
  }

  async stop(providerSandboxId: string): Promise<ProviderSandbox> {
    const info = await this.inspect('stop', providerSandboxId);
    if (info.State.Running) {
      await this.call('stop', () =>
        this.docker
          .getContainer(providerSandboxId)
          .stop({ t: this.options.stopTimeoutSeconds ?? 10 })
          .catch((error: { statusCode?: number }) => {
            if (error.statusCode !== 304) throw error; // already stopped
          }),
      );
    }
    await this.closeBridges(this.sandboxIdOf(info));
    return { providerSandboxId, state: 'STOPPED', serviceUrl: null };
  }

  async destroy(providerSandboxId: string): Promise<void> {
    let sandboxId: string | null = null;
    try {
      sandboxId = this.sandboxIdOf(await this.inspect('destroy', providerSandboxId));
    } catch (error) {
      if (error instanceof ProviderNotFoundError) return;
      throw error;
    }
    await this.call('destroy', () =>
      this.docker
        .getContainer(providerSandboxId)
        .remove({ force: true, v: true })
        .catch((error: { statusCode?: number }) => {
          if (error.statusCode !== 404) throw error;
        }),
    );
    await this.closeBridges(sandboxId);
    await rm(this.runDir(sandboxId), { recursive: true, force: true });
    await rm(this.sandboxDir(sandboxId), { recursive: true, force: true });
  }

  /** No inactivity timer at the engine: only checks the container is still there. */
  async keepAlive(providerSandboxId: string): Promise<void> {
    await this.inspect('keepAlive', providerSandboxId);
  }

  async status(providerSandboxId: string): Promise<SandboxState> {
    try {
      const info = await this.inspect('status', providerSandboxId);
      // A server (re)started under a running container reopens its host half of the network.
      if (info.State.Running) await this.reattach(info);
      return stateOf(info.State.Status);
    } catch (error) {
      if (error instanceof ProviderNotFoundError) return 'DESTROYED';
      throw error;
    }
  }

  async listTagged(installationId: string): Promise<TaggedSandbox[]> {
    const listed = await this.call('listTagged', () =>
      this.docker.listContainers({
        all: true,
        filters: JSON.stringify({ label: [`${LABEL_INSTALLATION_ID}=${installationId}`] }),
      }),
    );
    return listed.flatMap((c) => {
      const tagged = taggedSandbox(c.Id, stateOf(c.State), c.Labels, LABEL_KEYS, installationId);
      return tagged ? [tagged] : [];
    });
  }

  /** Apps are reached through the daemon's proxy, whose service port is forwarded to this host. */
  async previewHost(providerSandboxId: string, _port: number): Promise<string> {
    const info = await this.inspect('previewHost', providerSandboxId);
    return `127.0.0.1:${info.Config.Labels?.[LABEL_SERVICE_PORT]}`;
  }

  async close(): Promise<void> {
    for (const id of [...this.bridges.keys()]) await this.closeBridges(id);
  }
}
