// Platinum API emulator (test fixture) implementing docs/providers/platinum.md. The entrypoint
// runs as a real local process on every boot; the service port is a free local port injected as
// SINGULACOMP_SERVICE_PORT and returned as `serviceUrl`.
import { randomUUID } from 'node:crypto';
import { EmulatorBase, killProcesses, processEnv } from './base';
import { freePort, type JsonRequest, type Reply, SandboxProcess, sandboxDir } from './harness';

export interface PlatinumEmulatorOptions {
  /** @default 'platinum-test-key' */
  apiKey?: string;
  /** Time in `provisioning`/`starting` before `running`. @default 30 */
  bootDelayMs?: number;
  /** Time an image build takes. @default 30 */
  imageBuildDelayMs?: number;
}

export interface PlatinumEmulatedSandbox {
  id: string;
  state: string;
  image: string | null;
  cpu: number;
  memoryGiB: number;
  diskGiB: number;
  labels: Record<string, string>;
  env: Record<string, string>;
  entrypoint: string[];
  idempotencyKey: string | null;
  idleTimeoutSeconds: number;
  createdAt: string;
  lastActivityAt: string;
  servicePort: number;
  booted: boolean;
  dir: string;
  processes: SandboxProcess[];
}

const errorBody = (status: number, message: string) => ({
  error: {
    code:
      status === 401
        ? 'unauthorized'
        : status === 404
          ? 'not_found'
          : status === 409
            ? 'conflict'
            : status === 429
              ? 'rate_limited'
              : status >= 500
                ? 'unavailable'
                : 'invalid_request',
    message,
  },
});

export class PlatinumEmulator extends EmulatorBase {
  private readonly sandboxes = new Map<
    string,
    PlatinumEmulatedSandbox & { removeDir(): void; idle?: NodeJS.Timeout }
  >();
  private readonly images = new Map<
    string,
    {
      name: string;
      state: string;
      dockerfile: string;
      cpu: number;
      memoryGiB: number;
      diskGiB: number;
      errorReason: null;
    }
  >();
  protected readonly options: Required<PlatinumEmulatorOptions>;

  private constructor(options: PlatinumEmulatorOptions) {
    super(errorBody);
    this.options = {
      apiKey: options.apiKey ?? 'platinum-test-key',
      bootDelayMs: options.bootDelayMs ?? 30,
      imageBuildDelayMs: options.imageBuildDelayMs ?? 30,
    };
  }

  private buildsHeld: Promise<void> | null = null;

  /**
   * Image builds requested from now on stay `building` until the returned release is called (and
   * their build delay has passed): a test sees the wait for a build however slowly it polls.
   */
  holdImageBuilds(): () => void {
    let release = () => {};
    this.buildsHeld = new Promise<void>((resolve) => {
      release = resolve;
    });
    return () => {
      this.buildsHeld = null;
      release();
    };
  }

  static start(options: PlatinumEmulatorOptions = {}): Promise<PlatinumEmulator> {
    return EmulatorBase.listening(new PlatinumEmulator(options));
  }

  get url(): string {
    return this.server.url;
  }

  /** Sandboxes not deleted. */
  list(): PlatinumEmulatedSandbox[] {
    return [...this.sandboxes.values()].filter((s) => s.state !== 'deleted');
  }

  get(id: string): PlatinumEmulatedSandbox | undefined {
    return this.sandboxes.get(id);
  }

  imageList() {
    return [...this.images.values()];
  }

  /** Forces a native state (for state-mapping tests). */
  setState(id: string, state: string): void {
    const sandbox = this.sandboxes.get(id);
    if (sandbox) sandbox.state = state;
  }

  protected releaseSandboxes() {
    const all = [...this.sandboxes.values()];
    for (const sandbox of all) if (sandbox.idle) clearTimeout(sandbox.idle);
    return all;
  }

  private dto(s: PlatinumEmulatedSandbox) {
    return {
      id: s.id,
      state: s.state,
      image: s.image,
      cpu: s.cpu,
      memoryGiB: s.memoryGiB,
      diskGiB: s.diskGiB,
      labels: s.labels,
      createdAt: s.createdAt,
      lastActivityAt: s.lastActivityAt,
      idleTimeoutSeconds: s.idleTimeoutSeconds,
      serviceUrl: s.booted ? `http://127.0.0.1:${s.servicePort}` : null,
      errorReason: null,
    };
  }

  private touch(sandbox: PlatinumEmulatedSandbox & { idle?: NodeJS.Timeout }): void {
    sandbox.lastActivityAt = new Date().toISOString();
    if (sandbox.idle) clearTimeout(sandbox.idle);
    if (sandbox.state !== 'running' && sandbox.state !== 'starting' && sandbox.state !== 'provisioning')
      return;
    sandbox.idle = setTimeout(() => void this.halt(sandbox, 'hibernated'), sandbox.idleTimeoutSeconds * 1000);
  }

  private boot(sandbox: PlatinumEmulatedSandbox & { idle?: NodeJS.Timeout }, from: string): void {
    sandbox.state = from;
    this.later(this.options.bootDelayMs, () => {
      if (sandbox.state !== from) return;
      const [file, ...args] = sandbox.entrypoint;
      if (file) {
        sandbox.processes.push(
          new SandboxProcess({
            file,
            args,
            cwd: sandbox.dir,
            env: processEnv(sandbox, sandbox.env),
          }),
        );
      }
      sandbox.booted = true;
      sandbox.state = 'running';
      this.touch(sandbox);
    });
  }

  private async halt(
    sandbox: PlatinumEmulatedSandbox & { idle?: NodeJS.Timeout },
    to: string,
  ): Promise<void> {
    if (sandbox.idle) clearTimeout(sandbox.idle);
    sandbox.state = to === 'deleted' ? 'deleting' : 'stopping';
    await killProcesses(sandbox);
    sandbox.state = to;
  }

  private notFound(what: string): Reply {
    return { status: 404, json: errorBody(404, `${what} not found`) };
  }

  protected async route(req: JsonRequest): Promise<Reply> {
    if (req.headers.authorization !== `Bearer ${this.options.apiKey}`) {
      return { status: 401, json: errorBody(401, 'invalid API key') };
    }
    const [version, resource, id, action, ...rest] = req.path.split('/').filter(Boolean);
    if (version !== 'v1') return this.notFound(req.path);
    if (resource === 'images') return this.imageRoute(req, id);
    if (resource !== 'sandboxes') return this.notFound(req.path);
    if (!id && req.method === 'POST') return this.create(req);
    if (!id && req.method === 'GET') {
      const wanted = req.url.searchParams
        .getAll('label')
        .map((pair) => pair.split('=', 2) as [string, string]);
      const items = this.list()
        .filter((s) => wanted.every(([k, v]) => s.labels[k] === v))
        .map((s) => this.dto(s));
      return { status: 200, json: { items } };
    }
    const sandbox = id ? this.sandboxes.get(id) : undefined;
    if (!sandbox || sandbox.state === 'deleted') return this.notFound(`sandbox ${id}`);
    if (!action && req.method === 'GET') return { status: 200, json: this.dto(sandbox) };
    if (!action && req.method === 'DELETE') {
      const halting = this.halt(sandbox, 'deleted');
      const reply = { status: 202, json: this.dto(sandbox) };
      void halting.then(() => sandbox.removeDir());
      return reply;
    }
    if (req.method === 'POST' && action === 'start') {
      if (sandbox.state === 'running') return { status: 202, json: this.dto(sandbox) };
      if (sandbox.state !== 'stopped' && sandbox.state !== 'hibernated') {
        return { status: 409, json: errorBody(409, `cannot start a ${sandbox.state} sandbox`) };
      }
      this.boot(sandbox, 'starting');
      return { status: 202, json: this.dto(sandbox) };
    }
    if (req.method === 'POST' && action === 'stop') {
      void this.halt(sandbox, 'stopped');
      return { status: 202, json: this.dto(sandbox) };
    }
    if (req.method === 'POST' && action === 'keepalive') {
      this.touch(sandbox);
      return { status: 204 };
    }
    if (req.method === 'POST' && action === 'exec') {
      if (sandbox.state !== 'running') return { status: 409, json: errorBody(409, 'sandbox is not running') };
      const body = req.json<{ argv: string[]; env?: Record<string, string> }>();
      const [file, ...args] = body.argv;
      if (!file) return { status: 400, json: errorBody(400, 'argv is empty') };
      let stdout = '';
      let stderr = '';
      const proc = new SandboxProcess({
        file,
        args,
        cwd: sandbox.dir,
        env: { ...sandbox.env, ...body.env },
        onStdout: (c) => {
          stdout += c.toString('utf8');
        },
        onStderr: (c) => {
          stderr += c.toString('utf8');
        },
      });
      const exitCode = await proc.exited;
      return { status: 200, json: { exitCode, stdout, stderr } };
    }
    if (req.method === 'GET' && action === 'ports' && rest.length === 0) return this.notFound(req.path);
    if (req.method === 'GET' && action === 'ports') {
      const port = Number(rest[0]);
      const host = `${port}-${sandbox.id}.run.platinum.emulated`;
      return { status: 200, json: { host, url: `https://${host}` } };
    }
    return this.notFound(req.path);
  }

  private async create(req: JsonRequest): Promise<Reply> {
    const key = typeof req.headers['idempotency-key'] === 'string' ? req.headers['idempotency-key'] : null;
    const existing = key ? [...this.sandboxes.values()].find((s) => s.idempotencyKey === key) : undefined;
    if (existing) return { status: 200, json: this.dto(existing) };
    const body = req.json<{
      image?: string | null;
      cpu?: number;
      memoryGiB?: number;
      diskGiB?: number;
      env?: Record<string, string>;
      labels?: Record<string, string>;
      entrypoint?: string[];
      idleTimeoutSeconds?: number;
    }>();
    // docs/providers/platinum.md: 404 for an unknown image, 409 for one that is not ready, and one
    // sandbox at most 32 vCPU / 64 GiB / 200 GiB (400 beyond).
    if (body.image) {
      const image = this.images.get(body.image);
      if (!image) return { status: 404, json: errorBody(404, `image ${body.image} not found`) };
      if (image.state !== 'ready') {
        return { status: 409, json: errorBody(409, `image ${body.image} is ${image.state}`) };
      }
    }
    const over = overMaximum(body);
    if (over) return { status: 400, json: errorBody(400, over) };
    const dir = sandboxDir('platinum-sandbox');
    const now = new Date().toISOString();
    const sandbox = {
      id: `plt_${randomUUID().replaceAll('-', '').slice(0, 16)}`,
      state: 'provisioning',
      image: body.image ?? null,
      cpu: body.cpu ?? 2,
      memoryGiB: body.memoryGiB ?? 4,
      diskGiB: body.diskGiB ?? 20,
      labels: body.labels ?? {},
      env: body.env ?? {},
      entrypoint: body.entrypoint ?? [],
      idempotencyKey: key,
      idleTimeoutSeconds: body.idleTimeoutSeconds ?? 1800,
      createdAt: now,
      lastActivityAt: now,
      servicePort: await freePort(),
      booted: false,
      dir: dir.path,
      processes: [],
      removeDir: dir.remove,
    };
    this.sandboxes.set(sandbox.id, sandbox);
    this.boot(sandbox, 'provisioning');
    return { status: 201, json: this.dto(sandbox) };
  }

  private imageRoute(req: JsonRequest, name: string | undefined): Reply {
    if (!name && req.method === 'POST') {
      const body = req.json<{
        name: string;
        dockerfile: string;
        cpu?: number;
        memoryGiB?: number;
        diskGiB?: number;
      }>();
      if (this.images.has(body.name))
        return { status: 409, json: errorBody(409, `image ${body.name} exists`) };
      const over = overMaximum(body);
      if (over) return { status: 400, json: errorBody(400, over) };
      const image = {
        name: body.name,
        state: 'building',
        dockerfile: body.dockerfile,
        cpu: body.cpu ?? 2,
        memoryGiB: body.memoryGiB ?? 4,
        diskGiB: body.diskGiB ?? 20,
        errorReason: null,
      };
      this.images.set(body.name, image);
      const held = this.buildsHeld;
      this.later(this.options.imageBuildDelayMs, () => {
        if (!held) image.state = 'ready';
        else
          held.then(() => {
            image.state = 'ready';
          });
      });
      return { status: 202, json: { name: image.name, state: image.state, errorReason: null } };
    }
    const image = name ? this.images.get(name) : undefined;
    if (!image) return this.notFound(`image ${name}`);
    return { status: 200, json: { name: image.name, state: image.state, errorReason: image.errorReason } };
  }
}

/** The documented per-sandbox maximum (docs/providers/platinum.md, "One sandbox: at most …"). */
function overMaximum(body: { cpu?: number; memoryGiB?: number; diskGiB?: number }): string | null {
  if ((body.cpu ?? 0) > 32) return `cpu ${body.cpu} exceeds the maximum of 32`;
  if ((body.memoryGiB ?? 0) > 64) return `memoryGiB ${body.memoryGiB} exceeds the maximum of 64`;
  if ((body.diskGiB ?? 0) > 200) return `diskGiB ${body.diskGiB} exceeds the maximum of 200`;
  return null;
}
