// The domain services one server process runs, wired together. Schema resolvers reach everything
// through `ctx.services`; nothing here knows about HTTP or GraphQL transports.
import type { Database, Db } from './platform';
import type { Logger } from './platform';
import type { PubSub } from './events/channels';
import type { Keys } from './auth/keys';
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
import { createLifetimeGuard } from './sessions/lifetime-guard';
import { createRecovery } from './sessions/recovery';
import { type ReloadService, createReloadService } from './daemon/reloads';
import { type RuntimeStateService, createRuntimeStateService } from './daemon/runtime-state';
import { type SessionLifecycle, createSessionLifecycle } from './sessions/lifecycle';
import { type SnapshotService, createSnapshotService } from './snapshots/snapshots';
import { type TelemetryService, createTelemetryService } from './daemon/telemetry';
import { type TokenService, createTokenService } from './auth/tokens';
import { type UsageService, createUsageService } from './billing/usage';

/** The settings the domain services take (server/env.ts maps the environment onto them). */
export interface ServicesConfig {
  defaultProvider: ProviderName;
  rates: RateOverrides;
  runtimeVersion: string;
  runtimeBaseUrl: string | null;
  runtimeSha256: string | null;
  retryAfterSeconds: number;
  leaseTtlMs: number;
  idleTimeoutMs: number;
  reaperIntervalMs: number;
  /** How often each process looks for due schedule triggers. */
  triggerTickMs: number;
  /** The API's public base URL, for webhook URLs (null: paths only). */
  publicUrl: string | null;
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
}

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
  /** Clock of the time-based rules (token expiry). @default Date.now */
  now?: () => number;
}

export function createServices(options: ServicesOptions): Services {
  const db = options.database.prisma;
  const events = createEvents(options.pubsub, options.logger);
  const tokens = createTokenService({ db, jwtKey: options.keys.sandboxJwt, now: options.now });
  const accounts = createAccountService({ db, tokens });
  const members = createMemberService({ db, tokens });
  const projects = createProjectService({
    db,
    encryptionKey: options.keys.encryption,
    defaultProvider: options.config.defaultProvider,
  });
  const rates = resolveRates(options.config.rates);
  const usage = createUsageService({ db, rates });
  const snapshots = createSnapshotService({
    db,
    git: options.git,
    logger: options.logger,
    runtimeVersion: options.config.runtimeVersion,
    ...(options.config.runtimeBaseUrl ? { runtimeBaseUrl: options.config.runtimeBaseUrl } : {}),
    runtimeSha256: options.config.runtimeSha256,
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
    onFailed: (id, reason) => sessions.fail(id, reason),
    onProviderGone: (id) => sessions.stopInternal(id, 'PROVIDER'),
  });
  sessions = createSessionLifecycle({
    db,
    git: options.git,
    events,
    logger: options.logger,
    encryptionKey: options.keys.encryption,
    retryAfterSeconds: options.config.retryAfterSeconds,
    provision: (id) => provisioner.start(id),
    teardown: (id, reason) => provisioner.teardown(id, reason),
  });
  const manifests = createManifestService({
    db,
    git: options.git,
    projects,
    encryptionKey: options.keys.encryption,
  });
  // Sandbox-daemon side (docs/agent-api.md): leases, the idle reaper, telemetry, reloads.
  const leases = createLeaseService({
    db,
    providers: options.providers,
    logger: options.logger,
    leaseTtlMs: options.config.leaseTtlMs,
  });
  const telemetry = createTelemetryService({
    db,
    sql: options.database.raw,
    events,
    logger: options.logger,
  });
  // Sessions end cleanly before a provider's hard sandbox length (E2B) instead of pausing mid-turn.
  const lifetimes = createLifetimeGuard({
    db,
    events,
    logger: options.logger,
    stop: (sessionId, reason) => sessions.stopInternal(sessionId, reason),
  });
  const recovery = createRecovery({ db, sessions, logger: options.logger });
  const reaper = createReaper({
    db,
    logger: options.logger,
    idleTimeoutMs: options.config.idleTimeoutMs,
    intervalMs: options.config.reaperIntervalMs,
    stop: (sessionId, reason) => sessions.stopInternal(sessionId, reason),
    housekeeping: async () => {
      await telemetry.pruneExpired();
      await recovery.sweep();
      await lifetimes.tick();
    },
  });
  const runtimeState = createRuntimeStateService({ db, events });
  const claims = createClaimService({ db });
  const reloads = createReloadService({
    db,
    events,
    logger: options.logger,
    encryptionKey: options.keys.encryption,
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
  });
  const triggers = createTriggerService({
    db,
    sessions,
    logger: options.logger,
    encryptionKey: options.keys.encryption,
    tickMs: options.config.triggerTickMs,
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
  };
}
