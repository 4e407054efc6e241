// Provisioning and teardown of a session's sandbox through its provider. Runs as a durable job
// (resolvers/jobs/queue.ts) on whichever process picks it up; a job whose process died is resumed
// by another, so an attempt first removes what an earlier attempt left. Every transition is
// written, then published.
//
// Order: provider (template's, else project's) → spec clamped to the provider's caps (warnings kept
// on the sandbox and the template) → image snapshot (PREPARING_IMAGE while it builds) → sandbox
// create (CREATING_SANDBOX) → RUNNING. Provider errors arrive typed (providers/errors.ts) after the
// adapter's bounded retries; the session then FAILS with the reason, and a sandbox that was created
// on the way is destroyed so nothing leaks. Each running interval is a SandboxInterval row (cost).
import type { ProvisioningPhase, StopReason } from '../../prisma/generated/client/client';
import type { Db } from '../platform';
import type { Logger } from '../platform';
import { decrypt, encrypt } from '../auth/crypto';
import type { Events } from '../events/events';
import { ProviderNotFoundError, ProviderSnapshotUnusableError } from '../providers/errors';
import { fitSpecToProvider } from '../providers/limits';
import { describeEntryExit } from '../providers/local';
import { reservedSecretName } from '../projects/secret-names';
import type { ProviderRegistry } from '../providers/registry';
import { serviceAccessColumns } from '../providers/service-access';
import type { HardwareSpec, ProviderName, SandboxProvider, SandboxState } from '../providers/types';
import { repoRef } from '../git/project-repo';
import type { SnapshotService } from '../snapshots/snapshots';
import type { TokenService } from '../auth/tokens';
import { JOBS, type JobQueue, type ProvisionJob } from '../jobs/queue';
import { isUnavailable } from '../unavailable';
import { GitBranchExistsError } from '../git/errors';

/** The request a call runs for (server/faults.ts keeps it), so background work can log it too. */
export interface RequestScope {
  current(): string | null;
  run<T>(requestId: string, fn: () => T): T;
}

/** Bytes of a sandbox's entry log kept when it stops or fails (Sandbox.logTail). */
export const KEPT_LOG_BYTES = 64 * 1024;
import type { GitService } from '../git/git';

export const DEFAULT_SPEC: HardwareSpec = { cpu: 2, memoryGiB: 4, diskGiB: 20 };
const LIVE_SANDBOX: SandboxState[] = ['PENDING', 'CREATING', 'STARTING', 'STARTED'];

export interface ProvisionerOptions {
  db: Db;
  providers: ProviderRegistry;
  tokens: TokenService;
  events: Events;
  logger: Logger;
  encryptionKey: Buffer;
  /** SINGULACOMP_API_URL as seen from inside a sandbox. */
  apiUrl: () => string;
  snapshots: SnapshotService;
  /** Moves a session still PROVISIONING to RUNNING; false when it was not (a stop won). */
  onRunning: (sessionId: string) => Promise<boolean>;
  /** Sets a PROVISIONING session's phase (what it waits for); false when it was not PROVISIONING. */
  onPhase: (sessionId: string, phase: ProvisioningPhase | null) => Promise<boolean>;
  onFailed: (sessionId: string, reason: string) => Promise<unknown>;
  /** The request a call runs for, and a way to run a job's work as part of it (log lines). */
  requestScope?: RequestScope;
  /**
   * The provider no longer runs a live session's sandbox: it is gone, or it was stopped or paused
   * by something other than us (stops the session with PROVIDER).
   */
  onProviderEnded?: (sessionId: string) => Promise<unknown>;
  /** Milliseconds since the epoch for the times it stamps; tests move it. @default Date.now */
  now?: () => number;
  /** Where provisioning and teardown retries run; without it they run in this process only. */
  jobs?: JobQueue;
  /** This installation's id, tagged on every provider sandbox (resolvers/sessions/installation.ts). */
  installationId?: () => Promise<string>;
  /** Cuts a session's branch for a job that must not assume it exists (see ProvisionJob.cutBranch). */
  git?: Pick<GitService, 'cutBranch'>;
  /**
   * The LLM gateway's models for an account's sandboxes (resolvers/gateway/models.ts), handed to
   * the daemon as SINGULACOMP_LLM_MODELS ([]: the gateway serves none); null: the daemon asks the
   * gateway itself.
   */
  gatewayModels?: (accountId: string) => Promise<string[] | null>;
}

export type Provisioner = ReturnType<typeof createProvisioner>;

export function applyCaps(spec: HardwareSpec, caps: Partial<HardwareSpec> | undefined): HardwareSpec {
  return {
    cpu: Math.min(spec.cpu, caps?.cpu ?? spec.cpu),
    memoryGiB: Math.min(spec.memoryGiB, caps?.memoryGiB ?? spec.memoryGiB),
    diskGiB: Math.min(spec.diskGiB, caps?.diskGiB ?? spec.diskGiB),
  };
}

export function createProvisioner(options: ProvisionerOptions) {
  const { db, providers, tokens, events } = options;
  const now = options.now ?? Date.now;
  const log = options.logger.child({ module: 'provisioning' });
  const inFlight = new Set<Promise<void>>();

  /** One UPDATE … RETURNING: the row carries its account, so no read of the session joins it. */
  async function setSandbox(sandboxId: string, data: Parameters<Db['sandbox']['update']>[0]['data']) {
    const sandbox = await db.sandbox.update({ where: { id: sandboxId }, data });
    await events.sandbox(sandbox, sandbox.accountId);
    return sandbox;
  }

  /** Opens a running interval (cost meters per second from here). */
  async function markStarted(
    sandbox: { id: string; accountId: string; provider: ProviderName } & HardwareSpec,
    at: Date,
  ) {
    await db.sandboxInterval.create({
      data: {
        sandboxId: sandbox.id,
        accountId: sandbox.accountId,
        provider: sandbox.provider,
        cpu: sandbox.cpu,
        memoryGiB: sandbox.memoryGiB,
        diskGiB: sandbox.diskGiB,
        startedAt: at,
      },
    });
  }

  /** Closes the running interval: runningSeconds and the interval row get the same end time. */
  /**
   * Keeps the tail of a sandbox's entry log (Sandbox.logTail) before the provider deletes it, and
   * clears its ports: nothing listens any more.
   */
  async function keepLog(
    sandboxId: string,
    provider: SandboxProvider,
    providerSandboxId: string,
  ): Promise<void> {
    const logTail = provider.logTail
      ? await provider.logTail(providerSandboxId, KEPT_LOG_BYTES).catch((error: unknown) => {
          log.warn({ providerSandboxId, err: (error as Error).message }, 'could not read the entry log');
          return null;
        })
      : null;
    const data = { ports: [], ...(logTail === null ? {} : { logTail, logTailAt: new Date(now()) }) };
    await db.sandboxReport
      .upsert({ where: { sandboxId }, create: { sandboxId, ...data }, update: data })
      .catch((error: unknown) => log.warn({ sandboxId, err: error }, 'could not keep the entry log'));
  }

  async function markHalted(
    sandbox: { id: string; runningSince: Date | null },
    status: SandboxState,
    extra: Parameters<Db['sandbox']['update']>[0]['data'] = {},
  ) {
    const at = new Date(now());
    const ranFor = sandbox.runningSince ? (at.getTime() - sandbox.runningSince.getTime()) / 1000 : 0;
    await db.sandboxInterval.updateMany({
      where: { sandboxId: sandbox.id, stoppedAt: null },
      data: { stoppedAt: at },
    });
    return setSandbox(sandbox.id, {
      status,
      stoppedAt: at,
      runningSince: null,
      runningSeconds: { increment: Math.max(0, ranFor) },
      ...extra,
    });
  }

  /**
   * A resumed attempt starts from scratch: whatever an earlier attempt (on a process that died)
   * created is destroyed and its row removed, so nothing leaks and the sandbox row can be recreated.
   */
  async function clearEarlierAttempt(
    sessionId: string,
    earlier: { id: string; provider: ProviderName; providerSandboxId: string | null } | null,
  ): Promise<void> {
    if (!earlier) return;
    if (earlier.providerSandboxId) {
      await providers
        .get(earlier.provider)
        .destroy(earlier.providerSandboxId)
        .catch((error: unknown) => {
          if (!(error instanceof ProviderNotFoundError)) throw error;
        });
    }
    await db.sandbox.delete({ where: { id: earlier.id } });
    log.info({ sessionId, sandboxId: earlier.id }, 'removed the sandbox of an interrupted attempt');
  }

  async function provision(
    sessionId: string,
    attempt = 1,
    jobId: string | null = null,
    cutBranch = false,
  ): Promise<void> {
    const session = await db.session.findUniqueOrThrow({
      where: { id: sessionId },
      include: {
        project: { include: { secrets: { where: { runtimeDelivery: true } } } },
        template: true,
        // An earlier attempt's sandbox, read with the session rather than by a statement of its own.
        sandbox: { select: { id: true, provider: true, providerSandboxId: true } },
      },
    });
    if (session.status !== 'PROVISIONING') return;
    await db.session.updateMany({
      where: { id: sessionId, status: 'PROVISIONING' },
      data: { provisioningAttempts: attempt, provisioningJobId: jobId, provisioningError: null },
    });
    await clearEarlierAttempt(sessionId, session.sandbox);
    // Read while the sandbox row, the image and the token are prepared (a cached list is at hand).
    const gatewayModels = options.gatewayModels?.(session.accountId).catch(() => null) ?? null;
    const providerName: ProviderName = session.template?.provider ?? session.project.provider;
    let sandboxId: string | null = null;
    let providerSandboxId: string | null = null;
    let provider: SandboxProvider | null = null;
    try {
      const repo = repoRef(session.project, options.encryptionKey);
      if (cutBranch && options.git && session.baseCommit) {
        // The process creating the session may have stopped, or still be waiting on its push, when
        // this job was sent for it: cut the branch from the recorded base unless it is there. The
        // branch is named after the session, so only this session's own cut can have made it.
        await options.git.cutBranch(repo, session.baseCommit, session.branchName).catch((error: unknown) => {
          if (!(error instanceof GitBranchExistsError)) throw error;
        });
      }
      provider = providers.get(providerName);
      const base: HardwareSpec = session.template
        ? {
            cpu: session.template.cpu,
            memoryGiB: session.template.memoryGiB,
            diskGiB: session.template.diskGiB,
          }
        : DEFAULT_SPEC;
      // The provider's caps and shape rules (e.g. E2B's even CPU counts), before anything is sent.
      const { spec, warnings } = fitSpecToProvider(provider, base);
      if (warnings.length > 0)
        log.warn({ sessionId, provider: providerName, warnings }, 'spec clamped to provider caps');
      const template = session.template;
      if (template && warnings.some((w) => !template.warnings.includes(w))) {
        await db.template.update({
          where: { id: template.id },
          data: {
            warnings: [...template.warnings, ...warnings.filter((w) => !template.warnings.includes(w))],
          },
        });
      }
      const sandbox = await db.sandbox.create({
        data: {
          sessionId,
          accountId: session.accountId,
          provider: providerName,
          status: 'PENDING',
          warnings,
          ...spec,
        },
      });
      sandboxId = sandbox.id;
      await events.sandbox(sandbox, session.accountId);

      const resolved = await options.snapshots.resolve({
        provider,
        repo,
        commit: session.baseCommit ?? session.baseRef,
        template: session.template,
        spec,
        onPreparing: async () => {
          await options.onPhase(sessionId, 'PREPARING_IMAGE');
        },
      });
      const snapshot = resolved && 'snapshot' in resolved ? resolved : null;
      if (resolved && 'skipped' in resolved) {
        log.warn({ sessionId, provider: providerName, reason: resolved.skipped }, 'no per-project image');
        warnings.push(resolved.skipped);
        await db.sandbox.update({ where: { id: sandbox.id }, data: { warnings } });
      }
      if (snapshot) {
        await db.sandbox.update({ where: { id: sandbox.id }, data: { snapshotId: snapshot.snapshot.id } });
        if (template) {
          await db.template.update({
            where: { id: template.id },
            data: { snapshotId: snapshot.snapshot.id },
          });
        }
      }
      // A stop during the image build already tore the (empty) sandbox down: the phase is set only
      // on a session still PROVISIONING.
      if (!(await options.onPhase(sessionId, 'CREATING_SANDBOX'))) return;

      const token = await tokens.mintSandboxToken({
        accountId: session.accountId,
        userId: session.userId,
        projectId: session.projectId,
        sessionId,
        sandboxId: sandbox.id,
        agent: session.agent,
      });
      await setSandbox(sandbox.id, {
        status: 'CREATING',
        sandboxTokenEnc: encrypt(options.encryptionKey, token),
      });
      const env: Record<string, string> = {};
      // Runtime-delivery secrets first, so platform variables can never be shadowed (R-AUTH-5).
      // Names that change how processes load or run are refused by setSecret; rows stored before
      // that rule are skipped here, never delivered.
      for (const secret of session.project.secrets) {
        const reserved = reservedSecretName(secret.name);
        if (reserved) {
          log.warn(
            { sessionId, secret: secret.name, reason: reserved },
            'reserved secret name not delivered',
          );
          continue;
        }
        env[secret.name] = decrypt(options.encryptionKey, secret.valueEnc);
      }
      Object.assign(env, {
        SINGULACOMP_SESSION_ID: sessionId,
        SINGULACOMP_BRANCH_NAME: session.branchName,
        SINGULACOMP_PROJECT_ID: session.projectId,
        SINGULACOMP_TOKEN: token,
        SINGULACOMP_API_URL: options.apiUrl(),
        SINGULACOMP_SERVICE_PORT: '8000',
      });
      const models = await gatewayModels;
      if (models) env.SINGULACOMP_LLM_MODELS = JSON.stringify(models);
      const installationId = await options.installationId?.();
      const created = await provider.create({
        sandboxId: sandbox.id,
        sessionId,
        projectId: session.projectId,
        ...(installationId ? { installationId } : {}),
        spec,
        snapshotRef: snapshot?.providerRef ?? null,
        env,
        workspace: {
          repositoryUrl: session.project.repositoryUrl,
          branch: session.branchName,
          // Upstream credentials reach only the LOCAL provider's server-side clone.
          credential:
            providerName === 'LOCAL' && session.project.gitCredentialEnc
              ? decrypt(options.encryptionKey, session.project.gitCredentialEnc)
              : null,
        },
        labels: { 'singulacomp.session': sessionId, 'singulacomp.sandbox': sandbox.id },
      });
      providerSandboxId = created.providerSandboxId;
      const at = new Date(now());
      const started = created.state === 'STARTED';
      await setSandbox(sandbox.id, {
        providerSandboxId: created.providerSandboxId,
        status: created.state,
        // serviceUrl, the provider's access headers for it (encrypted) and the hard expiry.
        ...serviceAccessColumns(options.encryptionKey, created),
        startedAt: started ? at : null,
        runningSince: started ? at : null,
        lastActivityAt: at,
      });
      if (started) await markStarted({ ...sandbox, ...spec }, at);
      // Both change only a session still PROVISIONING. A stop that raced provisioning wins: tear
      // down what was just created.
      const live = started
        ? await options.onRunning(sessionId)
        : await options.onPhase(sessionId, 'STARTING');
      if (live && started) log.info({ sessionId, provider: providerName, sandboxId }, 'session ready');
      if (!live) {
        const current = await db.session.findUniqueOrThrow({ where: { id: sessionId } });
        await teardown(sessionId, current.stopReason ?? 'USER');
      }
    } catch (error) {
      // The database (or Redis) went away mid-way: nothing is known to be wrong with the sandbox.
      // The job retries with backoff and the next attempt starts over (clearEarlierAttempt).
      if (options.jobs && isUnavailable(error)) {
        log.warn({ sessionId, err: error }, 'provisioning interrupted by an outage; the job retries');
        throw error;
      }
      const reason = `Provisioning on ${providerName} failed: ${(error as Error).message}`;
      log.warn({ sessionId, err: error }, 'provisioning failed');
      // The provider can no longer boot this snapshot (failed, removed): the next session rebuilds it.
      if (error instanceof ProviderSnapshotUnusableError && sandboxId) {
        const row = await db.sandbox.findUnique({ where: { id: sandboxId } });
        if (row?.snapshotId) {
          await db.snapshot
            .updateMany({
              where: { id: row.snapshotId, status: 'ACTIVE' },
              data: { status: 'FAILED', error: reason.slice(0, 2_000) },
            })
            .catch(() => undefined);
        }
      }
      // The adapters remove what a failed create left behind; this covers a failure after it.
      if (provider && providerSandboxId && sandboxId) await keepLog(sandboxId, provider, providerSandboxId);
      if (provider && providerSandboxId) {
        await provider.destroy(providerSandboxId).catch((destroyError: unknown) => {
          log.error(
            { sessionId, providerSandboxId, err: destroyError },
            'could not destroy a failed sandbox',
          );
        });
      }
      if (sandboxId) {
        const row = await db.sandbox.findUnique({ where: { id: sandboxId } });
        if (row) await markHalted(row, 'ERROR', { error: reason.slice(0, 2_000) }).catch(() => {});
      }
      // A failure to record the failure propagates: the job retries it instead of leaving the
      // session PROVISIONING.
      await options.onFailed(sessionId, reason);
      await db.session.updateMany({
        where: { id: sessionId },
        data: { provisioningPhase: null, provisioningError: reason.slice(0, 2_000) },
      });
    }
  }

  async function teardown(sessionId: string, reason: StopReason): Promise<void> {
    const revokedTokens = await tokens.revokeSessionTokens(sessionId);
    await db.executionLease.updateMany({
      where: { sessionId, releasedAt: null },
      data: { releasedAt: new Date(now()) },
    });
    await db.session.updateMany({ where: { id: sessionId }, data: { provisioningPhase: null } });
    const sandbox = await db.sandbox.findUnique({ where: { sessionId } });
    // STOPPING and STOPPED-but-not-destroyed: an earlier teardown stopped half-way (its retry job).
    const unfinished = [...LIVE_SANDBOX, 'STOPPING', ...(sandbox?.providerSandboxId ? ['STOPPED'] : [])];
    if (!sandbox || !unfinished.includes(sandbox.status as SandboxState)) return;
    await setSandbox(sandbox.id, { status: 'STOPPING', stopReason: reason });
    // The gateway keeps a running sandbox's row for a moment; a preview that read it between the
    // revocation above and this update must not outlive it, here or on another process.
    tokens.announceRevoked(revokedTokens);
    const provider = providers.get(sandbox.provider);
    let gone = false;
    if (sandbox.providerSandboxId) {
      try {
        await provider.stop(sandbox.providerSandboxId);
      } catch (error) {
        gone = error instanceof ProviderNotFoundError;
        log.warn(
          { sessionId, err: error },
          gone ? 'provider no longer knows the sandbox' : 'provider stop failed; destroying',
        );
      }
    }
    // The entry's log goes with the sandbox: its tail stays readable (Sandbox.logTail, R-REC-2).
    if (sandbox.providerSandboxId && !gone) await keepLog(sandbox.id, provider, sandbox.providerSandboxId);
    const stopped = await markHalted(sandbox, gone ? 'DESTROYED' : 'STOPPED');
    if (sandbox.providerSandboxId && !gone) {
      await provider.destroy(sandbox.providerSandboxId);
      await setSandbox(stopped.id, { status: 'DESTROYED' });
    }
  }

  /**
   * Reads the sandbox's state from its provider. A sandbox the provider no longer knows is
   * DESTROYED; its session, if still live, stops with PROVIDER. So does the session of a sandbox
   * we started that is now STOPPED or HIBERNATED: nothing here stops or pauses a sandbox without
   * ending its session first, and nothing starts one again, so its agent is gone for good (a LOCAL
   * entry that exited, a cloud sandbox stopped from the provider's console or by its own timer).
   * Its teardown then stops and destroys it as for any other stop. `ended`: the session was handed
   * to onProviderEnded.
   */
  async function syncProviderState(
    sandboxId: string,
    failure?: string,
  ): Promise<{ state: SandboxState; ended: boolean }> {
    const sandbox = await db.sandbox.findUniqueOrThrow({ where: { id: sandboxId } });
    if (!sandbox.providerSandboxId) return { state: sandbox.status as SandboxState, ended: false };
    const provider = providers.get(sandbox.provider);
    const state = await provider.status(sandbox.providerSandboxId);
    const gone = state === 'DESTROYED' && sandbox.status !== 'DESTROYED';
    const halted = (state === 'STOPPED' || state === 'HIBERNATED') && sandbox.status === 'STARTED';
    if (gone) await markHalted(sandbox, 'DESTROYED', { stopReason: sandbox.stopReason ?? 'PROVIDER' });
    // Nothing stops a LOCAL entry without ending its session first: one that halted crashed, also
    // when no server process was watching it exit (a restart in between).
    // A check that runs between the exit and this process's exit watcher still says how it ended.
    if (halted && !failure && provider.name === 'LOCAL') {
      const tail = await provider.logTail?.(sandbox.providerSandboxId, 1_500).catch(() => null);
      const exit = provider.entryExit?.(sandbox.providerSandboxId);
      failure = `The sandbox's entry process ${exit ? describeEntryExit(exit) : 'exited while no server process watched it'}${
        tail?.trim() ? `; last lines of its log:\n${tail.trimEnd()}` : ''
      }`;
    }
    // With a failure (a LOCAL entry that exited on its own) the session fails with that reason.
    if ((gone || halted) && failure) await options.onFailed(sandbox.sessionId, failure);
    else if (gone || halted) await options.onProviderEnded?.(sandbox.sessionId);
    return { state, ended: gone || halted };
  }

  function track(work: Promise<void>): void {
    inFlight.add(work);
    work.finally(() => inFlight.delete(work)).catch(() => {});
  }

  /** Sessions this process handed to the job queue and has not yet seen finish (drain). */
  const handedOff = new Set<string>();

  return {
    /** Hands provisioning to the job queue (or runs it in the background without one). */
    async start(sessionId: string): Promise<void> {
      if (!options.jobs) {
        track(
          provision(sessionId).catch((error: unknown) => {
            log.error({ sessionId, err: error }, 'provisioning crashed');
          }),
        );
        return;
      }
      try {
        const requestId = options.requestScope?.current() ?? null;
        // The job written with the admission (resolvers/sessions/lifecycle.ts) may run now.
        if (await options.jobs.releaseProvision(sessionId, requestId)) {
          handedOff.add(sessionId);
          return;
        }
        await options.jobs.send(
          JOBS.provision,
          { sessionId, ...(requestId ? { requestId } : {}) },
          sessionId,
        );
        handedOff.add(sessionId);
      } catch (error) {
        // The recovery sweep enqueues it again (resolvers/sessions/recovery.ts).
        log.error({ sessionId, err: error }, 'could not enqueue provisioning');
      }
    },
    /** The job handler: one attempt (retryCount 0 = first). Throws to have the job retried. */
    async runProvisionJob(job: { id: string; retryCount: number; data: ProvisionJob }): Promise<void> {
      const attempt = () =>
        provision(job.data.sessionId, job.retryCount + 1, job.id, job.data.cutBranch === true);
      const { requestId } = job.data;
      const work =
        requestId && options.requestScope ? options.requestScope.run(requestId, attempt) : attempt();
      track(work.catch(() => undefined));
      try {
        await work;
      } catch (error) {
        await db.session
          .updateMany({
            where: { id: job.data.sessionId },
            data: { provisioningError: String((error as Error).message ?? error).slice(0, 2_000) },
          })
          .catch(() => undefined);
        throw error;
      } finally {
        handedOff.delete(job.data.sessionId);
      }
    },
    teardown,
    syncProviderState,
    /** Waits until provisioning this process started or handed off has finished (tests, benchmarks). */
    async drain(): Promise<void> {
      while (inFlight.size > 0 || handedOff.size > 0) {
        if (inFlight.size > 0) await Promise.allSettled([...inFlight]);
        else {
          // Handed-off jobs may run on another process: done once no job for them is pending.
          for (const sessionId of [...handedOff]) {
            const row = await db.session.findUnique({ where: { id: sessionId } });
            if (row?.status !== 'PROVISIONING' || row.provisioningPhase === 'STARTING') {
              handedOff.delete(sessionId);
              continue;
            }
            const pending = await options.jobs
              ?.history(JOBS.provision, sessionId)
              .then((jobs) =>
                jobs.some((j) => j.state === 'created' || j.state === 'retry' || j.state === 'active'),
              );
            if (!pending) handedOff.delete(sessionId);
          }
          if (handedOff.size > 0) await new Promise((r) => setTimeout(r, 50));
        }
      }
    },
  };
}
