// Daytona adapter over @daytonaio/sdk (unchanged). The daemon is started through a toolbox session
// with `runAsync`: Daytona's `process/execute` blocks until the command exits (and kills it at its
// timeout), while a session command is Daytona's own way to run a long-lived process, keeps its
// logs retrievable and inherits the sandbox environment given at create. A restarted Daytona
// sandbox does not re-run session commands, so `start` launches the entry again.
//
// Sandboxes are private: every request to the daemon's port goes through Daytona's preview proxy
// with `x-daytona-preview-token`, a token Daytona renews on every start; create and start return it
// as `serviceHeaders`. Snapshots unused for two weeks become `inactive`; activation is asynchronous
// (the snapshot goes `pending` and is awaited until `active`) and refused for ten minutes after the
// deactivation (waited out). A failed snapshot keeps its name forever (409 on re-create), so a
// rebuild takes a new one.
// Every call, with the spec it was checked against, is listed in docs/providers/daytona.md.
import {
  Daytona,
  DaytonaConflictError,
  type Sandbox,
  type SandboxState as DaytonaState,
  type Snapshot,
} from '@daytonaio/sdk';
import {
  DEFAULT_ENTRY_COMMAND,
  errorContext,
  idTags,
  LABEL_INSTALLATION_ID,
  LABEL_KEYS,
  SERVICE_PORT,
  taggedSandbox,
} from './common';
import {
  ProviderBuildError,
  ProviderBusyError,
  ProviderEntryFailedError,
  ProviderNotFoundError,
  ProviderSnapshotUnusableError,
  ProviderValidationError,
  type RetryOptions,
  withProviderRetry,
} from './errors';
import { capsFrom, fitSpecToProvider } from './limits';
import type {
  CreateSandboxRequest,
  HardwareSpec,
  ProviderSandbox,
  SandboxProvider,
  SandboxState,
  SnapshotBuildRequest,
  TaggedSandbox,
} from './types';

export {
  DEFAULT_ENTRY_COMMAND,
  LABEL_PROJECT_ID,
  LABEL_SANDBOX_ID,
  LABEL_SESSION_ID,
  SERVICE_PORT,
} from './common';

/**
 * Daytona's documented default maximum per sandbox: 4 vCPU / 8 GB memory / 10 GB disk; more needs
 * the provider's support, then set DAYTONA_MAX_CPU / DAYTONA_MAX_MEMORY_GIB / DAYTONA_MAX_DISK_GIB
 * (R-SBX-4). Account totals (Tier 1: 10 vCPU / 10 GiB / 30 GiB) are enforced by Daytona per
 * create and surface as ProviderQuotaError.
 */
export const DAYTONA_DEFAULT_CAPS: HardwareSpec = { cpu: 4, memoryGiB: 8, diskGiB: 10 };

/** Our view of a Daytona snapshot state (SnapshotState of the API). */
export type SnapshotCondition = 'BUILDING' | 'ACTIVE' | 'INACTIVE' | 'FAILED' | 'REMOVED';

/** Every Daytona snapshot state onto what the adapter does with it. */
export const DAYTONA_SNAPSHOT_STATE_MAP: Record<string, SnapshotCondition> = {
  pending: 'BUILDING',
  building: 'BUILDING',
  pulling: 'BUILDING',
  snapshotting: 'BUILDING',
  active: 'ACTIVE',
  inactive: 'INACTIVE',
  error: 'FAILED',
  build_failed: 'FAILED',
  removing: 'REMOVED',
};

/** Unknown states read as FAILED: the snapshot is replaced rather than trusted. */
export function mapDaytonaSnapshotState(state: string | undefined): SnapshotCondition {
  return (state && DAYTONA_SNAPSHOT_STATE_MAP[state]) || 'FAILED';
}

/** Every Daytona sandbox state onto ours (R-SBX-1). */
export const DAYTONA_STATE_MAP: Record<Exclude<DaytonaState, '11184809'>, SandboxState> = {
  pending_build: 'PENDING',
  creating: 'CREATING',
  building_snapshot: 'CREATING',
  pulling_snapshot: 'CREATING',
  starting: 'STARTING',
  restoring: 'STARTING',
  resuming: 'STARTING',
  resizing: 'STARTING',
  started: 'STARTED',
  snapshotting: 'STARTED',
  forking: 'STARTED',
  stopping: 'STOPPING',
  pausing: 'STOPPING',
  archiving: 'STOPPING',
  stopped: 'STOPPED',
  paused: 'HIBERNATED',
  archived: 'HIBERNATED',
  destroying: 'DESTROYED',
  destroyed: 'DESTROYED',
  error: 'ERROR',
  build_failed: 'ERROR',
  unknown: 'ERROR',
};

export function mapDaytonaState(state: string | undefined): SandboxState {
  return (state && DAYTONA_STATE_MAP[state as keyof typeof DAYTONA_STATE_MAP]) || 'ERROR';
}

export interface DaytonaProviderOptions {
  apiKey: string;
  /** Daytona API base, e.g. `https://app.daytona.io/api`. Always passed so the SDK never reads the environment. */
  apiUrl: string;
  /** Region/target. */
  target?: string;
  /** Long-lived entry process of every sandbox. @default '/usr/local/bin/singulacomp-entrypoint' */
  entryCommand?: string;
  /** Daemon port inside the sandbox. @default 8000 */
  servicePort?: number;
  /** Daytona's own inactivity stop, in minutes; our lease renewals touch it. @default 30 */
  autoStopIntervalMinutes?: number;
  /** Seconds the SDK waits for `started`/`stopped`. @default 120 */
  operationTimeoutSeconds?: number;
  /** Per-request deadline of the SDK's HTTP client. @default the SDK's (24 h) */
  requestTimeoutMs?: number;
  /** Name of the env var holding the key, for auth error messages. @default 'DAYTONA_API_KEY' */
  apiKeyEnvVar?: string;
  /** This account's per-sandbox maximum. @default DAYTONA_DEFAULT_CAPS (4 vCPU / 8 GiB / 10 GiB) */
  caps?: Partial<HardwareSpec>;
  /**
   * Image a sandbox without a snapshot is built from, with the request's resources. Unset: Daytona's
   * account default snapshot (1 vCPU / 1 GiB / 3 GiB, no daemon: the entry check then fails).
   */
  defaultImage?: string;
  /**
   * How long after launch the entry must not have exited (a missing binary exits at once); ends
   * early once the service port answers. @default 1_500
   */
  entryGraceMs?: number;
  /** Interval of snapshot and entry polls. @default 250 */
  pollIntervalMs?: number;
  /** Longest wait for a snapshot build to end (Daytona and the SDK have none). @default 3_600_000 */
  snapshotBuildTimeoutMs?: number;
  /**
   * Longest wait for an inactive snapshot to be active again: the ten minutes Daytona refuses
   * activation after a deactivation, then its `pending` processing. @default 1_200_000
   */
  snapshotActivationTimeoutMs?: number;
  /** Interval between activation attempts while Daytona's deactivation runs. @default 30_000 */
  activationRetryIntervalMs?: number;
  /** Snapshot names tried for one content key before giving up (the first, then -r2, -r3 …). @default 5 */
  maxSnapshotGenerations?: number;
  retry?: RetryOptions;
}

const ENTRY_SESSION = 'singulacomp-entry';
/** SNAP activateSnapshot within ten minutes of a deactivation. */
const DEACTIVATION_IN_PROGRESS = /deactivation is still in progress/i;

/** The SDK's own snapshots API client (its axios instance maps errors to DaytonaError classes). */
interface SnapshotsApi {
  createSnapshot(body: {
    name: string;
    buildInfo: { contextHashes: string[]; dockerfileContent: string };
    cpu: number;
    memory: number;
    disk: number;
    regionId?: string;
  }): Promise<{ data: Snapshot }>;
}
const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

export class DaytonaProvider implements SandboxProvider {
  readonly name = 'DAYTONA' as const;
  readonly caps: HardwareSpec;
  private readonly client: Daytona;
  private readonly sandboxes = new Map<string, Sandbox>();
  private readonly entryCommand: string;
  private readonly servicePort: number;
  private readonly timeoutSeconds: number;

  constructor(private readonly options: DaytonaProviderOptions) {
    // useDeprecatedPolling: no Socket.IO connection that would keep the process alive.
    this.client = new Daytona({
      apiKey: options.apiKey,
      apiUrl: options.apiUrl,
      ...(options.target ? { target: options.target } : {}),
      ...(options.requestTimeoutMs ? { requestTimeoutMs: options.requestTimeoutMs } : {}),
      useDeprecatedPolling: true,
    });
    this.entryCommand = options.entryCommand ?? DEFAULT_ENTRY_COMMAND;
    this.servicePort = options.servicePort ?? SERVICE_PORT;
    this.timeoutSeconds = options.operationTimeoutSeconds ?? 120;
    this.caps = capsFrom(options.caps, DAYTONA_DEFAULT_CAPS);
  }

  private get pollIntervalMs(): number {
    return this.options.pollIntervalMs ?? 250;
  }

  private retry<T>(operation: string, fn: (attempt: number) => Promise<T>): Promise<T> {
    const context = errorContext(this.name, operation, this.options.apiKeyEnvVar);
    return withProviderRetry(fn, context, this.options.retry);
  }

  /** Our sandbox id names the Daytona sandbox: a retried create collides instead of duplicating. */
  static sandboxName(sandboxId: string): string {
    return `singulacomp-${sandboxId}`;
  }

  async create(request: CreateSandboxRequest): Promise<ProviderSandbox> {
    const name = DaytonaProvider.sandboxName(request.sandboxId);
    if (request.snapshotRef) await this.ensureSnapshotActive(request.snapshotRef);
    // With a snapshot Daytona takes the snapshot's resources and ignores the request's; without
    // one, only an image build honours them (else the account default of 1 / 1 / 3 applies).
    const { spec } = fitSpecToProvider(this, request.spec);
    const source = request.snapshotRef
      ? { snapshot: request.snapshotRef }
      : this.options.defaultImage
        ? {
            image: this.options.defaultImage,
            resources: { cpu: spec.cpu, memory: spec.memoryGiB, disk: spec.diskGiB },
          }
        : {};
    const params = {
      name,
      ...source,
      envVars: request.env,
      labels: idTags(request, LABEL_KEYS),
      autoStopInterval: this.options.autoStopIntervalMinutes ?? 30,
    };
    let sandbox: Sandbox | null = null;
    try {
      sandbox = await this.retry('create', async () => {
        try {
          return await this.client.create(params, { timeout: this.timeoutSeconds });
        } catch (error) {
          // The POST may have succeeded before polling failed: remove the half-created sandbox
          // (found by its name) so the retry does not collide with it.
          await this.removeByName(name);
          // 409 "Sandbox with name … already exists": the name is our sandbox id's, so the holder
          // is an earlier attempt whose answer was lost; it was just removed, so try again.
          if (error instanceof DaytonaConflictError) {
            throw new ProviderBusyError(
              errorContext(this.name, 'create', this.options.apiKeyEnvVar),
              `${error.message}; removed the earlier attempt's sandbox`,
              { cause: error },
            );
          }
          throw error;
        }
      });
      this.sandboxes.set(sandbox.id, sandbox);
      await this.launchEntry(sandbox);
      return await this.describe(sandbox, 'STARTED');
    } catch (error) {
      if (sandbox) await this.discard(sandbox);
      else await this.removeByName(name);
      throw error;
    }
  }

  private async removeByName(name: string): Promise<void> {
    try {
      const existing = await this.client.get(name);
      await existing.delete(this.timeoutSeconds);
    } catch {
      // Not there, or the provider is still failing: nothing more to do here.
    }
  }

  private async discard(sandbox: Sandbox): Promise<void> {
    this.sandboxes.delete(sandbox.id);
    await this.retry('destroy', () => sandbox.delete(this.timeoutSeconds)).catch(() => undefined);
  }

  /**
   * Launches the entry in its toolbox session. A retry after a lost reply finds the session taken
   * (409): the entry it already runs is reused rather than started twice. Daytona answers an async
   * exec at once even when the command cannot run, so the entry is then watched until the service
   * answers or the grace period passes; an exit in that window fails the create.
   */
  private async launchEntry(sandbox: Sandbox): Promise<void> {
    const commandId = await this.retry('launchEntry', async () => {
      try {
        await sandbox.process.createSession(ENTRY_SESSION);
      } catch (error) {
        if (!(error instanceof DaytonaConflictError)) throw error;
        const session = await sandbox.process.getSession(ENTRY_SESSION);
        const running = session.commands?.find(
          (c) => c.command === this.entryCommand && (c.exitCode === undefined || c.exitCode === null),
        );
        if (running) return running.id;
      }
      const launched = await sandbox.process.executeSessionCommand(ENTRY_SESSION, {
        command: this.entryCommand,
        runAsync: true,
      });
      return launched.cmdId;
    });
    await this.watchEntry(sandbox, commandId);
  }

  private async watchEntry(sandbox: Sandbox, commandId: string | undefined): Promise<void> {
    if (!commandId) return;
    const preview = await this.preview(sandbox);
    const deadline = Date.now() + (this.options.entryGraceMs ?? 1_500);
    for (let probe = 1; ; probe++) {
      const command = await this.retry('launchEntry', () =>
        sandbox.process.getSessionCommand(ENTRY_SESSION, commandId),
      );
      if (typeof command.exitCode === 'number') {
        const logs = await sandbox.process
          .getSessionCommandLogs(ENTRY_SESSION, commandId)
          .then((l) => (l.output ?? '').trim().slice(-500))
          .catch(() => '');
        throw new ProviderEntryFailedError(
          `DAYTONA sandbox entry ${JSON.stringify(this.entryCommand)} exited with ${command.exitCode} right after launch` +
            `${logs ? `: ${logs}` : ''}. The sandbox's image must contain it: boot from a snapshot built by ` +
            'the platform (or set DAYTONA_DEFAULT_IMAGE to an image with the runtime).',
          errorContext(this.name, 'launchEntry', this.options.apiKeyEnvVar),
        );
      }
      // The service answering ends the watch early, but only after a second look at the command:
      // an edge that answers for an empty port must not hide an entry that already died.
      if (probe >= 2 && (await serviceAnswers(preview.url, preview.headers))) return;
      if (Date.now() >= deadline) return;
      await sleep(Math.min(this.pollIntervalMs, 100));
    }
  }

  private async preview(sandbox: Sandbox): Promise<{ url: string; headers: Record<string, string> }> {
    const link = await this.retry('serviceUrl', () => sandbox.getPreviewLink(this.servicePort));
    return { url: link.url, headers: { 'x-daytona-preview-token': link.token } };
  }

  /** The daemon's URL and the preview token it needs now (renewed by Daytona on every start). */
  private async describe(sandbox: Sandbox, state: SandboxState): Promise<ProviderSandbox> {
    const preview = await this.preview(sandbox);
    return {
      providerSandboxId: sandbox.id,
      state,
      serviceUrl: preview.url,
      serviceHeaders: preview.headers,
    };
  }

  private async sandbox(providerSandboxId: string, operation: string): Promise<Sandbox> {
    const cached = this.sandboxes.get(providerSandboxId);
    if (cached) return cached;
    const sandbox = await this.retry(operation, () => this.client.get(providerSandboxId));
    this.sandboxes.set(providerSandboxId, sandbox);
    return sandbox;
  }

  async start(providerSandboxId: string): Promise<ProviderSandbox> {
    const sandbox = await this.sandbox(providerSandboxId, 'start');
    await this.retry('start', () => sandbox.start(this.timeoutSeconds));
    await this.launchEntry(sandbox);
    return this.describe(sandbox, 'STARTED');
  }

  /**
   * Stops a started sandbox; one already stopped (Daytona: 400 "Sandbox is not started") is left
   * as is, and one mid-transition (400 "State change in progress") is retried by the table.
   */
  async stop(providerSandboxId: string): Promise<ProviderSandbox> {
    const sandbox = await this.sandbox(providerSandboxId, 'stop');
    const stopped = async () => {
      await this.retry('stop', () => sandbox.refreshData());
      return sandbox.state === 'stopped';
    };
    if (!(await stopped())) {
      try {
        await this.retry('stop', () => sandbox.stop(this.timeoutSeconds));
      } catch (error) {
        if (!(error instanceof ProviderValidationError) || !(await stopped())) throw error;
      }
    }
    return { providerSandboxId, state: mapDaytonaState(sandbox.state), serviceUrl: null };
  }

  /** Deletes the sandbox; a 400 "state change in progress" (stopping, starting) is retried with backoff. */
  async destroy(providerSandboxId: string): Promise<void> {
    try {
      const sandbox = await this.sandbox(providerSandboxId, 'destroy');
      await this.retry('destroy', () => sandbox.delete(this.timeoutSeconds));
    } catch (error) {
      if (!(error instanceof ProviderNotFoundError)) throw error;
    } finally {
      this.sandboxes.delete(providerSandboxId);
    }
  }

  async keepAlive(providerSandboxId: string): Promise<void> {
    const sandbox = await this.sandbox(providerSandboxId, 'keepAlive');
    await this.retry('keepAlive', () => sandbox.refreshActivity());
  }

  async status(providerSandboxId: string): Promise<SandboxState> {
    try {
      const sandbox = await this.retry('status', () => this.client.get(providerSandboxId));
      this.sandboxes.set(providerSandboxId, sandbox);
      return mapDaytonaState(sandbox.state);
    } catch (error) {
      if (error instanceof ProviderNotFoundError) {
        this.sandboxes.delete(providerSandboxId);
        return 'DESTROYED';
      }
      throw error;
    }
  }

  /** `GET /sandbox?labels={…}` page by page (the SDK follows `nextCursor`). */
  async listTagged(installationId: string): Promise<TaggedSandbox[]> {
    return this.retry('list', async () => {
      const found: TaggedSandbox[] = [];
      for await (const sandbox of this.client.list({ labels: { [LABEL_INSTALLATION_ID]: installationId } })) {
        const tagged = taggedSandbox(
          sandbox.id,
          mapDaytonaState(sandbox.state),
          sandbox.labels,
          LABEL_KEYS,
          installationId,
        );
        if (tagged) found.push(tagged);
      }
      return found;
    });
  }

  async previewHost(providerSandboxId: string, port: number): Promise<string> {
    const sandbox = await this.sandbox(providerSandboxId, 'previewHost');
    const preview = await this.retry('previewHost', () => sandbox.getPreviewLink(port));
    return new URL(preview.url).host;
  }

  private async findSnapshot(name: string): Promise<Snapshot | null> {
    try {
      return await this.retry('buildSnapshot', () => this.client.snapshot.get(name));
    } catch (error) {
      if (error instanceof ProviderNotFoundError) return null;
      throw error;
    }
  }

  private get buildTimeoutMs(): number {
    return this.options.snapshotBuildTimeoutMs ?? 3_600_000;
  }

  /**
   * Polls a building (or activating) snapshot until it leaves the BUILDING states or `timeoutMs`
   * passes (ProviderBuildError: the snapshot may still finish; the next build looks again). A poll
   * that fails transiently is retried as a read: nothing is posted again.
   */
  private async settle(snapshot: Snapshot, operation: string, timeoutMs: number): Promise<Snapshot> {
    let current = snapshot;
    const deadline = Date.now() + timeoutMs;
    while (mapDaytonaSnapshotState(current.state) === 'BUILDING') {
      if (Date.now() > deadline) {
        throw new ProviderBuildError(
          `DAYTONA snapshot ${current.name} is still ${current.state} after ${Math.round(timeoutMs / 1000)} s`,
          errorContext(this.name, operation, this.options.apiKeyEnvVar),
        );
      }
      await sleep(this.pollIntervalMs);
      current = await this.retry(operation, () => this.client.snapshot.get(current.name));
    }
    return current;
  }

  /**
   * Makes a snapshot bootable before a create: an inactive one (unused for two weeks) is activated,
   * a building one awaited; a failed, removed or unknown one cannot be used in place.
   */
  private async ensureSnapshotActive(ref: string): Promise<void> {
    const context = errorContext(this.name, 'create', this.options.apiKeyEnvVar);
    let snapshot: Snapshot;
    try {
      snapshot = await this.retry('create', () => this.client.snapshot.get(ref));
    } catch (error) {
      if (error instanceof ProviderNotFoundError)
        throw new ProviderSnapshotUnusableError(context, ref, 'missing', 'Daytona no longer knows it', {
          cause: error,
        });
      throw error;
    }
    snapshot = await this.settle(snapshot, 'create', this.buildTimeoutMs);
    let condition = mapDaytonaSnapshotState(snapshot.state);
    if (condition === 'INACTIVE') {
      snapshot = await this.activate(snapshot, 'create');
      condition = mapDaytonaSnapshotState(snapshot.state);
    }
    if (condition === 'ACTIVE') return;
    throw new ProviderSnapshotUnusableError(
      context,
      ref,
      snapshot.state,
      snapshot.errorReason ?? 'it cannot boot sandboxes',
    );
  }

  /**
   * Activates an inactive snapshot and waits until it is usable. Daytona answers at once with the
   * snapshot `pending` and processes it again; within ten minutes of its deactivation it refuses
   * (400 "deactivation is still in progress"), which is waited out. Returns the settled snapshot.
   */
  private async activate(snapshot: Snapshot, operation: string): Promise<Snapshot> {
    const timeoutMs = this.options.snapshotActivationTimeoutMs ?? 1_200_000;
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      try {
        await this.retry(operation, () => this.client.snapshot.activate(snapshot.id));
        break;
      } catch (error) {
        // Activated meanwhile by another process: "already active" is the state we wanted.
        if (error instanceof ProviderValidationError && /already active/i.test(error.message)) break;
        const cooling =
          error instanceof ProviderValidationError && DEACTIVATION_IN_PROGRESS.test(error.message);
        if (!cooling || Date.now() > deadline) throw error;
        await sleep(this.options.activationRetryIntervalMs ?? 30_000);
      }
    }
    const current = await this.retry(operation, () => this.client.snapshot.get(snapshot.name));
    return this.settle(current, operation, Math.max(deadline - Date.now(), this.pollIntervalMs));
  }

  /**
   * Builds a Daytona snapshot named after the content key, reusing it when it exists: an active one
   * as is, an inactive one after activation, a building one once it settles. A failed (or removing)
   * snapshot keeps its name — Daytona answers 409 to re-creating it — so the build moves to the next
   * generation's name (`-r2`, `-r3`, …). The Dockerfile must be self-contained: COPY from a local
   * build context would make the SDK upload the context to Daytona's object storage, which this
   * adapter does not provide.
   */
  async buildSnapshot(request: SnapshotBuildRequest): Promise<string> {
    const base = `singulacomp-${request.key}`;
    const generations = this.options.maxSnapshotGenerations ?? 5;
    const { spec } = fitSpecToProvider(this, request.spec);
    for (let generation = 1; generation <= generations; generation++) {
      const name = generation === 1 ? base : `${base}-r${generation}`;
      const existing = await this.findSnapshot(name);
      if (!existing) return this.createSnapshot(name, request.dockerfile, spec);
      let settled = await this.settle(existing, 'buildSnapshot', this.buildTimeoutMs);
      if (mapDaytonaSnapshotState(settled.state) === 'INACTIVE') {
        settled = await this.activate(settled, 'buildSnapshot');
      }
      if (mapDaytonaSnapshotState(settled.state) === 'ACTIVE') return name;
    }
    throw new ProviderBuildError(
      `DAYTONA snapshot ${base}: the last ${generations} builds failed; fix the Dockerfile, then remove the failed snapshots in Daytona`,
      errorContext(this.name, 'buildSnapshot', this.options.apiKeyEnvVar),
    );
  }

  /**
   * Posts the build once and polls it ourselves, with a deadline: the SDK's `snapshot.create` polls
   * without one, and retrying it after a failed poll would post the name again (409 for a build
   * Daytona is still running). A retried post first looks the name up, so a post whose answer was
   * lost is awaited rather than repeated.
   */
  private async createSnapshot(name: string, dockerfile: string, spec: HardwareSpec): Promise<string> {
    const context = errorContext(this.name, 'buildSnapshot', this.options.apiKeyEnvVar);
    const api = (this.client.snapshot as unknown as { snapshotsApi: SnapshotsApi }).snapshotsApi;
    const posted = await this.retry('buildSnapshot', async (attempt) => {
      if (attempt > 1) {
        const existing = await this.findSnapshot(name);
        if (existing) return existing;
      }
      const response = await api.createSnapshot({
        name,
        buildInfo: { contextHashes: [], dockerfileContent: dockerfile },
        cpu: spec.cpu,
        memory: spec.memoryGiB,
        disk: spec.diskGiB,
        ...(this.options.target ? { regionId: this.options.target } : {}),
      });
      return response.data;
    });
    const settled = await this.settle(posted, 'buildSnapshot', this.buildTimeoutMs);
    if (mapDaytonaSnapshotState(settled.state) === 'ACTIVE') return name;
    throw new ProviderBuildError(
      `DAYTONA snapshot ${name} failed to build (${settled.state}): ${settled.errorReason ?? 'no reason given'}`,
      context,
    );
  }

  async close(): Promise<void> {
    this.sandboxes.clear();
    await this.client[Symbol.asyncDispose]();
  }
}

/**
 * True when something behind the preview proxy answered: not the proxy's 502 (nothing listens), nor
 * its 307 to the sign-in page (token refused; older proxies said 401).
 */
export async function serviceAnswers(url: string, headers: Record<string, string>): Promise<boolean> {
  try {
    const response = await fetch(`${url.replace(/\/+$/, '')}/singulacomp/health`, {
      headers,
      signal: AbortSignal.timeout(1_000),
      // A bad or stale token is redirected to Daytona's sign-in page, which answers 200.
      redirect: 'manual',
    });
    await response.body?.cancel();
    return (
      response.status < 300 || (response.status >= 400 && response.status !== 401 && response.status !== 502)
    );
  } catch {
    return false;
  }
}
