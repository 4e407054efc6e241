// E2B adapter over the `e2b` SDK (unchanged). The daemon is the long-lived entry process started
// through envd in the background with no command timeout; our side of the stream is dropped right
// away (the process keeps running). stop = pause (memory snapshot, processes resume where they
// were, so `start` = connect does not relaunch the entry); the sandbox's own deadline pauses rather
// than kills it, and keepAlive pushes that deadline out — but never past the plan's maximum sandbox
// length (start + 1 h on Hobby, 24 h on Pro), which `expiresAt` reports so the session can end
// cleanly first. Creates are spaced to the plan's rate (Hobby: one a second), since the SDK retries
// a 429 only when it carries Retry-After. Every call, with the spec it was checked against, is in
// docs/providers/e2b.md.
import {
  ApiClient,
  ConnectionConfig,
  RateLimitError,
  Sandbox,
  type SandboxState as E2BState,
  Template,
} from 'e2b';
import type { RuntimeSource } from '../../image/dockerfile';
import { parseDockerfile, splitFlags } from '../../image/dockerfile-parser';
import {
  DEFAULT_ENTRY_COMMAND,
  errorContext,
  idTags,
  METADATA_INSTALLATION_ID,
  METADATA_KEYS,
  METADATA_SANDBOX_ID,
  SERVICE_PORT,
  taggedSandbox,
} from './common';
import {
  ProviderAccessError,
  ProviderHttpError,
  ProviderLifetimeExceededError,
  ProviderNotFoundError,
  ProviderNotRunningError,
  ProviderSnapshotUnusableError,
  type RetryOptions,
  withProviderRetry,
} from './errors';
import { capsFrom, fitSpecToProvider } from './limits';
import type {
  CreateSandboxRequest,
  FittedSpec,
  HardwareSpec,
  ProviderSandbox,
  SandboxProvider,
  SandboxState,
  SnapshotBuildRequest,
  TaggedSandbox,
} from './types';

export {
  DEFAULT_ENTRY_COMMAND,
  METADATA_PROJECT_ID,
  METADATA_SANDBOX_ID,
  METADATA_SESSION_ID,
  SERVICE_PORT,
} from './common';

export type E2BPlan = 'hobby' | 'pro';

/**
 * E2B's published plan limits: custom templates up to 8 vCPU and 8 GiB RAM on both; sandbox disk
 * 10 GiB on Hobby, 20 GiB on Pro (disk is a plan property, not a template parameter, R-SBX-4);
 * maximum sandbox length 1 h / 24 h; sandbox creates per second 1 on Hobby.
 */
export const E2B_PLAN_LIMITS: Record<
  E2BPlan,
  { caps: HardwareSpec; maxLifetimeMs: number; minCreateIntervalMs: number }
> = {
  // A tenth over the plan's rate: requests sent exactly a second apart can arrive closer.
  hobby: {
    caps: { cpu: 8, memoryGiB: 8, diskGiB: 10 },
    maxLifetimeMs: 3_600_000,
    minCreateIntervalMs: 1_100,
  },
  pro: { caps: { cpu: 8, memoryGiB: 8, diskGiB: 20 }, maxLifetimeMs: 86_400_000, minCreateIntervalMs: 220 },
};

/** The Hobby plan's caps (the default plan). */
export const E2B_CAPS: HardwareSpec = E2B_PLAN_LIMITS.hobby.caps;

/** E2B's maximum sandbox length on the Hobby plan (Pro: 24 h). @see E2BProviderOptions.maxSandboxLifetimeMs */
export const E2B_HOBBY_MAX_LIFETIME_MS = E2B_PLAN_LIMITS.hobby.maxLifetimeMs;

/**
 * E2B runs templates with 1 or an even number of vCPUs: an odd count rounds up to the next even
 * one within `maxCpu`, else down.
 */
export function fitE2BCpu(cpu: number, maxCpu: number): number {
  if (cpu <= 1 || cpu % 2 === 0) return cpu;
  return cpu + 1 <= maxCpu ? cpu + 1 : cpu - 1;
}

/** Every E2B sandbox state onto ours (R-SBX-1); a killed sandbox is a 404 (→ DESTROYED). */
export const E2B_STATE_MAP: Record<E2BState, SandboxState> = {
  running: 'STARTED',
  paused: 'HIBERNATED',
};

export function mapE2BState(state: string | undefined): SandboxState {
  return (state && E2B_STATE_MAP[state as E2BState]) || 'ERROR';
}

export interface E2BProviderOptions {
  apiKey: string;
  /** E2B API base. @default the SDK's (https://api.e2b.app) */
  apiUrl?: string;
  /** Sandbox domain. @default the SDK's (e2b.app) */
  domain?: string;
  /** Single envd endpoint (self-hosted edge or emulator); requests carry `E2b-Sandbox-Id`. */
  sandboxUrl?: string;
  /** Template used when a request has no snapshotRef. @default 'base' */
  defaultTemplate?: string;
  /** Long-lived entry process. @default '/usr/local/bin/singulacomp-entrypoint' */
  entryCommand?: string;
  /** Daemon port inside the sandbox. @default 8000 */
  servicePort?: number;
  /** Sandbox deadline set at create and by each keepAlive; at expiry E2B pauses it. @default 1_800_000 */
  idleTimeoutMs?: number;
  /** Maps the `${port}-${id}.${domain}` host to a base URL. @default host => `https://${host}` */
  hostToUrl?: (host: string) => string;
  /** Name of the env var holding the key, for auth error messages. @default 'E2B_API_KEY' */
  apiKeyEnvVar?: string;
  /** Per-request timeout. @default 60_000 */
  requestTimeoutMs?: number;
  /** The team's plan: its disk, sandbox length and create rate. @default 'hobby' */
  plan?: E2BPlan;
  /** This team's template maximum (CPU ≤ 8, memory ≤ 8 GiB on E2B's plans). @default the plan's caps */
  caps?: Partial<HardwareSpec>;
  /**
   * The plan's maximum sandbox length from start (or resume); keep-alives cannot pass it.
   * @default the plan's (Hobby 3_600_000, Pro 86_400_000)
   */
  maxSandboxLifetimeMs?: number;
  /** Least time between two sandbox creates of this adapter. @default the plan's (Hobby 1_100) */
  minCreateIntervalMs?: number;
  /** Interval of template build polls. @default 500 */
  pollIntervalMs?: number;
  retry?: RetryOptions;
}

export class E2BProvider implements SandboxProvider {
  readonly name = 'E2B' as const;
  readonly caps: HardwareSpec;
  readonly maxSandboxLifetimeMs: number;
  /** The template builder cannot pull the runtime image: the layer installs it with RUN steps. */
  readonly runtimeSource: RuntimeSource = 'package';
  private readonly entryCommand: string;
  private readonly servicePort: number;
  private readonly idleTimeoutMs: number;
  private readonly hostToUrl: (host: string) => string;
  private readonly minCreateIntervalMs: number;
  /** When the next create may be sent (creates are spaced to the plan's rate). */
  private nextCreateAt = 0;

  constructor(private readonly options: E2BProviderOptions) {
    const plan = E2B_PLAN_LIMITS[options.plan ?? 'hobby'];
    this.entryCommand = options.entryCommand ?? DEFAULT_ENTRY_COMMAND;
    this.servicePort = options.servicePort ?? SERVICE_PORT;
    this.idleTimeoutMs = options.idleTimeoutMs ?? 1_800_000;
    this.hostToUrl = options.hostToUrl ?? ((host) => `https://${host}`);
    this.caps = capsFrom(options.caps, plan.caps);
    this.maxSandboxLifetimeMs = options.maxSandboxLifetimeMs ?? plan.maxLifetimeMs;
    this.minCreateIntervalMs = options.minCreateIntervalMs ?? plan.minCreateIntervalMs;
  }

  /** Waits for this create's turn: at most one create per `minCreateIntervalMs`. */
  private async createTurn(): Promise<void> {
    const now = Date.now();
    const at = Math.max(now, this.nextCreateAt);
    this.nextCreateAt = at + this.minCreateIntervalMs;
    if (at > now) await new Promise((resolve) => setTimeout(resolve, at - now));
  }

  /** The idle deadline to ask for: E2B refuses a create timeout above the maximum length (400). */
  private get timeoutMs(): number {
    return Math.min(this.idleTimeoutMs, this.maxSandboxLifetimeMs);
  }

  /** CPU 1 or even (E2B refuses other counts with a 400 at template build). */
  fitSpec(spec: HardwareSpec): FittedSpec {
    const cpu = fitE2BCpu(spec.cpu, this.caps.cpu);
    if (cpu === spec.cpu) return { spec: { ...spec }, warnings: [] };
    return {
      spec: { ...spec, cpu },
      warnings: [`cpu: E2B runs 1 or an even number of vCPUs; ${spec.cpu} vCPU rounded to ${cpu}`],
    };
  }

  /** Connection options passed on every SDK call; nothing is read from the environment. */
  private get connection() {
    const { apiKey, apiUrl, domain, sandboxUrl, requestTimeoutMs } = this.options;
    return {
      apiKey,
      ...(apiUrl ? { apiUrl } : {}),
      ...(domain ? { domain } : {}),
      ...(sandboxUrl ? { sandboxUrl } : {}),
      ...(requestTimeoutMs ? { requestTimeoutMs } : {}),
    };
  }

  private retry<T>(operation: string, fn: () => Promise<T>): Promise<T> {
    const context = errorContext(this.name, operation, this.options.apiKeyEnvVar);
    return withProviderRetry(fn, context, this.options.retry);
  }

  async create(request: CreateSandboxRequest): Promise<ProviderSandbox> {
    const metadata = idTags(request, METADATA_KEYS);
    const template = request.snapshotRef ?? this.options.defaultTemplate ?? 'base';
    let sandbox: Sandbox | null = null;
    const startedAt = Date.now();
    try {
      sandbox = await this.retry('create', async () => {
        await this.createTurn();
        try {
          return await Sandbox.create(template, {
            ...this.connection,
            envs: request.env,
            metadata,
            timeoutMs: this.timeoutMs,
            lifecycle: { onTimeout: 'pause' },
          });
        } catch (error) {
          // Refused for the rate (requests sent a turn apart can arrive closer): the next attempt
          // waits a whole turn. Nothing was created, so there is nothing to remove.
          if (error instanceof RateLimitError) {
            this.nextCreateAt = Math.max(this.nextCreateAt, Date.now() + this.minCreateIntervalMs);
            throw error;
          }
          // A create that failed after the API accepted it leaves a sandbox tagged with our id.
          await this.removeTagged(request.sandboxId);
          throw error;
        }
      }).catch((error: unknown) => {
        // sandbox_create.go: a template unknown to the team, or with no ready build, is a 404.
        // The stored snapshot cannot boot: provisioning marks it failed so it is rebuilt.
        if (request.snapshotRef && error instanceof ProviderNotFoundError) {
          throw new ProviderSnapshotUnusableError(
            errorContext(this.name, 'create', this.options.apiKeyEnvVar),
            request.snapshotRef,
            'unusable',
            `E2B has no ready build of this template (${error.message})`,
            { cause: error },
          );
        }
        throw error;
      });
      const created = sandbox;
      await this.retry('launchEntry', async () => {
        const handle = await created.commands.run(this.entryCommand, {
          background: true,
          timeoutMs: 0,
          envs: request.env,
        });
        await handle.disconnect();
      });
      return this.describe(created.sandboxId, created.getHost(this.servicePort), startedAt);
    } catch (error) {
      if (sandbox) await this.destroy(sandbox.sandboxId).catch(() => undefined);
      else await this.removeTagged(request.sandboxId);
      throw error;
    }
  }

  private async removeTagged(sandboxId: string): Promise<void> {
    try {
      const paginator = Sandbox.list({
        ...this.connection,
        query: { metadata: { [METADATA_SANDBOX_ID]: sandboxId } },
      });
      while (paginator.hasNext) {
        for (const info of await paginator.nextItems()) await Sandbox.kill(info.sandboxId, this.connection);
      }
    } catch {
      // The provider is still failing; the orphan keeps our id in its metadata for a later sweep.
    }
  }

  private describe(providerSandboxId: string, host: string, startedAtMs: number): ProviderSandbox {
    return {
      providerSandboxId,
      state: 'STARTED',
      serviceUrl: this.hostToUrl(host),
      expiresAt: new Date(startedAtMs + this.maxSandboxLifetimeMs),
    };
  }

  /**
   * Resumes (or reconnects to) the sandbox; a resumed sandbox's maximum length counts anew. One
   * still running past its maximum length (E2B pauses it shortly) answers 400: it is paused here and
   * resumed, which starts a new length.
   */
  async start(providerSandboxId: string): Promise<ProviderSandbox> {
    const connect = () =>
      this.retry('start', () =>
        Sandbox.connect(providerSandboxId, { ...this.connection, timeoutMs: this.timeoutMs }),
      );
    const sandbox = await connect().catch(async (error: unknown) => {
      if (!(error instanceof ProviderLifetimeExceededError)) throw error;
      await this.retry('start', () => Sandbox.pause(providerSandboxId, this.connection));
      return connect();
    });
    const info = await this.retry('start', () => Sandbox.getInfo(providerSandboxId, this.connection));
    return this.describe(providerSandboxId, sandbox.getHost(this.servicePort), info.startedAt.getTime());
  }

  async stop(providerSandboxId: string): Promise<ProviderSandbox> {
    await this.retry('stop', () => Sandbox.pause(providerSandboxId, this.connection));
    return { providerSandboxId, state: 'HIBERNATED', serviceUrl: null };
  }

  async destroy(providerSandboxId: string): Promise<void> {
    // kill() answers false for an unknown sandbox: already destroyed.
    await this.retry('destroy', () => Sandbox.kill(providerSandboxId, this.connection));
  }

  /**
   * Pushes the idle deadline out (E2B clamps it to the maximum length itself). Past the maximum
   * length E2B answers 400 → ProviderLifetimeExceededError; a paused sandbox answers 404, which is
   * told apart from a gone one → ProviderNotRunningError.
   */
  async keepAlive(providerSandboxId: string): Promise<void> {
    try {
      await this.retry('keepAlive', () =>
        Sandbox.setTimeout(providerSandboxId, this.timeoutMs, this.connection),
      );
    } catch (error) {
      if (!(error instanceof ProviderNotFoundError)) throw error;
      const state = await this.status(providerSandboxId);
      if (state === 'DESTROYED') throw error;
      throw new ProviderNotRunningError(
        `E2B sandbox ${providerSandboxId} is ${state === 'HIBERNATED' ? 'paused' : state}: resume it before keeping it alive`,
        errorContext(this.name, 'keepAlive', this.options.apiKeyEnvVar),
        { cause: error },
      );
    }
  }

  /** When the sandbox will be paused whatever keep-alives do (its start + the maximum length). */
  async expiresAt(providerSandboxId: string): Promise<Date> {
    const info = await this.retry('expiresAt', () => Sandbox.getInfo(providerSandboxId, this.connection));
    return new Date(info.startedAt.getTime() + this.maxSandboxLifetimeMs);
  }

  async status(providerSandboxId: string): Promise<SandboxState> {
    try {
      const info = await this.retry('status', () => Sandbox.getInfo(providerSandboxId, this.connection));
      return mapE2BState(info.state);
    } catch (error) {
      if (error instanceof ProviderNotFoundError) return 'DESTROYED';
      throw error;
    }
  }

  /** `GET /v2/sandboxes?metadata=…&state=running,paused`, page by page (`x-next-token`). */
  async listTagged(installationId: string): Promise<TaggedSandbox[]> {
    return this.retry('list', async () => {
      const paginator = Sandbox.list({
        ...this.connection,
        query: { metadata: { [METADATA_INSTALLATION_ID]: installationId }, state: ['running', 'paused'] },
      });
      const found: TaggedSandbox[] = [];
      while (paginator.hasNext) {
        for (const info of await paginator.nextItems()) {
          const tagged = taggedSandbox(
            info.sandboxId,
            mapE2BState(info.state),
            info.metadata,
            METADATA_KEYS,
            installationId,
          );
          if (tagged) found.push(tagged);
        }
      }
      return found;
    });
  }

  async previewHost(providerSandboxId: string, port: number): Promise<string> {
    const info = await this.retry('previewHost', () => Sandbox.getInfo(providerSandboxId, this.connection));
    const domain = info.sandboxDomain ?? this.options.domain ?? 'e2b.app';
    return `${port}-${providerSandboxId}.${domain}`;
  }

  /**
   * E2B's template builder converts a Dockerfile into its own steps (the SDK's `fromDockerfile`):
   * one stage only; COPY/ADD upload files from the calling process's directory — the server's, not
   * the repository's — and `--from` has no meaning; heredocs are not read. The runtime layer is
   * composed with `runtimeSource: 'package'` (RUN steps only), so what is left to refuse comes from
   * the user's Dockerfile; such sandboxes boot from `defaultTemplate` (which must carry the runtime).
   * Line numbers are the user's: the layer is appended after their file.
   */
  snapshotUnsupportedReason(dockerfile: string): string | null {
    const { instructions } = parseDockerfile(dockerfile);
    const froms = instructions.filter((instruction) => instruction.keyword === 'FROM');
    if (froms.length > 1) {
      return `E2B's template builder accepts single-stage Dockerfiles only, and this one has ${froms.length} stages (FROM on lines ${froms.map((f) => f.startLine).join(', ')}); make it single-stage (one FROM, no COPY --from) to get a per-project template`;
    }
    for (const instruction of instructions) {
      const { keyword, startLine } = instruction;
      if (keyword !== 'COPY' && keyword !== 'ADD' && instruction.heredocs.length === 0) continue;
      if (instruction.heredocs.length > 0) {
        return `E2B's template builder does not read heredocs (${keyword} on line ${startLine}); write the file with RUN echo/printf instead`;
      }
      if (splitFlags(instruction.args).flags.some((flag) => flag.name === 'from')) {
        return `E2B's template builder cannot ${keyword} --from another image or stage (line ${startLine}); install that content with a RUN step instead`;
      }
      return `E2B's template builder uploads ${keyword} sources from the server, not from the repository (line ${startLine}); fetch those files in a RUN step (curl, git clone) or bake them into the FROM image`;
    }
    return null;
  }

  /**
   * Whether a template name has a ready build. The alias lookup alone (the SDK's `Template.exists`)
   * answers as soon as any build is registered — running or failed — and reads a 403 as "exists";
   * only a ready build boots sandboxes, so the template's builds are read as well.
   */
  private async templateReady(name: string): Promise<'ready' | 'building' | 'absent'> {
    const client = new ApiClient(new ConnectionConfig(this.connection));
    const context = errorContext(this.name, 'buildSnapshot', this.options.apiKeyEnvVar);
    const alias = await client.api.GET('/templates/aliases/{alias}', { params: { path: { alias: name } } });
    if (alias.response.status === 404) return 'absent';
    if (alias.response.status === 403) {
      throw new ProviderAccessError(context, `template ${name} belongs to another team (403)`);
    }
    if (!alias.data)
      throw new ProviderHttpError(alias.response.status, `template alias ${name}: ${errorText(alias.error)}`);
    const templateID = alias.data.templateID;
    const template = await client.api.GET('/templates/{templateID}', { params: { path: { templateID } } });
    if (!template.data)
      throw new ProviderHttpError(
        template.response.status,
        `template ${templateID}: ${errorText(template.error)}`,
      );
    const builds = template.data.builds;
    if (builds.some((b) => b.status === 'ready')) return 'ready';
    return builds.some((b) => b.status === 'building' || b.status === 'waiting') ? 'building' : 'absent';
  }

  /**
   * Builds an E2B template named after the content key through the SDK's template build API,
   * reused when the name has a ready build; a name whose builds all failed gets a new build, and
   * one still building is waited for. CPU and memory belong to the template (CPU 1 or even, see
   * fitSpec); disk is E2B's plan size. The Dockerfile must be self-contained
   * (snapshotUnsupportedReason refuses COPY/ADD). The layer's trailing `CMD []` leaves the template
   * without a start command: create() launches the entry.
   */
  async buildSnapshot(request: SnapshotBuildRequest): Promise<string> {
    const name = `singulacomp-${request.key}`;
    const { spec } = fitSpecToProvider(this, request.spec);
    const deadline = Date.now() + 30 * 60_000;
    for (;;) {
      const state = await this.retry('buildSnapshot', () => this.templateReady(name));
      if (state === 'ready') return name;
      if (state === 'absent') break;
      if (Date.now() > deadline) break;
      await new Promise((resolve) => setTimeout(resolve, this.options.pollIntervalMs ?? 500));
    }
    await this.retry('buildSnapshot', () =>
      Template.build(Template().fromDockerfile(request.dockerfile), name, {
        ...this.connection,
        cpuCount: spec.cpu,
        memoryMB: spec.memoryGiB * 1024,
      }),
    );
    return name;
  }
}

function errorText(error: unknown): string {
  if (error && typeof error === 'object' && 'message' in error) return String(error.message);
  return String(error ?? 'no answer');
}
