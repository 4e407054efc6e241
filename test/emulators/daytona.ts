// Daytona API emulator (test fixture) for @daytonaio/sdk: the sandbox and snapshot endpoints under
// `/api`, the toolbox (`/toolbox/{id}/process/...`) and state transitions the SDK polls for, as strict
// as the real service on everything our adapter calls. Each rule cites where the real behaviour is
// written down: daytonaio/daytona `apps/api/src/sandbox/services/sandbox.service.ts` (SBX),
// `apps/api/src/sandbox/services/snapshot.service.ts` (SNAP), `apps/api/src/exceptions/
// sandbox-error.exception.ts` (SandboxError = HTTP 400), the daemon's toolbox
// `apps/daemon/pkg/toolbox/docs/swagger.yaml` (TOOLBOX) and `libs/api-client-go/api/openapi.yaml`.
//
// A sandbox's processes are real local processes; its port 8000 is a free local port that the
// emulator injects as SINGULACOMP_SERVICE_PORT. Previews go through a per-sandbox proxy that, like
// Daytona's (private sandboxes by default), refuses requests without the sandbox's current
// `x-daytona-preview-token`; the token is renewed on every start (SBX `start`: `authToken = nanoid(32)`),
// and a missing or stale one is redirected (307) to a login page that answers 200, as
// `apps/proxy/pkg/proxy/auth.go` does. Quota refusals are 400 (v0.190). Snapshot activation is
// asynchronous (SNAP `activateSnapshot`: the snapshot goes `pending`, creates from it answer 400
// "Snapshot X is pending" until it is `active` again) and refused within ten minutes of its
// deactivation.
import { randomUUID } from 'node:crypto';
import { createServer, request as httpRequest, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { EmulatorBase, killProcesses, processEnv } from './base';
import { freePort, type JsonRequest, type Reply, SandboxProcess, sandboxDir } from './harness';

/** An organization's resource limits (SBX `validateOrganizationQuotas`, SNAP likewise). */
export interface DaytonaTier {
  maxCpuPerSandbox: number;
  maxMemoryPerSandboxGiB: number;
  maxDiskPerSandboxGiB: number;
  totalCpu: number;
  totalMemoryGiB: number;
  totalDiskGiB: number;
}

/**
 * Daytona's documented defaults: 4 vCPU / 8 GB / 10 GB per sandbox (more on request), and Tier 1
 * account totals of 10 vCPU / 10 GiB / 30 GiB.
 */
export const DAYTONA_TIER_1: DaytonaTier = {
  maxCpuPerSandbox: 4,
  maxMemoryPerSandboxGiB: 8,
  maxDiskPerSandboxGiB: 10,
  totalCpu: 10,
  totalMemoryGiB: 10,
  totalDiskGiB: 30,
};

/** The account default a sandbox created without a snapshot boots from (SBX `DEFAULT_CPU` etc.). */
export const DAYTONA_DEFAULT_SNAPSHOT = { name: 'daytonaio/sandbox:0.4.3', cpu: 1, memory: 1, disk: 3 };

/** Snapshots unused this long are deactivated (create from them → 400 until activated). */
export const SNAPSHOT_INACTIVE_AFTER_MS = 14 * 24 * 3_600_000;

/** Activation is refused this long after a deactivation (SNAP: "deactivation is still in progress"). */
export const SNAPSHOT_REACTIVATION_COOLDOWN_MS = 10 * 60_000;

export interface DaytonaEmulatorOptions {
  /** @default 'daytona-test-key' */
  apiKey?: string;
  /** Time a sandbox spends in `creating`/`starting` before `started`. @default 30 */
  bootDelayMs?: number;
  /** Time in `stopping` before `stopped`. @default 10 */
  stopDelayMs?: number;
  /** Time a snapshot spends building. @default 30 */
  snapshotBuildDelayMs?: number;
  /** Time an activated snapshot spends `pending` before it is `active` again. @default 30 */
  snapshotActivationDelayMs?: number;
  /** Dockerfiles matching this never finish building (stay `building`). */
  hangBuildsMatching?: RegExp;
  /** Dockerfiles matching this fail to build (`build_failed`). */
  failBuildsMatching?: RegExp;
  /** Port the preview URL maps to the emulated service port. @default 8000 */
  servicePort?: number;
  /** The organization's limits. @default DAYTONA_TIER_1 */
  tier?: DaytonaTier;
  /** Regions the organization may use; another `target` is a 403. @default ['us', 'eu'] */
  regions?: string[];
}

interface SessionCommand {
  id: string;
  command: string;
  proc: SandboxProcess;
  output: string;
}

export interface DaytonaEmulatedSandbox {
  id: string;
  name: string;
  state: string;
  snapshot: string | null;
  env: Record<string, string>;
  labels: Record<string, string>;
  target: string;
  cpu: number;
  memory: number;
  disk: number;
  autoStopInterval: number;
  createdAt: string;
  updatedAt: string;
  lastActivityAt: string;
  /** Token the preview proxy requires; renewed on every start. */
  previewToken: string;
  /** Local port standing in for the sandbox's port 8000. */
  servicePort: number;
  /** Local port of the sandbox's preview proxy (the URL the preview-url endpoint returns). */
  previewPort: number;
  dir: string;
  processes: SandboxProcess[];
  /** Toolbox sessions of the running daemon (gone when the sandbox stops). */
  sessions: Map<string, SessionCommand[]>;
}

interface SnapshotRecord {
  id: string;
  name: string;
  state: string;
  dockerfile: string;
  cpu: number;
  memory: number;
  disk: number;
  errorReason: string | null;
  /** Emulator-clock ms of the last sandbox created from it (or of its build). */
  lastUsedAt: number;
  /** Emulator-clock ms of its last deactivation. */
  deactivatedAt: number | null;
}

type Emulated = DaytonaEmulatedSandbox & { removeDir(): void; preview: Server };

const errorBody = (status: number, message: string) => ({
  statusCode: status,
  message,
  error:
    status === 401
      ? 'Unauthorized'
      : status === 403
        ? 'Forbidden'
        : status === 404
          ? 'Not Found'
          : status === 409
            ? 'Conflict'
            : 'Bad Request',
});

/** The daemon's error envelope (the SDK reads `code` and `source` to pick a class). */
const daemonError = (status: number, message: string, code: string) => ({
  statusCode: status,
  message,
  code,
  source: 'DAYTONA_DAEMON',
});

/** States in which a sandbox is between two stable states (SBX: `pending` / state ≠ desiredState). */
const TRANSITIONAL = new Set([
  'creating',
  'starting',
  'stopping',
  'destroying',
  'pending_build',
  'building_snapshot',
  'pulling_snapshot',
  'restoring',
  'archiving',
  'resizing',
  'snapshotting',
  'pausing',
  'resuming',
]);
/** States whose CPU and memory count against the account totals. */
const RUNNING = new Set(['creating', 'starting', 'started', 'pending_build', 'building_snapshot']);

export class DaytonaEmulator extends EmulatorBase {
  private readonly sandboxes = new Map<string, Emulated>();
  private readonly snapshotsByName = new Map<string, SnapshotRecord>();
  private clockOffsetMs = 0;
  protected readonly options: Required<
    Omit<DaytonaEmulatorOptions, 'failBuildsMatching' | 'hangBuildsMatching'>
  > &
    Pick<DaytonaEmulatorOptions, 'failBuildsMatching' | 'hangBuildsMatching'>;

  private constructor(options: DaytonaEmulatorOptions) {
    super(errorBody);
    this.options = {
      apiKey: options.apiKey ?? 'daytona-test-key',
      bootDelayMs: options.bootDelayMs ?? 30,
      stopDelayMs: options.stopDelayMs ?? 10,
      snapshotBuildDelayMs: options.snapshotBuildDelayMs ?? 30,
      snapshotActivationDelayMs: options.snapshotActivationDelayMs ?? 30,
      hangBuildsMatching: options.hangBuildsMatching,
      servicePort: options.servicePort ?? 8000,
      failBuildsMatching: options.failBuildsMatching,
      tier: options.tier ?? DAYTONA_TIER_1,
      regions: options.regions ?? ['us', 'eu'],
    };
  }

  static start(options: DaytonaEmulatorOptions = {}): Promise<DaytonaEmulator> {
    return EmulatorBase.listening(new DaytonaEmulator(options));
  }

  /** Value for the SDK's `apiUrl`. */
  get apiUrl(): string {
    return `${this.server.url}/api`;
  }

  /** The emulator's clock (ms): wall time plus whatever the test advanced it by. */
  now(): number {
    return Date.now() + this.clockOffsetMs;
  }

  /** Moves the emulator's clock forward (snapshot deactivation reads it). */
  advanceClock(ms: number): void {
    this.clockOffsetMs += ms;
    this.deactivateUnused();
  }

  /** Live (not destroyed) sandboxes. */
  list(): DaytonaEmulatedSandbox[] {
    return [...this.sandboxes.values()].filter((s) => s.state !== 'destroyed');
  }

  get(id: string): DaytonaEmulatedSandbox | undefined {
    return this.sandboxes.get(id);
  }

  snapshots(): SnapshotRecord[] {
    return [...this.snapshotsByName.values()];
  }

  /** Forces a snapshot's state (e.g. `error` after a registry loss). */
  setSnapshotState(name: string, state: string): void {
    const record = this.snapshotsByName.get(name);
    if (record) record.state = state;
  }

  /** Forces a native state (for state-mapping tests). */
  setState(id: string, state: string): void {
    const sandbox = this.sandboxes.get(id);
    if (sandbox) sandbox.state = state;
  }

  /**
   * Puts a sandbox in a transitional state (e.g. `stopping`) that settles into `settlesTo` once the
   * emulator has refused `refusals` state changes with "state change in progress".
   */
  holdTransition(id: string, state: string, settlesTo: string, refusals = 1): void {
    const sandbox = this.sandboxes.get(id);
    if (!sandbox) return;
    sandbox.state = state;
    this.held.set(id, { settlesTo, refusals });
  }

  private readonly held = new Map<string, { settlesTo: string; refusals: number }>();

  /** A "state change in progress" refusal; settles a held transition once it has refused enough. */
  private busy(sandbox: DaytonaEmulatedSandbox, message: string): Reply {
    const hold = this.held.get(sandbox.id);
    if (hold && --hold.refusals <= 0) {
      this.held.delete(sandbox.id);
      sandbox.state = hold.settlesTo;
    }
    return this.refuse(400, message);
  }

  protected releaseSandboxes() {
    const all = [...this.sandboxes.values()];
    for (const sandbox of all) closeServer(sandbox.preview);
    return all;
  }

  /** Deactivates snapshots unused for 14 days, dated when they crossed the line. */
  private deactivateUnused(): void {
    const now = this.now();
    for (const record of this.snapshotsByName.values()) {
      if (record.state === 'active' && now - record.lastUsedAt > SNAPSHOT_INACTIVE_AFTER_MS) {
        record.state = 'inactive';
        record.deactivatedAt = record.lastUsedAt + SNAPSHOT_INACTIVE_AFTER_MS;
      }
    }
  }

  /** The login page a bad preview token is redirected to (the dashboard's sign-in, 200). */
  get loginUrl(): string {
    return `${this.server.url}/login`;
  }

  private dto(s: DaytonaEmulatedSandbox) {
    return {
      id: s.id,
      name: s.name,
      organizationId: 'org-emulated',
      snapshot: s.snapshot ?? undefined,
      user: 'daytona',
      env: s.env,
      labels: s.labels,
      public: false,
      target: s.target,
      cpu: s.cpu,
      gpu: 0,
      memory: s.memory,
      disk: s.disk,
      state: s.state,
      autoStopInterval: s.autoStopInterval,
      createdAt: s.createdAt,
      updatedAt: s.updatedAt,
      lastActivityAt: s.lastActivityAt,
      toolboxProxyUrl: `${this.server.url}/toolbox`,
    };
  }

  private find(idOrName: string): Emulated | undefined {
    const byId = this.sandboxes.get(idOrName);
    if (byId && byId.state !== 'destroyed') return byId;
    return [...this.sandboxes.values()].find((s) => s.name === idOrName && s.state !== 'destroyed');
  }

  private transition(sandbox: DaytonaEmulatedSandbox, from: string, to: string, delayMs: number): void {
    sandbox.state = from;
    const apply = () => {
      if (sandbox.state !== from) return;
      sandbox.state = to;
      sandbox.updatedAt = new Date().toISOString();
    };
    if (delayMs <= 0) apply();
    else this.later(delayMs, apply);
  }

  private notFound(what: string): Reply {
    return { status: 404, json: errorBody(404, `${what} not found`) };
  }

  private refuse(status: number, message: string): Reply {
    return { status, json: errorBody(status, message) };
  }

  /**
   * Per-sandbox and account-total limits, checked on create, start and snapshot builds (SBX and
   * SNAP `validateOrganizationQuotas`: 400 with these messages in v0.190; older releases said 403).
   */
  private quotaRefusal(
    resources: { cpu: number; memory: number; disk: number },
    excludeId?: string,
    totals = true,
  ): Reply | null {
    const tier = this.options.tier;
    if (resources.cpu > tier.maxCpuPerSandbox)
      return this.refuse(
        400,
        `CPU request ${resources.cpu} exceeds maximum allowed per sandbox (${tier.maxCpuPerSandbox}).`,
      );
    if (resources.memory > tier.maxMemoryPerSandboxGiB)
      return this.refuse(
        400,
        `Memory request ${resources.memory}GB exceeds maximum allowed per sandbox (${tier.maxMemoryPerSandboxGiB}GB).`,
      );
    if (resources.disk > tier.maxDiskPerSandboxGiB)
      return this.refuse(
        400,
        `Disk request ${resources.disk}GB exceeds maximum allowed per sandbox (${tier.maxDiskPerSandboxGiB}GB).`,
      );
    if (!totals) return null;
    const others = this.list().filter((s) => s.id !== excludeId);
    const running = others.filter((s) => RUNNING.has(s.state));
    const cpu = running.reduce((sum, s) => sum + s.cpu, 0) + resources.cpu;
    const memory = running.reduce((sum, s) => sum + s.memory, 0) + resources.memory;
    const disk = others.filter((s) => s.state !== 'archived').reduce((sum, s) => sum + s.disk, 0);
    if (cpu > tier.totalCpu)
      return this.refuse(400, `Total CPU limit exceeded. Maximum allowed: ${tier.totalCpu}.`);
    if (memory > tier.totalMemoryGiB)
      return this.refuse(400, `Total memory limit exceeded. Maximum allowed: ${tier.totalMemoryGiB}GiB.`);
    if (disk + resources.disk > tier.totalDiskGiB)
      return this.refuse(400, `Total disk limit exceeded. Maximum allowed: ${tier.totalDiskGiB}GiB.`);
    return null;
  }

  protected async route(req: JsonRequest): Promise<Reply> {
    this.deactivateUnused();
    if (req.path === '/login' && req.method === 'GET') {
      return { status: 200, json: { page: 'Sign in to Daytona' }, headers: { 'content-type': 'text/html' } };
    }
    if (req.headers.authorization !== `Bearer ${this.options.apiKey}`) {
      return { status: 401, json: errorBody(401, 'Invalid credentials') };
    }
    const segments = req.path.split('/').filter(Boolean);
    if (segments[0] === 'toolbox') return this.toolbox(req, segments.slice(1));
    if (segments[0] !== 'api') return this.notFound(req.path);
    const [resource, id, action, ...rest] = segments.slice(1);
    if (resource === 'sandbox') return this.sandboxRoute(req, id, action, rest);
    if (resource === 'snapshots') return this.snapshotRoute(req, id, action);
    return this.notFound(req.path);
  }

  private async sandboxRoute(
    req: JsonRequest,
    id: string | undefined,
    action: string | undefined,
    rest: string[],
  ): Promise<Reply> {
    if (!id) {
      if (req.method === 'POST') return this.create(req);
      if (req.method === 'GET') {
        const labels = req.url.searchParams.get('labels');
        const wanted = labels ? (JSON.parse(labels) as Record<string, string>) : {};
        const items = this.list()
          .filter((s) => Object.entries(wanted).every(([k, v]) => s.labels[k] === v))
          .map((s) => this.dto(s));
        return {
          status: 200,
          json: { items, total: items.length, page: 1, totalPages: 1, nextCursor: null },
        };
      }
    }
    const sandbox = id ? this.find(id) : undefined;
    if (!sandbox) return this.notFound(`Sandbox with ID or name ${id}`);
    const now = new Date().toISOString();
    if (!action) {
      if (req.method === 'GET') return { status: 200, json: this.dto(sandbox) };
      if (req.method === 'DELETE') {
        // SBX `destroy`: `if (sandbox.pending) throw new SandboxError('Sandbox state change in progress')`.
        if (TRANSITIONAL.has(sandbox.state)) return this.busy(sandbox, 'Sandbox state change in progress');
        sandbox.state = 'destroying';
        await killProcesses(sandbox);
        closeServer(sandbox.preview);
        sandbox.state = 'destroyed';
        sandbox.removeDir();
        return { status: 200, json: this.dto(sandbox) };
      }
    }
    if (req.method === 'POST' && action === 'start') {
      // SBX `start`: started → returned as is; a transition → 400; only stopped/archived start.
      if (sandbox.state === 'started') return { status: 200, json: this.dto(sandbox) };
      if (TRANSITIONAL.has(sandbox.state)) return this.busy(sandbox, 'State change in progress');
      if (sandbox.state !== 'stopped' && sandbox.state !== 'archived')
        return this.refuse(400, 'Sandbox is not in valid state');
      const quota = this.quotaRefusal(sandbox, sandbox.id);
      if (quota) return quota;
      sandbox.previewToken = newPreviewToken();
      this.transition(sandbox, 'starting', 'started', this.options.bootDelayMs);
      return { status: 200, json: this.dto(sandbox) };
    }
    if (req.method === 'POST' && action === 'stop') {
      // SBX `stop`: a transition → 400 'State change in progress'; not started → 400.
      if (TRANSITIONAL.has(sandbox.state)) return this.busy(sandbox, 'State change in progress');
      if (sandbox.state !== 'started') return this.refuse(400, 'Sandbox is not started');
      sandbox.state = 'stopping';
      sandbox.sessions.clear();
      const stopping = killProcesses(sandbox);
      this.later(this.options.stopDelayMs, () => {
        void stopping.then(() => {
          if (sandbox.state === 'stopping') sandbox.state = 'stopped';
        });
      });
      return { status: 200, json: this.dto(sandbox) };
    }
    if (req.method === 'POST' && action === 'last-activity') {
      sandbox.lastActivityAt = now;
      return { status: 201 };
    }
    if (req.method === 'POST' && action === 'autostop') {
      sandbox.autoStopInterval = Number(rest[0]);
      return { status: 201 };
    }
    if (req.method === 'GET' && action === 'ports' && rest[1] === 'preview-url') {
      // SBX `getPortPreviewUrl`: `{ sandboxId, url, token: sandbox.authToken }`.
      const port = Number(rest[0]);
      if (!Number.isInteger(port) || port < 1 || port > 65_535) return this.refuse(400, 'Invalid port');
      const url =
        port === this.options.servicePort
          ? `http://127.0.0.1:${sandbox.previewPort}`
          : `https://${port}-${sandbox.id}.proxy.daytona.emulated`;
      return { status: 200, json: { sandboxId: sandbox.id, url, token: sandbox.previewToken } };
    }
    return this.notFound(req.path);
  }

  private async create(req: JsonRequest): Promise<Reply> {
    const body = req.json<{
      name?: string;
      snapshot?: string;
      buildInfo?: { dockerfileContent?: string };
      env?: Record<string, string>;
      labels?: Record<string, string>;
      target?: string;
      cpu?: number;
      memory?: number;
      disk?: number;
      autoStopInterval?: number;
    }>();
    const target = body.target ?? 'us';
    if (!this.options.regions.includes(target)) {
      // SNAP/SBX `getValidatedOrDefaultRegionId`: a shared region without quota → 403.
      return this.refuse(403, `Region ${target} is not available to the organization`);
    }
    if (body.name && this.find(body.name)) {
      return this.refuse(409, `Sandbox with name ${body.name} already exists`);
    }
    let resources: { cpu: number; memory: number; disk: number };
    let snapshot: SnapshotRecord | undefined;
    if (body.buildInfo) {
      // SBX createFromBuildInfo: the request's resources, else the defaults of 1 / 1 / 3.
      resources = { cpu: body.cpu ?? 1, memory: body.memory ?? 1, disk: body.disk ?? 3 };
    } else if (body.snapshot) {
      // SBX createFromSnapshot: unknown → 400 "not found", not active → 400 "is <state>"; the
      // snapshot's resources apply, the request's are ignored.
      snapshot = this.snapshotsByName.get(body.snapshot);
      if (!snapshot)
        return this.refuse(
          400,
          `Snapshot ${body.snapshot} not found. Did you add it through the Daytona Dashboard?`,
        );
      if (snapshot.state !== 'active')
        return this.refuse(400, `Snapshot ${body.snapshot} is ${snapshot.state}`);
      resources = { cpu: snapshot.cpu, memory: snapshot.memory, disk: snapshot.disk };
    } else {
      const fallback = DAYTONA_DEFAULT_SNAPSHOT;
      resources = { cpu: fallback.cpu, memory: fallback.memory, disk: fallback.disk };
    }
    const quota = this.quotaRefusal(resources);
    if (quota) return quota;
    if (snapshot) snapshot.lastUsedAt = this.now();
    const id = randomUUID();
    const dir = sandboxDir('daytona-sandbox');
    const now = new Date().toISOString();
    const sandbox: Emulated = {
      id,
      name: body.name ?? id,
      state: 'creating',
      snapshot: body.snapshot ?? (body.buildInfo ? null : DAYTONA_DEFAULT_SNAPSHOT.name),
      env: body.env ?? {},
      labels: body.labels ?? {},
      target,
      ...resources,
      autoStopInterval: body.autoStopInterval ?? 15,
      createdAt: now,
      updatedAt: now,
      lastActivityAt: now,
      previewToken: newPreviewToken(),
      servicePort: await freePort(),
      previewPort: 0,
      dir: dir.path,
      processes: [],
      sessions: new Map(),
      removeDir: dir.remove,
      preview: createServer(),
    };
    sandbox.preview = this.previewProxy(sandbox);
    await new Promise<void>((resolve) => sandbox.preview.listen(0, '127.0.0.1', resolve));
    sandbox.previewPort = (sandbox.preview.address() as AddressInfo).port;
    this.sandboxes.set(id, sandbox);
    if (body.buildInfo) {
      this.transition(
        sandbox,
        'pending_build',
        'started',
        this.options.bootDelayMs + this.options.snapshotBuildDelayMs,
      );
    } else {
      this.transition(sandbox, 'creating', 'started', this.options.bootDelayMs);
    }
    return { status: 200, json: this.dto(sandbox) };
  }

  /**
   * Daytona's preview proxy for one sandbox: the current preview token or a 307 to the sign-in page, a started sandbox
   * or 502, then the request is relayed to the service port (502 when nothing listens there).
   */
  private previewProxy(sandbox: DaytonaEmulatedSandbox): Server {
    return createServer((req: IncomingMessage, res) => {
      const reply = (status: number, message: string): void => {
        req.resume();
        res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify({ message }));
      };
      if (req.headers['x-daytona-preview-token'] !== sandbox.previewToken) {
        // apps/proxy auth: no valid token → a redirect to the sign-in page, not a 401.
        req.resume();
        const back = encodeURIComponent(`http://127.0.0.1:${sandbox.previewPort}${req.url ?? '/'}`);
        res.writeHead(307, { location: `${this.loginUrl}?redirect=${back}` }).end();
        return;
      }
      if (sandbox.state !== 'started') {
        reply(502, `Sandbox ${sandbox.id} is ${sandbox.state}`);
        return;
      }
      const { 'x-daytona-preview-token': _token, ...headers } = req.headers;
      const upstream = httpRequest(
        { host: '127.0.0.1', port: sandbox.servicePort, method: req.method, path: req.url, headers },
        (answer) => {
          res.writeHead(answer.statusCode ?? 502, answer.headers);
          answer.pipe(res);
        },
      );
      upstream.on('error', () => {
        if (!res.headersSent) reply(502, `no service on port ${this.options.servicePort}`);
        else res.end();
      });
      req.pipe(upstream);
    });
  }

  private spawn(sandbox: DaytonaEmulatedSandbox, command: string, onOutput: (chunk: Buffer) => void) {
    const proc = new SandboxProcess({
      file: '/bin/sh',
      args: ['-c', command],
      cwd: sandbox.dir,
      env: processEnv(sandbox, sandbox.env),
      onStdout: onOutput,
      onStderr: onOutput,
    });
    sandbox.processes.push(proc);
    return proc;
  }

  private async toolbox(req: JsonRequest, segments: string[]): Promise<Reply> {
    const [id, area, kind, sessionId, verb, commandId, tail] = segments;
    const sandbox = id ? this.find(id) : undefined;
    if (!sandbox) return this.notFound(`Sandbox ${id}`);
    if (sandbox.state !== 'started') {
      return this.refuse(400, `Sandbox ${sandbox.id} is not started (${sandbox.state})`);
    }
    sandbox.lastActivityAt = new Date().toISOString();
    if (area !== 'process') return this.notFound(req.path);
    if (kind === 'execute' && req.method === 'POST') {
      const body = req.json<{ command: string; envs?: Record<string, string>; timeout?: number }>();
      let output = '';
      const proc = new SandboxProcess({
        file: '/bin/sh',
        args: ['-c', body.command],
        cwd: sandbox.dir,
        env: processEnv(sandbox, sandbox.env, body.envs),
        onStdout: (chunk) => {
          output += chunk.toString('utf8');
        },
      });
      const exitCode = await proc.exited;
      return { status: 200, json: { exitCode, result: output } };
    }
    if (kind !== 'session') return this.notFound(req.path);
    if (!sessionId && req.method === 'POST') {
      // TOOLBOX POST /process/session: 409 Conflict when the session id exists.
      const wanted = req.json<{ sessionId: string }>().sessionId;
      if (sandbox.sessions.has(wanted))
        return { status: 409, json: daemonError(409, `session ${wanted} already exists`, 'CONFLICT') };
      sandbox.sessions.set(wanted, []);
      return { status: 201 };
    }
    const session = sessionId ? sandbox.sessions.get(sessionId) : undefined;
    if (!session) {
      return { status: 404, json: daemonError(404, `session ${sessionId} not found`, 'NOT_FOUND') };
    }
    if (!verb && req.method === 'GET') {
      return {
        status: 200,
        json: {
          sessionId,
          commands: session.map((c) => ({ id: c.id, command: c.command, exitCode: c.proc.exitCode })),
        },
      };
    }
    if (verb === 'exec' && req.method === 'POST') {
      const body = req.json<{ command: string; runAsync?: boolean; async?: boolean }>();
      const command: SessionCommand = {
        id: randomUUID(),
        command: body.command,
        output: '',
        proc: null as never,
      };
      command.proc = this.spawn(sandbox, body.command, (chunk) => {
        command.output += chunk.toString('utf8');
      });
      session.push(command);
      // TOOLBOX: an async exec answers 202 with the command id at once, whether or not the
      // command can run; its exit code appears on GET .../command/{id} once it ends.
      if (body.runAsync || body.async) return { status: 202, json: { cmdId: command.id } };
      const exitCode = await command.proc.exited;
      return {
        status: 200,
        json: { cmdId: command.id, exitCode, output: command.output, stdout: command.output, stderr: '' },
      };
    }
    if (verb === 'command' && commandId && req.method === 'GET') {
      const command = session.find((c) => c.id === commandId);
      if (!command)
        return {
          status: 404,
          json: daemonError(404, `command ${commandId} not found`, 'NOT_FOUND'),
        };
      if (tail === 'logs')
        return { status: 200, json: { output: command.output, stdout: command.output, stderr: '' } };
      return {
        status: 200,
        json: { id: command.id, command: command.command, exitCode: command.proc.exitCode },
      };
    }
    return this.notFound(req.path);
  }

  private snapshotRoute(req: JsonRequest, idOrName: string | undefined, action: string | undefined): Reply {
    if (!idOrName && req.method === 'POST') {
      const body = req.json<{
        name: string;
        buildInfo?: { dockerfileContent?: string };
        cpu?: number;
        memory?: number;
        disk?: number;
      }>();
      // SNAP createFromBuildInfo: a taken name is 409 whatever the existing snapshot's state.
      if (this.snapshotsByName.has(body.name)) {
        return this.refuse(409, `Snapshot with name "${body.name}" already exists for this organization`);
      }
      const resources = { cpu: body.cpu ?? 1, memory: body.memory ?? 1, disk: body.disk ?? 3 };
      // SNAP validateOrganizationQuotas: per-sandbox limits apply to a snapshot's resources.
      const quota = this.quotaRefusal(resources, undefined, false);
      if (quota) return quota;
      const dockerfile = body.buildInfo?.dockerfileContent ?? '';
      const record: SnapshotRecord = {
        id: randomUUID(),
        name: body.name,
        state: 'pending',
        dockerfile,
        ...resources,
        errorReason: null,
        lastUsedAt: this.now(),
        deactivatedAt: null,
      };
      this.snapshotsByName.set(body.name, record);
      this.later(this.options.snapshotBuildDelayMs / 2, () => {
        if (record.state === 'pending') record.state = 'building';
      });
      this.later(this.options.snapshotBuildDelayMs, () => {
        if (record.state !== 'building' && record.state !== 'pending') return;
        if (this.options.hangBuildsMatching?.test(dockerfile)) return;
        const fail = this.options.failBuildsMatching?.test(dockerfile);
        record.state = fail ? 'build_failed' : 'active';
        record.errorReason = fail ? 'Dockerfile step failed' : null;
        record.lastUsedAt = this.now();
      });
      return { status: 200, json: this.snapshotDto(record) };
    }
    const record =
      idOrName &&
      (this.snapshotsByName.get(idOrName) ??
        [...this.snapshotsByName.values()].find((s) => s.id === idOrName));
    if (!record) return this.notFound(`Snapshot with name ${idOrName}`);
    if (!action && req.method === 'GET') return { status: 200, json: this.snapshotDto(record) };
    if (action === 'activate' && req.method === 'POST') {
      // SNAP activateSnapshot: only an inactive snapshot activates, and not within ten minutes of
      // its deactivation; it goes `pending` and is processed again before it is `active`.
      if (record.state === 'active') return this.refuse(400, `Snapshot ${record.id} is already active`);
      if (record.state !== 'inactive')
        return this.refuse(400, `Snapshot ${record.id} cannot be activated - it is in ${record.state} state`);
      if (
        record.deactivatedAt !== null &&
        this.now() - record.deactivatedAt < SNAPSHOT_REACTIVATION_COOLDOWN_MS
      ) {
        return this.refuse(
          400,
          `Snapshot ${record.id} deactivation is still in progress, please try again in a few minutes`,
        );
      }
      const quota = this.quotaRefusal(record, undefined, false);
      if (quota) return quota;
      record.state = 'pending';
      record.lastUsedAt = this.now();
      this.later(this.options.snapshotActivationDelayMs, () => {
        if (record.state !== 'pending') return;
        record.state = 'active';
        record.lastUsedAt = this.now();
      });
      return { status: 200, json: this.snapshotDto(record) };
    }
    return this.notFound(req.path);
  }

  private snapshotDto(record: SnapshotRecord) {
    return {
      id: record.id,
      name: record.name,
      state: record.state,
      errorReason: record.errorReason,
      cpu: record.cpu,
      mem: record.memory,
      disk: record.disk,
      general: false,
      lastUsedAt: new Date(record.lastUsedAt).toISOString(),
      createdAt: new Date().toISOString(),
      updatedAt: new Date().toISOString(),
    };
  }
}

function closeServer(server: Server): void {
  server.closeAllConnections();
  server.close();
}

function newPreviewToken(): string {
  return randomUUID().replaceAll('-', '');
}
