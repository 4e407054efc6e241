// createAgent(options): the daemon as one options object with defaults, wiring every capability.
import { join } from 'node:path';
import { type Clock, systemClock } from '../contract/clock';
import { ApiClient, type RuntimeState } from './api-client';
import type { BackoffOptions } from '../contract/retry';
import { EventForwarder } from './event-forward';
import { EventFollower, type OpencodeEvent, TurnTracker } from './events';
import { ControlPlaneWatch } from './control-plane';
import { LeaseKeeper } from './lease';
import { createLogger, type Logger } from './logger';
import { MemoryGuard, type SandboxMemoryGuardError } from './memory-guard';
import { Offloader } from './offload';
import { fetchGatewayModels, gatewayOpencodeConfig } from './llm-config';
import { resolveOpencodeBin } from './opencode';
import { type ControlHandlers, ProxyServer } from './proxy';
import { compileAgentConfig, Reloader } from './reload';
import { Supervisor } from './supervisor';
import { createSystemReaders, type SystemReaders, Telemetry } from './telemetry';
import { PortWatch } from './port-watch';
import { parseObject, prettify, type Shape } from './validate';

export interface AgentOptions {
  /** SINGULACOMP_SESSION_ID */
  sessionId: string;
  /** SINGULACOMP_BRANCH_NAME. @default sessionId */
  branchName?: string;
  projectId?: string;
  /** SINGULACOMP_TOKEN: API bearer token and user-context key material. */
  token: string;
  /** SINGULACOMP_API_URL (GraphQL at `${apiUrl}/graphql`). */
  apiUrl: string;
  /** SINGULACOMP_SERVICE_PORT; 0 picks a free port (tests). @default 8000 */
  servicePort?: number;
  /** @default '0.0.0.0' */
  serviceHost?: string;
  /** @default '/workspace' */
  workspace?: string;
  /** OpenCode's HOME, outside the repository. @default '/opt/singulacomp/home' */
  home?: string;
  /** @default `<workspace>/.singulacomp/opencode` */
  configDir?: string;
  /** @default 4096 */
  opencodePort?: number;
  /** @default the platform package's binary (see resolveOpencodeBin) */
  opencodeBin?: string;
  /** Extra environment for OpenCode (merged over the daemon's own). */
  opencodeEnv?: Record<string, string>;
  /**
   * SINGULACOMP_LLM_MODELS: the LLM gateway's models as the server listed them ([]: it serves none,
   * OpenCode keeps the project's providers). Unset: asked of the gateway before OpenCode's first start.
   */
  gatewayModels?: string[];
  /** SINGULACOMP_MEMORY_GUARD_PCT. @default 92 */
  memoryGuardPct?: number;
  /** @default 80 */
  sampleAbovePct?: number;
  /** @default 10_000 */
  fastSampleMs?: number;
  /** @default 60_000 */
  slowSampleMs?: number;
  /** SINGULACOMP_MEMORY_SAMPLE_MS: both sampling periods at once (fast and slow); unset: their defaults. */
  memorySampleMs?: number;
  /** SINGULACOMP_ATTACHMENT_OFFLOAD != '0'. @default true */
  attachmentOffload?: boolean;
  /** @default 300_000 */
  offloadIntervalMs?: number;
  /** @default 12 */
  keepAttachmentsPerSession?: number;
  /** @default 60_000 */
  leaseRenewIntervalMs?: number;
  /** Ports proxied beside the daemon's own tree's (SINGULACOMP_PROXY_EXTRA_PORTS). @default [] */
  proxyExtraPorts?: number[];
  /** @default 60_000 */
  telemetryIntervalMs?: number;
  /**
   * SINGULACOMP_CONTROL_PLANE_TIMEOUT_MS: after this long without any answer from the API the daemon
   * stops itself (see control-plane.ts). Unset: never.
   */
  controlPlaneTimeoutMs?: number;
  /** Called after the daemon stopped itself for want of the control plane (main.ts exits). */
  onControlPlaneLost?: () => void;
  /** @default 60_000 */
  healthTimeoutMs?: number;
  /** @default 200 */
  healthPollMs?: number;
  /** OpenCode restart backoff. @default { initialMs: 500, maxMs: 30_000 } */
  restartBackoff?: BackoffOptions;
  /** Uptime after which the restart backoff resets. @default 60_000 */
  stableAfterMs?: number;
  /** Event-stream reconnect backoff. @default { initialMs: 100, maxMs: 5_000 } */
  eventBackoff?: BackoffOptions;
  /** SIGTERM → SIGKILL grace for OpenCode. @default 5_000 */
  stopGraceMs?: number;
  /** Hard deadline for a graceful stop. @default 15_000 */
  shutdownTimeoutMs?: number;
  /** @default 60_000 */
  reloadValidateTimeoutMs?: number;
  /** Memory/load/disk/RSS readers; unspecified ones read /proc, cgroupfs and statfs. */
  readers?: Partial<SystemReaders>;
  /** API retry tuning. */
  apiMaxAttempts?: number;
  /**
   * The control plane's client. @default an ApiClient for `apiUrl` with `token` and
   * `apiMaxAttempts` (a test can pass one of its own, e.g. with a different requester).
   */
  api?: ApiClient;
  /** Time for the lease keeper and the supervisor (timers, backoff waits). @default systemClock */
  clock?: Clock;
  logger?: Logger;
  /** @default 'info' */
  logLevel?: string;
}

const messageBody = { text: { type: 'string', min: 1, max: 100_000 } } satisfies Shape;

const reloadBody = {
  reloadId: { type: 'string', min: 1 },
  noRepo: { type: 'boolean', optional: true },
  force: { type: 'boolean', optional: true },
} satisfies Shape;

export class Agent {
  readonly options: Required<
    Omit<
      AgentOptions,
      | 'readers'
      | 'logger'
      | 'projectId'
      | 'opencodeBin'
      | 'restartBackoff'
      | 'eventBackoff'
      | 'memorySampleMs'
      | 'controlPlaneTimeoutMs'
      | 'onControlPlaneLost'
      | 'api'
      | 'clock'
      | 'gatewayModels'
    >
  > & { opencodeBin: string; restartBackoff: BackoffOptions; eventBackoff: BackoffOptions };
  readonly log: Logger;
  readonly api: ApiClient;
  readonly clock: Clock;
  readonly tracker = new TurnTracker();
  readonly supervisor: Supervisor;
  readonly events: EventFollower;
  readonly lease: LeaseKeeper;
  readonly telemetry: Telemetry;
  readonly ports: PortWatch;
  readonly memoryGuard: MemoryGuard;
  readonly offloader: Offloader;
  readonly reloader: Reloader;
  readonly proxy: ProxyServer;
  readonly forwarder: EventForwarder;
  readonly controlPlane: ControlPlaneWatch | null;
  /** The OpenCode session the API's conversation (sendMessage, messages) talks to. */
  conversationSessionId: string | null = null;
  readonly readers: SystemReaders;
  /** Last runtime state reported to the API. */
  runtimeState: RuntimeState = 'STARTING';
  /** Every OpenCode event seen (bounded), for diagnostics and tests. */
  readonly recentEvents: OpencodeEvent[] = [];
  /** Binary used for reload replacements; tests break it to exercise a failed reload. */
  replacementBin: string | undefined;
  private reportChain: Promise<void> = Promise.resolve();
  private offloadTimer: NodeJS.Timeout | null = null;
  /** Offload passes in flight: the stop waits for them, since they write into OpenCode's database. */
  private readonly offloading = new Set<Promise<unknown>>();
  private started = false;
  private stopping: Promise<void> | null = null;
  private readonly gatewayModels: readonly string[] | null;

  constructor(options: AgentOptions) {
    this.gatewayModels = options.gatewayModels ?? null;
    const workspace = options.workspace ?? '/workspace';
    this.options = {
      sessionId: options.sessionId,
      branchName: options.branchName ?? options.sessionId,
      token: options.token,
      apiUrl: options.apiUrl,
      servicePort: options.servicePort ?? 8000,
      serviceHost: options.serviceHost ?? '0.0.0.0',
      workspace,
      home: options.home ?? '/opt/singulacomp/home',
      configDir: options.configDir ?? join(workspace, '.singulacomp', 'opencode'),
      opencodePort: options.opencodePort ?? 4096,
      opencodeBin: resolveOpencodeBin(options.opencodeBin),
      opencodeEnv: options.opencodeEnv ?? {},
      memoryGuardPct: options.memoryGuardPct ?? 92,
      sampleAbovePct: options.sampleAbovePct ?? 80,
      fastSampleMs: options.fastSampleMs ?? options.memorySampleMs ?? 10_000,
      slowSampleMs: options.slowSampleMs ?? options.memorySampleMs ?? 60_000,
      attachmentOffload: options.attachmentOffload ?? true,
      offloadIntervalMs: options.offloadIntervalMs ?? 300_000,
      keepAttachmentsPerSession: options.keepAttachmentsPerSession ?? 12,
      leaseRenewIntervalMs: options.leaseRenewIntervalMs ?? 60_000,
      proxyExtraPorts: options.proxyExtraPorts ?? [],
      telemetryIntervalMs: options.telemetryIntervalMs ?? 60_000,
      healthTimeoutMs: options.healthTimeoutMs ?? 60_000,
      healthPollMs: options.healthPollMs ?? 200,
      restartBackoff: options.restartBackoff ?? { initialMs: 500, maxMs: 30_000 },
      stableAfterMs: options.stableAfterMs ?? 60_000,
      eventBackoff: options.eventBackoff ?? { initialMs: 100, maxMs: 5_000 },
      stopGraceMs: options.stopGraceMs ?? 5_000,
      shutdownTimeoutMs: options.shutdownTimeoutMs ?? 15_000,
      reloadValidateTimeoutMs: options.reloadValidateTimeoutMs ?? 60_000,
      apiMaxAttempts: options.apiMaxAttempts ?? 5,
      logLevel: options.logLevel ?? 'info',
    };
    const o = this.options;
    this.log = options.logger ?? createLogger(o.logLevel);
    this.readers = { ...createSystemReaders(), ...options.readers };
    this.clock = options.clock ?? systemClock;
    this.api =
      options.api ??
      new ApiClient({
        apiUrl: o.apiUrl,
        token: o.token,
        logger: this.log,
        maxAttempts: o.apiMaxAttempts,
      });
    this.supervisor = new Supervisor({
      api: this.api,
      logger: this.log,
      sessionId: o.sessionId,
      bin: o.opencodeBin,
      port: o.opencodePort,
      workspace: o.workspace,
      home: o.home,
      configDir: o.configDir,
      env: o.opencodeEnv,
      healthTimeoutMs: o.healthTimeoutMs,
      healthPollMs: o.healthPollMs,
      restartBackoff: o.restartBackoff,
      stableAfterMs: o.stableAfterMs,
      stopGraceMs: o.stopGraceMs,
      reportState: (state, message) => this.reportState(state, message),
      beforeLaunch: () => this.configureGateway(),
      observed: (proc) => this.events.connected(proc.client),
      clock: this.clock,
    });
    this.forwarder = new EventForwarder({ api: this.api, logger: this.log, sessionId: o.sessionId });
    this.events = new EventFollower({
      logger: this.log,
      tracker: this.tracker,
      client: () => (this.supervisor.healthy ? (this.supervisor.current?.client ?? null) : null),
      backoff: o.eventBackoff,
      onEvent: (event) => {
        this.forwarder.push(event);
        this.recentEvents.push(event);
        if (this.recentEvents.length > 500) this.recentEvents.shift();
      },
    });
    this.lease = new LeaseKeeper({
      api: this.api,
      logger: this.log,
      sessionId: o.sessionId,
      renewIntervalMs: o.leaseRenewIntervalMs,
      clock: this.clock,
    });
    this.telemetry = new Telemetry({
      api: this.api,
      logger: this.log,
      readers: this.readers,
      workspace: o.workspace,
      intervalMs: o.telemetryIntervalMs,
      sandboxId: () => this.supervisor.bootstrap?.sandboxId ?? null,
      opencodePid: () => this.supervisor.current?.pid,
    });
    const timeoutMs = options.controlPlaneTimeoutMs;
    this.controlPlane = timeoutMs
      ? new ControlPlaneWatch({
          timeoutMs,
          lastContact: () => this.api.lastContactAt,
          probe: () => this.api.ping(),
          logger: this.log,
          onLost: () => void this.stop().then(() => options.onControlPlaneLost?.()),
        })
      : null;
    this.ports = new PortWatch({
      api: this.api,
      logger: this.log,
      sandboxId: () => this.supervisor.bootstrap?.sandboxId ?? null,
      excluded: () => [this.proxy.port, ...(this.supervisor.current ? [this.supervisor.current.port] : [])],
    });
    this.memoryGuard = new MemoryGuard({
      logger: this.log,
      tracker: this.tracker,
      readMemory: () => this.readers.memory(),
      opencode: () => this.supervisor.current?.client ?? null,
      guardPct: o.memoryGuardPct,
      sampleAbovePct: o.sampleAbovePct,
      fastSampleMs: o.fastSampleMs,
      slowSampleMs: o.slowSampleMs,
      onTrip: (error) => this.onMemoryGuardTrip(error),
    });
    this.offloader = new Offloader({
      logger: this.log,
      home: o.home,
      keepPerSession: o.keepAttachmentsPerSession,
    });
    this.reloader = new Reloader({
      api: this.api,
      logger: this.log,
      supervisor: this.supervisor,
      tracker: this.tracker,
      workspace: o.workspace,
      configDir: o.configDir,
      branchName: o.branchName,
      validateTimeoutMs: o.reloadValidateTimeoutMs,
      healthPollMs: o.healthPollMs,
      stopGraceMs: o.stopGraceMs,
      onSwap: () => this.events.reconnect(),
      replacementBin: () => this.replacementBin,
    });
    this.proxy = new ProxyServer({
      logger: this.log,
      port: o.servicePort,
      host: o.serviceHost,
      token: o.token,
      sessionId: o.sessionId,
      opencodePort: () => (this.supervisor.current?.alive ? this.supervisor.current.port : null),
      reservedPorts: () => this.supervisor.runtimePorts(),
      handlers: this.handlers(),
      deniedPorts: apiPortOf(o.apiUrl),
      extraPorts: o.proxyExtraPorts ?? [],
    });

    this.tracker.on('change', (change) => {
      if (change.state === 'busy' || change.state === 'retry') this.lease.hold();
      else void this.lease.release();
      const state: RuntimeState = { busy: 'BUSY', retry: 'RETRY', idle: 'IDLE', error: 'ERROR' }[
        change.state
      ] as RuntimeState;
      this.reportState(state, change.message);
    });
    this.supervisor.on('healthy', () => this.events.reconnect());
    this.supervisor.on('exit', () => {
      this.tracker.endAll('error', 'OpenCode exited during the turn');
      this.events.reconnect();
    });
  }

  /** The service port the proxy listens on (resolved when `servicePort` was 0). */
  get servicePort(): number {
    return this.proxy.port;
  }

  /** Listens on the service port, then boots OpenCode; resolves once it is healthy and the prompt sent. */
  async start(): Promise<this> {
    if (this.started) return this;
    this.started = true;
    await this.proxy.listen();
    this.log.info({ servicePort: this.proxy.port, workspace: this.options.workspace }, 'daemon listening');
    // Watched from the start: a daemon whose API is gone before OpenCode is up stops as well.
    this.controlPlane?.start();
    this.events.start();
    await this.supervisor.boot();
    if (this.supervisor.stopped) return this;
    this.telemetry.start();
    this.ports.start();
    this.memoryGuard.start();
    void this.telemetry.report('STATE_CHANGE');
    if (this.options.attachmentOffload) {
      void this.offloadIfIdle();
      this.offloadTimer = setInterval(() => void this.offloadIfIdle(), this.options.offloadIntervalMs);
      this.offloadTimer.unref();
    }
    return this;
  }

  /**
   * Points OpenCode at the LLM gateway (OPENCODE_CONFIG_CONTENT wins over the project's config for
   * the keys it sets), unless the daemon's caller already chose a config of its own.
   */
  private async configureGateway(): Promise<void> {
    const env = this.options.opencodeEnv;
    if (env.OPENCODE_CONFIG_CONTENT) return;
    // The server's list, when it gave one, spares OpenCode's start a round trip through the gateway.
    const models =
      this.gatewayModels ?? (await fetchGatewayModels(this.options.apiUrl, this.options.token, this.log));
    if (models.length === 0) return;
    env.OPENCODE_CONFIG_CONTENT = JSON.stringify(
      gatewayOpencodeConfig(this.options.apiUrl, this.options.token, models),
    );
    this.log.info({ models }, 'OpenCode uses the LLM gateway');
  }

  /** Reports a runtime state (in order) and pushes a STATE_CHANGE telemetry sample. */
  reportState(state: RuntimeState, message?: string): void {
    this.runtimeState = state;
    const input = { sessionId: this.options.sessionId, state, ...(message ? { message } : {}) };
    this.reportChain = this.reportChain
      .then(() => this.api.reportRuntimeState(input))
      .catch((error: unknown) =>
        this.log.warn({ err: (error as Error).message, state }, 'reportRuntimeState failed'),
      );
    if (this.supervisor?.bootstrap) void this.telemetry.report('STATE_CHANGE');
  }

  /** Resolves when every queued runtime-state report was sent. */
  flushReports(): Promise<void> {
    return this.reportChain;
  }

  /** Runs an offload pass unless a turn is in flight or offload is disabled. */
  /** Settles once no attachment-offload pass is running (the one at start included). */
  async offloadsSettled(): Promise<void> {
    while (this.offloading.size > 0) await Promise.allSettled([...this.offloading]);
  }

  async offloadIfIdle(): Promise<ReturnType<Offloader['run']> extends Promise<infer R> ? R | null : never> {
    if (!this.options.attachmentOffload || this.tracker.turnInFlight || this.stopping) return null;
    const pass = this.offloader.run();
    // A pass writes into OpenCode's database; the stop waits for it (see shutdown()).
    this.offloading.add(pass);
    try {
      return await pass;
    } catch (error) {
      this.log.warn({ err: (error as Error).message }, 'offload failed');
      return null;
    } finally {
      this.offloading.delete(pass);
    }
  }

  private onMemoryGuardTrip(error: SandboxMemoryGuardError): void {
    void this.telemetry.report('MEMORY_GUARD');
    // Offload once the aborted turn has actually ended.
    const deadline = Date.now() + 30_000;
    const tryOffload = (): void => {
      if (this.stopping) return;
      if (!this.tracker.turnInFlight) return void this.offloadIfIdle();
      if (Date.now() < deadline) setTimeout(tryOffload, 250).unref();
    };
    setTimeout(tryOffload, 100).unref();
    this.log.warn({ err: error.message }, 'memory guard tripped');
  }

  private handlers(): ControlHandlers {
    return {
      health: () => {
        const healthy = this.supervisor.healthy && !!this.supervisor.current?.alive;
        return {
          status: healthy ? 200 : 503,
          body: {
            ok: healthy,
            sessionId: this.options.sessionId,
            runtime: { state: this.runtimeState, healthy },
          },
        };
      },
      refresh: async () => {
        try {
          const config = await compileAgentConfig(this.options.configDir);
          if (this.tracker.turnInFlight) {
            return { status: 409, body: { ok: false, error: 'a turn is in progress; refresh when it ends' } };
          }
          const client = this.supervisor.current?.client;
          if (!client) return { status: 503, body: { ok: false, error: 'OpenCode is not running' } };
          await client.disposeInstance();
          return { status: 200, body: { ok: true, config: config.path } };
        } catch (error) {
          return { status: 422, body: { ok: false, error: (error as Error).message } };
        }
      },
      reload: async (body) => {
        const parsed = parseObject(reloadBody, body);
        if (!parsed.success) return { status: 400, body: { error: prettify(parsed.issues) } };
        const request = parsed.data as { reloadId: string; noRepo?: boolean; force?: boolean };
        const run = this.reloader.begin(request);
        if (!run) return { status: 409, body: { error: 'a reload is already running' } };
        return { status: 202, body: { accepted: true, reloadId: request.reloadId } };
      },
      part: async (id) => {
        const found = await this.offloader.read(id);
        return found ? { mime: found.meta.mime, bytes: found.bytes } : null;
      },
      message: async (body) => {
        const parsed = parseObject(messageBody, body);
        if (!parsed.success) return { status: 400, body: { error: prettify(parsed.issues) } };
        const { text } = parsed.data as { text: string };
        const client = this.supervisor.healthy ? this.supervisor.current?.client : null;
        if (!client) return { status: 503, body: { error: 'OpenCode is not running' } };
        // The turn's events must reach us: never prompt a runtime whose stream is not connected yet.
        await this.events.connected(client);
        const sessionId = await this.conversation(client);
        await client.promptAsync(sessionId, text);
        return { status: 202, body: { accepted: true, opencodeSessionId: sessionId } };
      },
      abort: async () => {
        const client = this.supervisor.healthy ? this.supervisor.current?.client : null;
        if (!client) return { status: 503, body: { error: 'OpenCode is not running' } };
        const sessionId = await this.conversation(client);
        const inFlight = this.tracker.inFlight().includes(sessionId);
        await client.abort(sessionId);
        return { status: 200, body: { aborted: inFlight, opencodeSessionId: sessionId } };
      },
      messages: async () => {
        const client = this.supervisor.healthy ? this.supervisor.current?.client : null;
        if (!client) return { status: 503, body: { error: 'OpenCode is not running' } };
        const sessionId = await this.conversation(client);
        return {
          status: 200,
          body: { opencodeSessionId: sessionId, messages: await client.messages(sessionId) },
        };
      },
    };
  }

  /**
   * The conversation's OpenCode session: the one the initial prompt went to, else the most
   * recently active one (after a daemon restart), else a new one.
   */
  private async conversation(client: NonNullable<Supervisor['current']>['client']): Promise<string> {
    if (this.conversationSessionId) return this.conversationSessionId;
    if (this.supervisor.initialSessionId) {
      this.conversationSessionId = this.supervisor.initialSessionId;
      return this.conversationSessionId;
    }
    const existing = await client.listSessions();
    const latest = existing.sort((a, b) => (b.time?.updated ?? 0) - (a.time?.updated ?? 0))[0];
    this.conversationSessionId = latest?.id ?? (await client.createSession()).id;
    return this.conversationSessionId;
  }

  /** Graceful stop (release the lease, close the proxy, SIGTERM OpenCode); hard kill after the deadline. */
  stop(): Promise<void> {
    this.stopping ??= this.shutdown();
    return this.stopping;
  }

  private async shutdown(): Promise<void> {
    this.log.info('daemon stopping');
    if (this.offloadTimer) clearInterval(this.offloadTimer);
    this.controlPlane?.stop();
    this.memoryGuard.stop();
    this.telemetry.stop();
    const ports = this.ports.stop();
    const graceful = (async () => {
      await Promise.all([
        this.proxy.close(Math.min(2_000, this.options.shutdownTimeoutMs)),
        this.events.stop(),
        this.lease.stop(),
        this.supervisor.stop(),
      ]);
      await Promise.all([this.reportChain, this.forwarder.flush(), this.offloadsSettled(), ports]);
    })();
    let timer: NodeJS.Timeout | undefined;
    const hard = new Promise<'timeout'>((resolve) => {
      timer = setTimeout(() => resolve('timeout'), this.options.shutdownTimeoutMs);
    });
    const outcome = await Promise.race([graceful.then(() => 'done' as const), hard]);
    clearTimeout(timer);
    if (outcome === 'timeout') {
      this.log.warn('graceful stop timed out; killing');
      this.supervisor.current?.signal('SIGKILL');
      this.proxy.server.closeAllConnections();
    }
    this.log.info('daemon stopped');
  }
}

export function createAgent(options: AgentOptions): Agent {
  return new Agent(options);
}

/** The API's port when it is a loopback URL (an isolated sandbox reaches it through a local bridge). */
function apiPortOf(apiUrl: string): number[] {
  try {
    const url = new URL(apiUrl);
    if (!['127.0.0.1', 'localhost', '[::1]'].includes(url.hostname)) return [];
    return [Number(url.port || (url.protocol === 'https:' ? 443 : 80))];
  } catch {
    return [];
  }
}
