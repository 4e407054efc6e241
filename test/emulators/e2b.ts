// E2B emulator (test fixture) for the `e2b` SDK: the REST API (sandboxes, timeouts, pause/resume,
// template builds) and envd's Connect-RPC `process.Process/Start` on the same server — point both
// `apiUrl` and `sandboxUrl` at it; envd calls are routed by the `E2b-Sandbox-Id` header.
// Processes are real; pause is SIGSTOP of the sandbox's process groups and resume SIGCONT, like
// E2B's memory snapshots. Sandboxes expire at their deadline (killed, or paused with autoPause).
//
// As strict as the real API on what our adapter calls. References: e2b-dev/E2B `spec/openapi.yml`
// (OPENAPI), e2b-dev/infra `packages/api/internal/orchestrator/keep_alive.go` (KEEPALIVE: the
// sandbox's end time is clamped to start + max instance length, past it 400 "Max instance length
// exceeded"; not running → 409/404), `packages/api/internal/handlers/` (sandbox create, template
// builds), and the SDK's `checkAliasExists` (an alias answers as soon as a build is registered, 403
// reads as "exists"). Plan limits (E2B pricing and `sandbox_create.go`): Hobby allows one sandbox
// create per second and 20 concurrent running sandboxes (429, with or without `Retry-After`), a
// 10 GiB disk and 1 h sessions; Pro 100 concurrent, 20 GiB and 24 h. Each route answers only at its
// own API version (`/v2/sandboxes`, `/v3/templates`, unversioned `/sandboxes/{id}`): a wrong prefix
// is a 404 like the real router's. `connect` to a sandbox being paused waits for the pause and
// resumes it; `connect` to a running sandbox past its maximum length answers 400.
import { randomUUID } from 'node:crypto';
import type { ServerResponse } from 'node:http';
import { EmulatorBase, killProcesses, processEnv } from './base';
import { freePort, type JsonRequest, type Reply, SandboxProcess, sandboxDir } from './harness';

export interface E2BEmulatorOptions {
  /** @default 'e2b_test_key' */
  apiKey?: string;
  /** Sandbox domain returned on create. @default 'e2b.emulated' */
  domain?: string;
  /** Time a template build takes. @default 30 */
  templateBuildDelayMs?: number;
  /** Port whose `${port}-${id}.${domain}` host maps to the emulated service port. @default 8000 */
  servicePort?: number;
  /** The team's plan: Hobby caps a sandbox at 1 h from its start, Pro at 24 h. @default 'hobby' */
  plan?: 'hobby' | 'pro';
  /** Overrides the plan's maximum sandbox length (tests use seconds, not hours). */
  maxInstanceLengthMs?: number;
  /** Templates every team can boot from. @default ['base'] */
  publicTemplates?: string[];
  /** Aliases that belong to another team: their alias lookup answers 403. */
  foreignTemplates?: string[];
  /** Template builds whose steps (JSON) match this end in `error`. */
  failBuildsMatching?: RegExp;
  /** How late the evictor acts on a deadline (a window in which a sandbox runs past its end). @default 0 */
  evictionLagMs?: number;
  /** Sandbox creates accepted per second. @default the plan's (Hobby 1, Pro 5) */
  createsPerSecond?: number;
  /** Whether a rate-limited create carries `Retry-After` (seconds). @default false */
  rateLimitRetryAfter?: boolean;
  /** Running sandboxes at once. @default the plan's (Hobby 20, Pro 100) */
  maxConcurrent?: number;
}

/** Plan limits (E2B pricing/docs: template CPU 1 or even up to 8, memory up to 8 GiB; length 1 h / 24 h). */
export const E2B_PLANS = {
  hobby: {
    maxInstanceLengthMs: 3_600_000,
    maxCpu: 8,
    maxMemoryMB: 8_192,
    diskSizeMB: 10_240,
    createsPerSecond: 1,
    maxConcurrent: 20,
  },
  pro: {
    maxInstanceLengthMs: 24 * 3_600_000,
    maxCpu: 8,
    maxMemoryMB: 8_192,
    diskSizeMB: 20_480,
    createsPerSecond: 5,
    maxConcurrent: 100,
  },
} as const;

/** The routes of the API, each at its one version (OPENAPI paths; the SDK's calls). */
const ROUTES: ReadonlyArray<readonly [string, RegExp]> = [
  ['POST', /^\/v2\/sandboxes$/],
  ['GET', /^\/v2\/sandboxes$/],
  ['POST', /^\/v2\/sandboxes\/[^/]+\/connect$/],
  ['GET', /^\/sandboxes\/[^/]+$/],
  ['DELETE', /^\/sandboxes\/[^/]+$/],
  ['POST', /^\/sandboxes\/[^/]+\/(timeout|pause)$/],
  ['POST', /^\/v3\/templates$/],
  ['GET', /^\/templates\/aliases\/[^/]+$/],
  ['GET', /^\/templates\/[^/]+$/],
  ['GET', /^\/templates\/[^/]+\/files\/[^/]+$/],
  ['POST', /^\/v2\/templates\/[^/]+\/builds\/[^/]+$/],
  ['GET', /^\/templates\/[^/]+\/builds\/[^/]+\/status$/],
];

export interface E2BEmulatedSandbox {
  sandboxID: string;
  templateID: string;
  state: 'running' | 'paused';
  metadata: Record<string, string>;
  envVars: Record<string, string>;
  startedAt: string;
  endAt: string;
  autoPause: boolean;
  envdAccessToken: string;
  servicePort: number;
  dir: string;
  processes: SandboxProcess[];
}

/** One build step as the SDK serialises it (`Template().fromDockerfile(...)` → steps). */
export interface E2BTemplateStep {
  type: string;
  args: string[];
  force?: boolean;
  filesHash?: string;
}

/** The body of `POST /templates/{id}/builds/{buildID}` (the SDK's `serialize()`). */
export interface E2BTemplateBuild {
  templateID: string;
  buildID: string;
  fromImage?: string;
  fromTemplate?: string;
  startCmd?: string;
  readyCmd?: string;
  steps: E2BTemplateStep[];
}

interface BuildRecord {
  buildID: string;
  cpuCount: number;
  memoryMB: number;
  status: 'waiting' | 'building' | 'ready' | 'error';
  reason: string | null;
  steps: unknown;
  createdAt: string;
}

interface TemplateRecord {
  templateID: string;
  /** The latest build's id and fields (what the status routes read). */
  buildID: string;
  name: string;
  cpuCount: number;
  memoryMB: number;
  status: BuildRecord['status'];
  steps: unknown;
  builds: BuildRecord[];
}

/** The port envd listens on in every sandbox (the SDK's `ENVD_PORT`). */
const ENVD_PORT = 49983;

/** Step types E2B's builder executes; anything else is refused like the real API would. */
const STEP_TYPES = new Set(['RUN', 'COPY', 'ENV', 'WORKDIR', 'USER']);

const errorBody = (status: number, message: string) => ({ code: status, message });

/** One Connect envelope: flag byte, 4-byte big-endian length, JSON. */
function envelope(flag: number, payload: unknown): Buffer {
  const json = Buffer.from(JSON.stringify(payload), 'utf8');
  const header = Buffer.alloc(5);
  header.writeUInt8(flag, 0);
  header.writeUInt32BE(json.length, 1);
  return Buffer.concat([header, json]);
}

function readEnvelope(body: Buffer): unknown {
  if (body.length < 5) throw new Error('short Connect envelope');
  const length = body.readUInt32BE(1);
  return JSON.parse(body.subarray(5, 5 + length).toString('utf8'));
}

export class E2BEmulator extends EmulatorBase {
  private readonly sandboxes = new Map<
    string,
    E2BEmulatedSandbox & { removeDir(): void; timer?: NodeJS.Timeout }
  >();
  private readonly templates = new Map<string, TemplateRecord>();
  private readonly builds: E2BTemplateBuild[] = [];
  protected readonly options: Required<Omit<E2BEmulatorOptions, 'failBuildsMatching'>> &
    Pick<E2BEmulatorOptions, 'failBuildsMatching'>;
  /** Sandboxes between running and paused: timeout and pause answer 409, connect waits for it. */
  private readonly pausing = new Map<string, Promise<void>>();
  /** Emulator times (ms) of the creates accepted in the last second. */
  private readonly recentCreates: number[] = [];

  private constructor(options: E2BEmulatorOptions) {
    super(errorBody);
    const plan = options.plan ?? 'hobby';
    this.options = {
      apiKey: options.apiKey ?? 'e2b_test_key',
      domain: options.domain ?? 'e2b.emulated',
      templateBuildDelayMs: options.templateBuildDelayMs ?? 30,
      servicePort: options.servicePort ?? 8000,
      plan,
      maxInstanceLengthMs: options.maxInstanceLengthMs ?? E2B_PLANS[plan].maxInstanceLengthMs,
      publicTemplates: options.publicTemplates ?? ['base'],
      foreignTemplates: options.foreignTemplates ?? [],
      failBuildsMatching: options.failBuildsMatching,
      evictionLagMs: options.evictionLagMs ?? 0,
      createsPerSecond: options.createsPerSecond ?? E2B_PLANS[plan].createsPerSecond,
      rateLimitRetryAfter: options.rateLimitRetryAfter ?? false,
      maxConcurrent: options.maxConcurrent ?? E2B_PLANS[plan].maxConcurrent,
    };
  }

  /** Starts pausing a running sandbox; the pause completes after `durationMs`. */
  holdPausing(id: string, durationMs = 200): void {
    const sandbox = this.sandboxes.get(id);
    if (!sandbox || this.pausing.has(id)) return;
    this.pausing.set(
      id,
      new Promise<void>((resolve) =>
        this.later(durationMs, () => {
          this.pausing.delete(id);
          this.pause(sandbox);
          resolve();
        }),
      ),
    );
  }

  /** A 409 "changing state" (timeout and pause while a pause runs). */
  private changingState(sandbox: E2BEmulatedSandbox): Reply {
    return { status: 409, json: errorBody(409, `Sandbox ${sandbox.sandboxID} is changing state (pausing)`) };
  }

  static start(options: E2BEmulatorOptions = {}): Promise<E2BEmulator> {
    return EmulatorBase.listening(new E2BEmulator(options));
  }

  get domain(): string {
    return this.options.domain;
  }

  /** For the SDK's `apiUrl` and `sandboxUrl` alike. */
  get url(): string {
    return this.server.url;
  }

  list(): E2BEmulatedSandbox[] {
    return [...this.sandboxes.values()];
  }

  get(id: string): E2BEmulatedSandbox | undefined {
    return this.sandboxes.get(id);
  }

  templateList(): TemplateRecord[] {
    return [...this.templates.values()];
  }

  /** Marks every build of a template failed (a template that no longer boots: create answers 404). */
  failTemplate(templateID: string): void {
    const record = this.templates.get(templateID);
    if (!record) return;
    for (const build of record.builds) build.status = 'error';
    record.status = 'error';
  }

  /** Every accepted template build, in order: the steps E2B would have run. */
  templateBuilds(): E2BTemplateBuild[] {
    return [...this.builds];
  }

  /**
   * The emulator's stand-in for E2B's DNS and edge: maps a `${port}-${sandboxId}.${domain}` host to
   * a reachable local URL (only the service port is mapped).
   */
  resolveHost = (host: string): string => {
    const match = /^(\d+)-([^.]+)\.(.+)$/.exec(host);
    if (!match || match[3] !== this.options.domain) throw new Error(`not an emulated E2B host: ${host}`);
    const sandbox = this.sandboxes.get(match[2] as string);
    if (!sandbox || Number(match[1]) !== this.options.servicePort)
      throw new Error(`nothing listens at ${host}`);
    return `http://127.0.0.1:${sandbox.servicePort}`;
  };

  protected releaseSandboxes() {
    const all = [...this.sandboxes.values()];
    this.sandboxes.clear();
    for (const sandbox of all) if (sandbox.timer) clearTimeout(sandbox.timer);
    return all;
  }

  private async kill(id: string): Promise<boolean> {
    const sandbox = this.sandboxes.get(id);
    if (!sandbox) return false;
    this.sandboxes.delete(id);
    if (sandbox.timer) clearTimeout(sandbox.timer);
    await killProcesses(sandbox);
    sandbox.removeDir();
    return true;
  }

  private pause(sandbox: E2BEmulatedSandbox & { timer?: NodeJS.Timeout }): void {
    if (this.pausing.has(sandbox.sandboxID)) return;
    sandbox.state = 'paused';
    if (sandbox.timer) clearTimeout(sandbox.timer);
    for (const proc of sandbox.processes) proc.pause();
  }

  /**
   * (Re)arms the deadline: kill, or pause when created with autoPause. The end time never passes
   * start + max instance length (KEEPALIVE `getMaxAllowedTTL`).
   */
  private arm(sandbox: E2BEmulatedSandbox & { timer?: NodeJS.Timeout }, timeoutSeconds: number): void {
    if (sandbox.timer) clearTimeout(sandbox.timer);
    const left = Date.parse(sandbox.startedAt) + this.options.maxInstanceLengthMs - Date.now();
    const ttlMs = Math.max(0, Math.min(timeoutSeconds * 1000, left));
    sandbox.endAt = new Date(Date.now() + ttlMs).toISOString();
    sandbox.timer = setTimeout(() => {
      if (sandbox.autoPause) this.pause(sandbox);
      else void this.kill(sandbox.sandboxID);
    }, ttlMs + this.options.evictionLagMs);
  }

  /** Whether the sandbox has run past its maximum length. */
  private pastMaxLength(sandbox: E2BEmulatedSandbox): boolean {
    return Date.now() - Date.parse(sandbox.startedAt) > this.options.maxInstanceLengthMs;
  }

  /** A template that can boot sandboxes: public, or one of ours with a ready build. */
  private bootable(templateID: string): boolean {
    if (this.options.publicTemplates.includes(templateID)) return true;
    return this.templates.get(templateID)?.builds.some((b) => b.status === 'ready') ?? false;
  }

  private connection(s: E2BEmulatedSandbox) {
    return {
      sandboxID: s.sandboxID,
      templateID: s.templateID,
      clientID: 'emulated',
      envdVersion: '0.5.7',
      envdAccessToken: s.envdAccessToken,
      domain: this.options.domain,
    };
  }

  private info(s: E2BEmulatedSandbox) {
    const template = this.templates.get(s.templateID);
    return {
      ...this.connection(s),
      metadata: s.metadata,
      startedAt: s.startedAt,
      endAt: s.endAt,
      state: s.state,
      cpuCount: template?.cpuCount ?? 2,
      memoryMB: template?.memoryMB ?? 512,
      diskSizeMB: E2B_PLANS[this.options.plan].diskSizeMB,
    };
  }

  /**
   * The plan's create rate and concurrency (`sandbox_create.go`: a running-sandbox count over the
   * team's limit and a per-second create limit both answer 429).
   */
  private createRateRefusal(): Reply | null {
    const running = this.list().filter((s) => s.state === 'running').length;
    if (running >= this.options.maxConcurrent) {
      return {
        status: 429,
        json: errorBody(
          429,
          `You have reached the maximum number of concurrent E2B sandboxes (${this.options.maxConcurrent}). If you need more, please contact us.`,
        ),
      };
    }
    const now = Date.now();
    while (this.recentCreates.length > 0 && now - (this.recentCreates[0] as number) >= 1_000) {
      this.recentCreates.shift();
    }
    if (this.recentCreates.length >= this.options.createsPerSecond) {
      const waitMs = 1_000 - (now - (this.recentCreates[0] as number));
      return {
        status: 429,
        json: errorBody(429, 'Rate limit exceeded: too many sandbox creates, please slow down'),
        ...(this.options.rateLimitRetryAfter
          ? { headers: { 'retry-after': String(Math.max(1, Math.ceil(waitMs / 1000))) } }
          : {}),
      };
    }
    this.recentCreates.push(now);
    return null;
  }

  private notFound(message: string): Reply {
    return { status: 404, json: errorBody(404, message) };
  }

  protected async route(req: JsonRequest, res: ServerResponse): Promise<Reply> {
    if (req.path.startsWith('/process.Process/')) return this.envd(req, res);
    if (req.headers['x-api-key'] !== this.options.apiKey) {
      return { status: 401, json: errorBody(401, 'Invalid API key') };
    }
    if (!ROUTES.some(([method, pattern]) => method === req.method && pattern.test(req.path))) {
      return this.notFound(`no route ${req.method} ${req.path}`);
    }
    const segments = req.path.split('/').filter(Boolean);
    const versioned = /^v\d+$/.test(segments[0] ?? '') ? segments.slice(1) : segments;
    const [resource, id, action, ...rest] = versioned;
    if (resource === 'sandboxes') return this.sandboxRoute(req, id, action);
    if (resource === 'templates') return this.templateRoute(req, id, action, rest);
    return this.notFound(`no route ${req.method} ${req.path}`);
  }

  private async sandboxRoute(
    req: JsonRequest,
    id: string | undefined,
    action: string | undefined,
  ): Promise<Reply> {
    if (!id && req.method === 'POST') {
      const body = req.json<{
        templateID: string;
        metadata?: Record<string, string>;
        envVars?: Record<string, string>;
        timeout?: number;
        autoPause?: boolean;
      }>();
      // Create resolves the template through the team's templates with a ready build: unknown,
      // still building or only failed builds all read "not found" (404).
      if (!this.bootable(body.templateID)) {
        return this.notFound(`template '${body.templateID}' not found`);
      }
      const limited = this.createRateRefusal();
      if (limited) return limited;
      const timeout = body.timeout ?? 300;
      if (timeout * 1000 > this.options.maxInstanceLengthMs) {
        const hours = this.options.maxInstanceLengthMs / 3_600_000;
        return { status: 400, json: errorBody(400, `Timeout cannot be greater than ${hours} hours`) };
      }
      const dir = sandboxDir('e2b-sandbox');
      const sandbox = {
        sandboxID: `i${randomUUID().replaceAll('-', '').slice(0, 19)}`,
        templateID: body.templateID,
        state: 'running' as const,
        metadata: body.metadata ?? {},
        envVars: body.envVars ?? {},
        startedAt: new Date().toISOString(),
        endAt: '',
        autoPause: body.autoPause ?? false,
        envdAccessToken: randomUUID(),
        servicePort: await freePort(),
        dir: dir.path,
        processes: [],
        removeDir: dir.remove,
      };
      this.sandboxes.set(sandbox.sandboxID, sandbox);
      this.arm(sandbox, timeout);
      return { status: 201, json: this.connection(sandbox) };
    }
    if (!id && req.method === 'GET') {
      const filters = new URLSearchParams(req.url.searchParams.get('metadata') ?? '');
      const states = (req.url.searchParams.get('state') ?? 'running,paused').split(',');
      const items = this.list()
        .filter((s) => states.includes(s.state))
        .filter((s) => [...filters].every(([k, v]) => s.metadata[k] === v))
        .map((s) => this.info(s));
      return { status: 200, json: items };
    }
    const sandbox = id ? this.sandboxes.get(id) : undefined;
    if (!sandbox) return this.notFound(`sandbox ${id} not found`);
    if (!action && req.method === 'GET') return { status: 200, json: this.info(sandbox) };
    if (!action && req.method === 'DELETE') {
      await this.kill(sandbox.sandboxID);
      return { status: 204 };
    }
    const changing = this.pausing.has(sandbox.sandboxID);
    if (action === 'timeout' && req.method === 'POST') {
      // KEEPALIVE: pausing → 409 (changing state); paused → 404 (only running sandboxes are
      // looked up); past the maximum length → 400; otherwise the TTL is clamped to what is left.
      if (changing) return this.changingState(sandbox);
      if (sandbox.state !== 'running') return this.notFound(`Sandbox ${id} not found`);
      if (this.pastMaxLength(sandbox))
        return { status: 400, json: errorBody(400, 'Max instance length exceeded') };
      this.arm(sandbox, req.json<{ timeout: number }>().timeout);
      return { status: 204 };
    }
    if (action === 'pause' && req.method === 'POST') {
      if (changing) return this.changingState(sandbox);
      if (sandbox.state === 'paused')
        return { status: 409, json: errorBody(409, `Sandbox ${id} is already paused`) };
      this.pause(sandbox);
      return { status: 204 };
    }
    if (action === 'connect' && req.method === 'POST') {
      // OPENAPI connect: a sandbox being paused is waited for, then resumed.
      if (changing) await this.pausing.get(sandbox.sandboxID);
      if (!this.sandboxes.has(sandbox.sandboxID)) return this.notFound(`sandbox ${id} not found`);
      const timeout = req.json<{ timeout?: number }>().timeout ?? 300;
      if (sandbox.state === 'running' && this.pastMaxLength(sandbox))
        return { status: 400, json: errorBody(400, 'Max instance length exceeded') };
      const resumed = sandbox.state === 'paused';
      if (resumed) {
        // A resumed sandbox is a new instance: its maximum length counts from now.
        sandbox.state = 'running';
        sandbox.startedAt = new Date().toISOString();
        for (const proc of sandbox.processes) proc.resume();
      }
      this.arm(sandbox, timeout);
      return { status: resumed ? 201 : 200, json: this.connection(sandbox) };
    }
    return this.notFound(`no route ${req.method} ${req.path}`);
  }

  private templateRoute(
    req: JsonRequest,
    id: string | undefined,
    action: string | undefined,
    rest: string[],
  ): Reply {
    if (!id && req.method === 'POST') {
      const body = req.json<{ name: string; cpuCount?: number; memoryMB?: number; tags?: string[] }>();
      const plan = E2B_PLANS[this.options.plan];
      const cpuCount = body.cpuCount ?? 2;
      const memoryMB = body.memoryMB ?? 512;
      // Template resources: CPU 1 or an even number up to the plan's maximum, memory up to the
      // plan's maximum (OPENAPI TemplateBuildRequestV3 cpuCount/memoryMB; refused with 400).
      if (!Number.isInteger(cpuCount) || cpuCount < 1 || (cpuCount !== 1 && cpuCount % 2 !== 0))
        return {
          status: 400,
          json: errorBody(400, `CPU count must be 1 or an even number, got ${cpuCount}`),
        };
      if (cpuCount > plan.maxCpu)
        return {
          status: 400,
          json: errorBody(400, `CPU count exceeds team limits (${cpuCount} > ${plan.maxCpu})`),
        };
      if (memoryMB > plan.maxMemoryMB)
        return {
          status: 400,
          json: errorBody(400, `Memory exceeds team limits (${memoryMB} MiB > ${plan.maxMemoryMB} MiB)`),
        };
      if (this.options.foreignTemplates.includes(body.name))
        return { status: 403, json: errorBody(403, `You don't have access to template '${body.name}'`) };
      const existing = this.templates.get(body.name);
      const build: BuildRecord = {
        buildID: randomUUID(),
        cpuCount,
        memoryMB,
        status: 'waiting',
        reason: null,
        steps: null,
        createdAt: new Date().toISOString(),
      };
      // A name already registered gets a new build of the same template.
      const record: TemplateRecord = existing ?? {
        templateID: body.name,
        buildID: build.buildID,
        name: body.name,
        cpuCount,
        memoryMB,
        status: 'waiting',
        steps: null,
        builds: [],
      };
      record.builds.unshift(build);
      Object.assign(record, { buildID: build.buildID, cpuCount, memoryMB, status: 'waiting', steps: null });
      this.templates.set(record.templateID, record);
      return {
        status: 202,
        json: {
          templateID: record.templateID,
          buildID: record.buildID,
          tags: body.tags ?? ['default'],
          public: false,
        },
      };
    }
    if (id === 'aliases' && action && req.method === 'GET') {
      // The alias answers once a build is registered, whatever its status; another team's is 403.
      if (this.options.foreignTemplates.includes(action))
        return { status: 403, json: errorBody(403, `You don't have access to template '${action}'`) };
      const record = this.templates.get(action);
      if (!record) return this.notFound(`template '${action}' not found`);
      return { status: 200, json: { templateID: record.templateID, public: false } };
    }
    const record = id ? this.templates.get(id) : undefined;
    if (!record) return this.notFound(`template '${id}' not found`);
    if (!action && req.method === 'GET') {
      // OPENAPI GET /templates/{templateID}: TemplateWithBuilds, newest build first.
      return {
        status: 200,
        json: {
          templateID: record.templateID,
          public: false,
          aliases: [record.name],
          names: [record.name],
          createdAt: record.builds.at(-1)?.createdAt,
          updatedAt: record.builds[0]?.createdAt,
          lastSpawnedAt: null,
          spawnCount: 0,
          builds: record.builds.map((b) => ({
            buildID: b.buildID,
            status: b.status,
            cpuCount: b.cpuCount,
            memoryMB: b.memoryMB,
            createdAt: b.createdAt,
            updatedAt: b.createdAt,
          })),
        },
      };
    }
    if (action === 'files' && req.method === 'GET') return { status: 201, json: { present: true } };
    const build = rest[0] ? record.builds.find((b) => b.buildID === rest[0]) : undefined;
    if (action === 'builds' && build) {
      if (req.method === 'POST' && rest.length === 1) {
        const body = req.json<Omit<E2BTemplateBuild, 'templateID' | 'buildID'>>();
        const refused = this.refuseBuild(body);
        if (refused) return { status: 400, json: errorBody(400, refused) };
        build.steps = body;
        record.steps = body;
        this.builds.push({ ...body, templateID: record.templateID, buildID: build.buildID });
        build.status = 'building';
        record.status = 'building';
        this.later(this.options.templateBuildDelayMs, () => {
          const fail = this.options.failBuildsMatching?.test(JSON.stringify(body.steps));
          build.status = fail ? 'error' : 'ready';
          build.reason = fail ? 'step failed: exit status 1' : null;
          if (record.buildID === build.buildID) record.status = build.status;
        });
        return { status: 202 };
      }
      if (req.method === 'GET' && rest[1] === 'status') {
        return {
          status: 200,
          json: {
            templateID: record.templateID,
            buildID: build.buildID,
            status: build.status,
            logs: [],
            logEntries: [],
            ...(build.reason ? { reason: { message: build.reason } } : {}),
          },
        };
      }
    }
    return this.notFound(`no route ${req.method} ${req.path}`);
  }

  /**
   * What E2B's builder would refuse: no base, a step it cannot run, a COPY without the hash of
   * files uploaded for it (this emulator accepts no uploads, so any COPY is refused).
   */
  private refuseBuild(body: Omit<E2BTemplateBuild, 'templateID' | 'buildID'>): string | null {
    if (!body.fromImage && !body.fromTemplate) return 'fromImage or fromTemplate is required';
    if (!Array.isArray(body.steps)) return 'steps must be an array';
    for (const [index, step] of body.steps.entries()) {
      if (!STEP_TYPES.has(step.type)) return `step ${index}: unknown type ${JSON.stringify(step.type)}`;
      if (!Array.isArray(step.args) || step.args.some((arg) => typeof arg !== 'string'))
        return `step ${index}: args must be strings`;
      if (step.type === 'COPY') return `step ${index}: COPY needs uploaded files, and none were uploaded`;
    }
    return null;
  }

  /** envd `process.Process/Start`: a server-streaming Connect-RPC call with JSON envelopes. */
  private async envd(req: JsonRequest, res: ServerResponse): Promise<Reply> {
    // E2B's edge routes envd traffic by `E2b-Sandbox-Id` + `E2b-Sandbox-Port` (what the SDK sends
    // to `sandbox.<domain>` and to a `sandboxUrl`), or by a `49983-<id>.<domain>` host.
    const host = /^(\d+)-([^.]+)\.(.+)$/.exec(String(req.headers.host ?? ''));
    const routed = req.headers['e2b-sandbox-id']
      ? { id: String(req.headers['e2b-sandbox-id']), port: String(req.headers['e2b-sandbox-port'] ?? '') }
      : host && host[3] === this.options.domain
        ? { id: host[2] as string, port: host[1] as string }
        : { id: '', port: '' };
    if (routed.port !== String(ENVD_PORT)) {
      return {
        status: 502,
        json: errorBody(502, `no envd route (sandbox port ${routed.port || 'missing'})`),
      };
    }
    const sandboxId = routed.id;
    const sandbox = this.sandboxes.get(sandboxId);
    // E2B's edge answers 502 for a sandbox that is gone or paused.
    if (sandbox?.state !== 'running') {
      return { status: 502, json: errorBody(502, `sandbox ${sandboxId} not running`) };
    }
    if (req.headers['x-access-token'] !== sandbox.envdAccessToken) {
      return { status: 401, json: { code: 'unauthenticated', message: 'bad access token' } };
    }
    if (req.path !== '/process.Process/Start') {
      return { status: 404, json: { code: 'unimplemented', message: req.path } };
    }
    const request = readEnvelope(req.body) as {
      process: { cmd: string; args?: string[]; envs?: Record<string, string>; cwd?: string };
    };
    res.writeHead(200, { 'content-type': 'application/connect+json' });
    const send = (payload: unknown, flag = 0) => {
      if (!res.destroyed && !res.writableEnded) res.write(envelope(flag, payload));
    };
    const proc = new SandboxProcess({
      file: request.process.cmd,
      args: request.process.args ?? [],
      cwd: sandbox.dir,
      env: processEnv(sandbox, sandbox.envVars, request.process.envs),
      onStdout: (chunk) => send({ event: { data: { stdout: chunk.toString('base64') } } }),
      onStderr: (chunk) => send({ event: { data: { stderr: chunk.toString('base64') } } }),
    });
    sandbox.processes.push(proc);
    send({ event: { start: { pid: proc.pid } } });
    // A client that disconnects (a background command) leaves the process running.
    void proc.exited.then((exitCode) => {
      send({ event: { end: { exitCode, exited: true, status: `exit status ${exitCode}` } } });
      send({}, 0x02);
      if (!res.destroyed) res.end();
    });
    return { streamed: true, status: 200 };
  }
}
