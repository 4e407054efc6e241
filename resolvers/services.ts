// The domain services one server process runs, wired together. Schema resolvers reach everything
// but the database through `ctx.services` (SchemaServices); nothing here knows about HTTP or GraphQL
// transports.
import { isUnavailable } from './unavailable';
import type { Database, Db, FindManySql } from './platform';
import type { Logger } from './platform';
import type { PubSub } from './events/channels';
import type { Keys } from './auth/keys';
import type { StopReason } from '../prisma/generated/client/client';
import { type AccountService, createAccountService } from './accounts/accounts';
import { type MemberService, createMemberService } from './accounts/members';
import { type ClaimService, createClaimService } from './daemon/claim';
import { type RateOverrides, type RateTable, resolveRates } from './billing/cost';
import { type Events, createEvents } from './events/events';
import { type ChangeRequestService, createChangeRequestService } from './change-requests/change-requests';
import { type GitAccess, createGitAccess } from './git/access';
import { type TriggerService, createTriggerService } from './triggers/triggers';
import type { GitService } from './git/git';
import { type LeaseService, createLeaseService } from './leases/leases';
import { type ManifestService, createManifestService } from './projects/manifests';
import { type ProjectService, createProjectService } from './projects/projects';
import type { ProviderRegistry } from './providers/registry';
import type { ProviderName } from './providers/types';
import { type Provisioner, createProvisioner } from './sessions/provisioning';
import { type Reaper, createReaper } from './leases/reaper';
import { type JobQueue, JOBS, createJobQueue } from './jobs/queue';
import { createLifetimeGuard } from './sessions/lifetime-guard';
import { type Reconciler, createReconciler } from './sessions/reconciler';
import { type Recovery, createRecovery } from './sessions/recovery';
import { type Installation, createInstallation } from './sessions/installation';
import { type ReloadService, createReloadService } from './daemon/reloads';
import { type RuntimeStateService, createRuntimeStateService } from './daemon/runtime-state';
import { type SessionLifecycle, createSessionLifecycle } from './sessions/lifecycle';
import { type SnapshotService, createSnapshotService } from './snapshots/snapshots';
import { type TelemetryService, createTelemetryService } from './daemon/telemetry';
import { type TokenService, createTokenService } from './auth/tokens';
import { type UsageService, createUsageService } from './billing/usage';
import { createHmac } from 'node:crypto';
import { type DaemonClient, createDaemonClient } from './daemon/daemon-client';
import { type AccessService, createAccessService } from './gateway/access';
import { type ConversationService, createConversationService } from './gateway/conversation';
import { type LlmConfig, type LlmGatewayService, createLlmGatewayService } from './gateway/llm';
import { createGatewayModels } from './gateway/models';
import { type SessionRecord, createSessionRecord } from './sessions/record';
import { type WorkspaceService, createWorkspaceService } from './sessions/workspace';
import { type SandboxInfo, createSandboxInfo } from './sessions/sandbox-info';
import { type NodeAccessFactory, createNodeAccess } from './auth/node-access';

/** The settings the domain services take (server/env.ts maps the environment onto them). */
export interface ServicesConfig {
  defaultProvider: ProviderName;
  /** Local filesystem repository URLs are accepted (never inside dataDir). */
  allowLocalRepositories: boolean;
  dataDir: string;
  rates: RateOverrides;
  runtimeVersion: string;
  runtimeBaseUrl: string | null;
  runtimeSha256: string | null;
  retryAfterSeconds: number;
  leaseTtlMs: number;
  idleTimeoutMs: number;
  /** The reaper's timeout for a sandbox whose agent has not reported ready yet. */
  bootTimeoutMs: number;
  reaperIntervalMs: number;
  /** Admission transaction: wait for a connection at most / run at most. */
  transaction: { maxWaitMs: number; timeoutMs: number };
  /** How old a base ref's answer a session create accepts (0: it asks the upstream every time). */
  refCacheMs: number;
  jobs: {
    heartbeatSeconds: number;
    provisioningResumeMs: number;
    recoveryIntervalMs: number;
    reconcileIntervalMs: number;
    /** How long a provider sandbox must look orphaned before the reconciler destroys it. */
    orphanGraceMs: number;
  };
  /** SINGULACOMP_INSTALLATION_ID (null: generated once and kept in the database). */
  installationId: string | null;
  /** LLM gateway upstreams and image limit (R-LLM-1). */
  llm: LlmConfig;
  /** Lifetime of signed preview URLs. */
  previewUrlTtlSeconds: number;
  /** host[:port] of subdomain previews; null: the API host when it is a DNS name. */
  previewDomain: string | null;
  /** The sandbox image's static file-share port (never behind a share link). */
  fileSharePort: number;
  /** How often each process looks for due schedule triggers. */
  triggerTickMs: number;
  /** Shortest interval between two firings of a schedule trigger (finer schedules are refused). */
  triggerMinIntervalSeconds: number;
  /** How far a webhook delivery's signed timestamp may be from the server's clock, either way. */
  webhookToleranceSeconds: number;
  /** The API's public base URL, for webhook URLs (null: paths only). */
  publicUrl: string | null;
  /** The session record (R-REC-1): output cut and retention (0: kept until the session is deleted). */
  record: { maxOutputChars: number; retentionMs: number };
}

export interface Services {
  db: Db;
  database: Database;
  config: ServicesConfig;
  keys: Keys;
  logger: Logger;
  pubsub: PubSub;
  events: Events;
  git: GitService;
  gitAccess: GitAccess;
  changeRequests: ChangeRequestService;
  triggers: TriggerService;
  providers: ProviderRegistry;
  rates: RateTable;
  tokens: TokenService;
  accounts: AccountService;
  members: MemberService;
  projects: ProjectService;
  sessions: SessionLifecycle;
  provisioner: Provisioner;
  manifests: ManifestService;
  snapshots: SnapshotService;
  usage: UsageService;
  leases: LeaseService;
  reaper: Reaper;
  telemetry: TelemetryService;
  runtimeState: RuntimeStateService;
  claims: ClaimService;
  reloads: ReloadService;
  jobs: JobQueue;
  recovery: Recovery;
  reconciler: Reconciler;
  /** This installation's id (tagged on provider sandboxes). */
  installation: Installation;
  /** Starts the job queue, this process's workers and the recovery sweep. */
  startBackground(): Promise<void>;
  /** Stops taking jobs; running ones get timeoutMs, then resume on another process. */
  stopBackground(timeoutMs: number): Promise<void>;
  llmGateway: LlmGatewayService;
  daemon: DaemonClient;
  conversation: ConversationService;
  access: AccessService;
  record: SessionRecord;
  workspace: WorkspaceService;
  sandboxInfo: SandboxInfo;
  /** The read checks of Node types for one request (owners looked up once per request). */
  nodeAccess: NodeAccessFactory;
}

/**
 * What GraphQL resolvers in schema/ get: every service but the database. They call services, which
 * hold the reads and the rules; the prisma plugin's own queries (relations, node loads) take the
 * client from the builder's wiring, not from resolvers.
 */
export type SchemaServices = Omit<Services, 'db' | 'database'>;

export interface ServicesOptions {
  database: Database;
  config: ServicesConfig;
  keys: Keys;
  logger: Logger;
  pubsub: PubSub;
  git: GitService;
  providers: ProviderRegistry;
  /** SINGULACOMP_API_URL as seen from a sandbox. */
  apiUrl: () => string;
  /**
   * The one clock of every service that stamps times and compares them with its own stamps.
   * Recovery and the lifetime guard stay on real time: they compare times that Prisma or a provider
   * stamps. @default Date.now
   */
  now?: () => number;
  /** Reads list pages as one statement where it can (server/fast-paths/). @default Prisma only */
  findManySql?: FindManySql;
  /** The request a call runs for (x-request-id), so a provisioning job's log lines carry it. */
  requestScope?: import('./sessions/provisioning').RequestScope;
  /** Metrics hooks. */
  onAdmissionRefused?: () => void;
  onJobFailed?: (queue: string) => void;
}

export function createServices(options: ServicesOptions): Services {
  const db = options.database.prisma;
  const events = createEvents(options.pubsub, options.logger);
  const tokens = createTokenService({ db, jwtKey: options.keys.sandboxJwt, now: options.now });
  const accounts = createAccountService({ db });
  const members = createMemberService({
    db,
    tokens,
    // Bound late: the lifecycle is created below.
    stopSession: (sessionId) => sessions.stopInternal(sessionId, 'USER'),
    now: options.now,
  });
  const projects = createProjectService({
    db,
    git: options.git,
    encryptionKey: options.keys.encryption,
    defaultProvider: options.config.defaultProvider,
    localRepositories: { allowed: options.config.allowLocalRepositories, dataDir: options.config.dataDir },
  });
  const rates = resolveRates(options.config.rates);
  const usage = createUsageService({
    db,
    rates,
    ...(options.now ? { now: () => new Date(options.now!()) } : {}),
  });
  const snapshots = createSnapshotService({
    db,
    git: options.git,
    logger: options.logger,
    runtimeVersion: options.config.runtimeVersion,
    ...(options.config.runtimeBaseUrl ? { runtimeBaseUrl: options.config.runtimeBaseUrl } : {}),
    runtimeSha256: options.config.runtimeSha256,
  });
  const sandboxInfo = createSandboxInfo({
    db,
    providers: options.providers,
    logger: options.logger,
    now: options.now,
  });
  const installation = createInstallation({ db, configured: options.config.installationId });
  const jobs = createJobQueue({
    database: options.database,
    logger: options.logger,
    heartbeatSeconds: options.config.jobs.heartbeatSeconds,
    holdMs: options.config.jobs.provisioningResumeMs,
  });
  const gatewayModels = createGatewayModels({
    llm: options.config.llm,
    logger: options.logger,
    now: options.now,
  });
  // The lifecycle and the provisioner call each other (provision on create, fail on error).
  let sessions: SessionLifecycle;
  const provisioner = createProvisioner({
    db,
    providers: options.providers,
    tokens,
    events,
    logger: options.logger,
    encryptionKey: options.keys.encryption,
    apiUrl: options.apiUrl,
    snapshots,
    onRunning: (id) => sessions.markRunning(id),
    onPhase: (id, phase) => sessions.setPhase(id, phase),
    onFailed: (id, reason) => sessions.fail(id, reason),
    ...(options.requestScope ? { requestScope: options.requestScope } : {}),
    onProviderEnded: (id) => sessions.stopInternal(id, 'PROVIDER'),
    jobs,
    installationId: () => installation.id(),
    git: options.git,
    gatewayModels: (accountId) => gatewayModels.forAccount(accountId),
    now: options.now,
  });
  sessions = createSessionLifecycle({
    db,
    sql: options.database.raw,
    ...(options.findManySql ? { findManySql: options.findManySql } : {}),
    git: options.git,
    events,
    logger: options.logger,
    encryptionKey: options.keys.encryption,
    retryAfterSeconds: options.config.retryAfterSeconds,
    ...(options.onAdmissionRefused ? { onRefused: options.onAdmissionRefused } : {}),
    transaction: options.config.transaction,
    refCacheMs: options.config.refCacheMs,
    now: options.now,
    provision: (id) => provisioner.start(id),
    handoff: {
      hold: (ids) => jobs.holdProvision(ids),
      write: (db, ids) =>
        jobs.writeProvision(
          db,
          ids.map((sessionId) => ({ sessionId })),
        ),
      drop: (ids) => jobs.dropProvision(ids),
      release: (id) => jobs.releaseProvision(id),
    },
    refreshManifest: (project, manifestCommit, commit) =>
      manifests.refreshIfStale(project, manifestCommit, commit),
    // Inline first (a stop answers once the sandbox is gone); a failed teardown becomes a job that
    // retries with backoff on any process.
    teardown: async (id, reason) => {
      try {
        await provisioner.teardown(id, reason);
      } catch (error) {
        await jobs.send(JOBS.teardown, { sessionId: id, reason }, id).catch((sendError: unknown) => {
          options.logger.error({ sessionId: id, err: sendError }, 'could not enqueue a teardown retry');
        });
        throw error;
      }
    },
  });
  const manifests = createManifestService({
    db,
    git: options.git,
    projects,
    encryptionKey: options.keys.encryption,
    logger: options.logger,
  });
  // Sandbox-daemon side (docs/agent-api.md): leases, the idle reaper, telemetry, reloads.
  const leases = createLeaseService({
    db,
    providers: options.providers,
    logger: options.logger,
    leaseTtlMs: options.config.leaseTtlMs,
    now: options.now,
  });
  const telemetry = createTelemetryService({
    db,
    sql: options.database.raw,
    events,
    logger: options.logger,
    now: options.now,
  });
  // Sessions end cleanly before a provider's hard sandbox length (E2B) instead of pausing mid-turn.
  const lifetimes = createLifetimeGuard({
    db,
    events,
    logger: options.logger,
    stop: (sessionId, reason) => sessions.stopInternal(sessionId, reason),
    // No clock: it compares the provider's own end time (real time at the provider), not ours.
  });
  const recovery = createRecovery({
    db,
    sessions,
    logger: options.logger,
    jobs,
    resumeAfterMs: options.config.jobs.provisioningResumeMs,
    intervalMs: options.config.jobs.recoveryIntervalMs,
    // No clock: its cutoffs compare Session.updatedAt, which Prisma stamps from real time.
  });
  const reconciler = createReconciler({
    db,
    providers: options.providers,
    provisioner,
    logger: options.logger,
    intervalMs: options.config.jobs.reconcileIntervalMs,
    orphanGraceMs: options.config.jobs.orphanGraceMs,
    installationId: () => installation.id(),
    ...(options.now ? { now: options.now } : {}),
  });
  const reaper = createReaper({
    db,
    logger: options.logger,
    idleTimeoutMs: options.config.idleTimeoutMs,
    bootTimeoutMs: options.config.bootTimeoutMs,
    intervalMs: options.config.reaperIntervalMs,
    now: options.now,
    // One tick queued or running across the fleet (the queue's exclusive policy).
    enqueue: () => jobs.send(JOBS.reaper, {}, 'tick'),
    stop: (sessionId, reason) => sessions.stopInternal(sessionId, reason),
    housekeeping: async () => {
      await telemetry.pruneExpired();
      await lifetimes.tick();
      await record.prune();
    },
  });
  const runtimeState = createRuntimeStateService({ db, events, now: options.now });
  const claims = createClaimService({ db, now: options.now });
  // Every server→daemon call goes through this one client (signing, and later provider headers).
  const daemon = createDaemonClient({ encryptionKey: options.keys.encryption });
  const reloads = createReloadService({
    db,
    events,
    logger: options.logger,
    encryptionKey: options.keys.encryption,
    daemon,
    now: options.now,
  });
  const llmGateway = createLlmGatewayService({
    sql: options.database.raw,
    tokens,
    llm: options.config.llm,
    logger: options.logger,
  });
  const record = createSessionRecord({
    db,
    sql: options.database.raw,
    logger: options.logger,
    maxOutputChars: options.config.record.maxOutputChars,
    retentionMs: options.config.record.retentionMs,
    apiUrl: options.apiUrl,
    now: options.now,
  });
  const workspace = createWorkspaceService({ db, git: options.git, encryptionKey: options.keys.encryption });
  const conversation = createConversationService({
    db,
    pubsub: options.pubsub,
    daemon,
    logger: options.logger,
    apiUrl: options.apiUrl,
    record,
    sql: options.database.raw,
  });
  const access = createAccessService({
    db,
    tokens,
    daemon,
    // Purpose-bound: a preview signature can never pass for anything else signed with the root key.
    signingKey: createHmac('sha256', options.keys.encryption).update('singulacomp:preview-url').digest(),
    fileSharePort: options.config.fileSharePort,
    previewUrlTtlSeconds: options.config.previewUrlTtlSeconds,
    previewDomain: options.config.previewDomain,
    apiUrl: options.apiUrl,
    now: options.now,
  });
  const gitAccess = createGitAccess({
    db,
    tokens,
    git: options.git,
    encryptionKey: options.keys.encryption,
    logger: options.logger,
  });
  const changeRequests = createChangeRequestService({
    db,
    git: options.git,
    events,
    logger: options.logger,
    encryptionKey: options.keys.encryption,
    now: options.now,
  });
  const triggers = createTriggerService({
    db,
    sessions,
    logger: options.logger,
    encryptionKey: options.keys.encryption,
    tickMs: options.config.triggerTickMs,
    minIntervalSeconds: options.config.triggerMinIntervalSeconds,
    webhookToleranceSeconds: options.config.webhookToleranceSeconds,
    now: options.now ? () => new Date(options.now!()) : undefined,
  });
  return {
    db,
    database: options.database,
    config: options.config,
    keys: options.keys,
    logger: options.logger,
    pubsub: options.pubsub,
    events,
    git: options.git,
    gitAccess,
    changeRequests,
    triggers,
    providers: options.providers,
    rates,
    tokens,
    accounts,
    members,
    projects,
    sessions,
    provisioner,
    manifests,
    snapshots,
    usage,
    leases,
    reaper,
    telemetry,
    runtimeState,
    claims,
    reloads,
    jobs,
    recovery,
    reconciler,
    installation,
    async startBackground() {
      // PostgreSQL may go away while a process starts: the process waits for it (answering 503
      // meanwhile) instead of exiting half-started.
      for (let pauseMs = 250; ; pauseMs = Math.min(pauseMs * 2, 2_000)) {
        try {
          await jobs.start();
          break;
        } catch (error) {
          if (!isUnavailable(error)) throw error;
          options.logger.warn({ err: error }, 'job queue could not start; retrying');
          await new Promise((resolve) => setTimeout(resolve, pauseMs));
        }
      }
      const counted =
        <T>(queue: string, run: (job: T) => Promise<unknown>) =>
        async (job: T) => {
          try {
            return await run(job);
          } catch (error) {
            options.onJobFailed?.(queue);
            throw error;
          }
        };
      await jobs.work<{ sessionId: string }>(
        JOBS.provision,
        counted(JOBS.provision, (job) => provisioner.runProvisionJob(job)),
      );
      await jobs.work<{ sessionId: string; reason: StopReason }>(
        JOBS.teardown,
        counted(JOBS.teardown, (job) => provisioner.teardown(job.data.sessionId, job.data.reason)),
      );
      await jobs.work(
        JOBS.reaper,
        counted(JOBS.reaper, () => reaper.tick()),
      );
      recovery.start();
      reconciler.start();
    },
    async stopBackground(timeoutMs) {
      await recovery.stop();
      await reconciler.stop();
      await jobs.stop(timeoutMs);
    },
    llmGateway,
    daemon,
    conversation,
    access,
    record,
    workspace,
    sandboxInfo,
    nodeAccess: (principal) => createNodeAccess(db, principal),
  };
}
