// Snapshot resolution before a sandbox is created (R-IMG-3). The key is computed over the project's
// repository at the session's base commit (image/snapshot.ts); the Snapshot row keyed by
// (provider, key) is the build lock across sessions AND server processes: whoever inserts the
// BUILDING row builds, everyone else polls that row. The builder refreshes `heartbeatAt`; a BUILDING
// row whose heartbeat went stale (its process died) is taken over with a compare-and-set, and so is
// a FAILED row seen by a later session (the failure may have been a provider outage).
//
// The runtime layer comes in two sources (image/dockerfile.ts): `image` (COPY --from the runtime
// image) for builders that can pull another image, `package` (RUN steps, single-stage) for those
// that cannot — an adapter says so with `runtimeSource: 'package'` (E2B). The source is part of
// the key, so switching it rebuilds.
import {
  composeSandboxDockerfile,
  DEFAULT_BASE_IMAGE,
  dockerfileForImage,
  type RuntimeSource,
} from '../../image/dockerfile';
import { createGitTreeReader } from '../../image/repo-files';
import { computeSnapshotKey } from '../../image/snapshot';
import type { Snapshot } from '../../prisma/generated/client/client';
import { isUniqueViolation } from '../errors';
import type { Db } from '../platform';
import type { Logger } from '../platform';
import type { GitService, RepoRef } from '../git/git';
import type { HardwareSpec, SandboxProvider } from '../providers/types';

export interface SnapshotServiceOptions {
  db: Db;
  git: GitService;
  logger: Logger;
  /** Runtime version baked into images; part of every key. */
  runtimeVersion: string;
  /** Where `package`-source layers download the runtime tarball. @default image/dockerfile.ts's */
  runtimeBaseUrl?: string;
  /** Pinned SHA-256 of that tarball (else the published `.sha256` is checked); part of the key. */
  runtimeSha256?: string | null;
  /** How often a waiting session re-reads the BUILDING row. @default 500 */
  pollIntervalMs?: number;
  /** How often the builder refreshes `heartbeatAt`. @default 10_000 */
  heartbeatMs?: number;
  /** A BUILDING row whose heartbeat is older than this is taken over. @default 3 × heartbeatMs */
  staleAfterMs?: number;
  /** Longest a session waits for someone else's build. @default 3_600_000 */
  waitTimeoutMs?: number;
  /** How often a running build's output is written to its row. @default 1_000 */
  logFlushMs?: number;
}

/** How much of a builder's output a Snapshot row keeps (its end). */
const BUILD_LOG_TAIL = 16 * 1024;

export interface SnapshotPlan {
  key: string;
  /** The Dockerfile with the runtime layer appended: what the provider builds. */
  dockerfile: string;
  /** Context files that went into the key. */
  contextFiles: string[];
  runtimeSource: RuntimeSource;
  /** Repo-relative path of the template's Dockerfile; null for an image template or none. */
  dockerfilePath: string | null;
  /** The repository at the commit: the build context of builders that take it from us. */
  context: { gitDir: string; commit: string };
}

export interface ResolveSnapshotInput {
  provider: SandboxProvider;
  repo: RepoRef;
  /** The session's base commit: the image is built from the repository as the session sees it. */
  commit: string;
  template: { slug: string; dockerfile: string | null; image: string | null } | null;
  spec: HardwareSpec;
  /** Called once when the session has to wait for a build (its own or another's). */
  onPreparing: () => Promise<void>;
  /** @default 'image'; resolve() takes it from the provider. */
  runtimeSource?: RuntimeSource;
  /** @default true; resolve() takes it from the provider (SandboxProvider.packageFloor). */
  packageFloor?: boolean;
  /** @default image/dockerfile.ts's; resolve() takes it from the provider. */
  runtimeImage?: string;
}

/** An adapter whose image builder cannot `COPY --from` another image declares `'package'`. */
export function runtimeSourceOf(provider: SandboxProvider): RuntimeSource {
  return provider.runtimeSource ?? 'image';
}

export interface ResolvedSnapshot {
  snapshot: Snapshot;
  providerRef: string;
  /** True when this call ran the build. */
  built: boolean;
}

/** The provider cannot build this Dockerfile; the sandbox boots from its default image. */
export interface SkippedSnapshot {
  skipped: string;
}

/** Thrown when a build fails (or the Dockerfile cannot be composed); the message says what to fix. */
export class SnapshotBuildError extends Error {
  override name = 'SnapshotBuildError';
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

export type SnapshotService = ReturnType<typeof createSnapshotService>;

export function createSnapshotService(options: SnapshotServiceOptions) {
  const { db, git } = options;
  const log = options.logger.child({ module: 'snapshots' });
  const pollIntervalMs = options.pollIntervalMs ?? 500;
  const heartbeatMs = options.heartbeatMs ?? 10_000;
  const staleAfterMs = options.staleAfterMs ?? heartbeatMs * 3;
  const waitTimeoutMs = options.waitTimeoutMs ?? 3_600_000;
  const logFlushMs = options.logFlushMs ?? 1_000;

  /** Computes the key and the composed Dockerfile from the repository at `commit`. */
  async function plan(input: Omit<ResolveSnapshotInput, 'provider' | 'onPreparing'>): Promise<SnapshotPlan> {
    const mirrored = await git.fetchRef(input.repo, input.commit);
    if (!mirrored) throw new SnapshotBuildError(`commit ${input.commit} is no longer in the repository`);
    const reader = createGitTreeReader(mirrored.mirrorDir, mirrored.commit);
    try {
      let userDockerfile: string | null = null;
      let dockerfilePath: string | null = null;
      const template = input.template;
      if (template?.dockerfile) {
        dockerfilePath = template.dockerfile;
        const bytes = await reader.readFile(dockerfilePath);
        if (bytes === null) {
          throw new SnapshotBuildError(
            `${dockerfilePath} (template ${template.slug}) is not a file at ${mirrored.commit.slice(0, 12)}; commit it or fix the manifest`,
          );
        }
        userDockerfile = bytes.toString('utf8');
      } else if (template?.image) {
        userDockerfile = dockerfileForImage(template.image);
      }
      const runtimeSource = input.runtimeSource ?? 'image';
      const runtimeSha256 = options.runtimeSha256 ?? null;
      const keyed = await computeSnapshotKey({
        dockerfile: userDockerfile ?? `FROM ${DEFAULT_BASE_IMAGE}\n`,
        dockerfilePath,
        spec: input.spec,
        runtimeVersion: options.runtimeVersion,
        runtimeSource,
        runtimeSha256,
        ...(input.packageFloor === false ? { packageFloor: false } : {}),
        ...(input.runtimeImage ? { runtimeImage: input.runtimeImage } : {}),
        files: reader,
      });
      const composed = composeSandboxDockerfile(userDockerfile, {
        runtimeVersion: options.runtimeVersion,
        runtimeSource,
        ...(options.runtimeBaseUrl ? { runtimeBaseUrl: options.runtimeBaseUrl } : {}),
        runtimeSha256,
        ...(input.packageFloor === false ? { packageFloor: false } : {}),
        ...(input.runtimeImage ? { runtimeImage: input.runtimeImage } : {}),
      });
      if (!composed.ok) {
        throw new SnapshotBuildError(
          `${dockerfilePath ?? 'the template image'}${template ? ` (template ${template.slug})` : ''}: ${composed.error}`,
        );
      }
      return {
        key: keyed.key,
        dockerfile: composed.dockerfile,
        contextFiles: keyed.contextFiles,
        runtimeSource,
        dockerfilePath,
        context: { gitDir: mirrored.mirrorDir, commit: mirrored.commit },
      };
    } finally {
      reader.close();
    }
  }

  async function build(
    row: Snapshot,
    provider: SandboxProvider,
    planned: SnapshotPlan,
    spec: HardwareSpec,
  ): Promise<ResolvedSnapshot> {
    const buildSnapshot = provider.buildSnapshot?.bind(provider);
    if (!buildSnapshot) throw new SnapshotBuildError(`${provider.name} cannot build images`);
    // The builder's output: its tail is stored with the row (PREPARING_IMAGE shows it), written at
    // most every logFlushMs while the build runs and once at its end.
    let buildLog = '';
    let logDirty = false;
    const flushLog = async () => {
      if (!logDirty) return;
      logDirty = false;
      await db.snapshot
        .updateMany({ where: { id: row.id, status: 'BUILDING' }, data: { buildLog } })
        .catch((error: unknown) => log.warn({ err: error, snapshotId: row.id }, 'build log write failed'));
    };
    const logTimer = setInterval(() => void flushLog(), logFlushMs);
    logTimer.unref();
    const onLog = (line: string) => {
      buildLog = `${buildLog}${line.endsWith('\n') ? line : `${line}\n`}`.slice(-BUILD_LOG_TAIL);
      logDirty = true;
    };
    const heartbeat = setInterval(() => {
      void db.snapshot
        .updateMany({ where: { id: row.id, status: 'BUILDING' }, data: { heartbeatAt: new Date() } })
        .catch((error: unknown) => log.warn({ err: error, snapshotId: row.id }, 'heartbeat failed'));
    }, heartbeatMs);
    heartbeat.unref();
    try {
      const providerRef = await buildSnapshot({
        key: planned.key,
        dockerfile: planned.dockerfile,
        spec,
        context: planned.context,
        onLog,
      });
      const snapshot = await db.snapshot.update({
        where: { id: row.id },
        data: {
          status: 'ACTIVE',
          providerRef,
          builtAt: new Date(),
          error: null,
          ...(buildLog ? { buildLog } : {}),
        },
      });
      log.info({ snapshotId: row.id, provider: provider.name, key: planned.key }, 'snapshot built');
      return { snapshot, providerRef, built: true };
    } catch (error) {
      const message = `Image build on ${provider.name} failed: ${(error as Error).message}`;
      await db.snapshot
        .update({
          where: { id: row.id },
          data: { status: 'FAILED', error: message.slice(0, 2_000), ...(buildLog ? { buildLog } : {}) },
        })
        .catch(() => undefined);
      throw new SnapshotBuildError(message, { cause: error });
    } finally {
      clearInterval(heartbeat);
      clearInterval(logTimer);
    }
  }

  /** Claims a FAILED or stale BUILDING row for this process; true when the compare-and-set won. */
  async function takeOver(row: Snapshot): Promise<boolean> {
    const now = new Date();
    const { count } = await db.snapshot.updateMany({
      where: { id: row.id, status: row.status, heartbeatAt: row.heartbeatAt },
      data: { status: 'BUILDING', heartbeatAt: now, error: null, createdAt: now },
    });
    return count === 1;
  }

  return {
    plan,

    /**
     * The snapshot to boot from, building it exactly once per (provider, key); null for providers
     * without images (LOCAL).
     */
    async resolve(input: ResolveSnapshotInput): Promise<ResolvedSnapshot | SkippedSnapshot | null> {
      const { provider } = input;
      if (provider.name === 'LOCAL' || !provider.buildSnapshot) return null;
      const planned = await plan({
        ...input,
        runtimeSource: input.runtimeSource ?? runtimeSourceOf(provider),
        ...(provider.packageFloor === false ? { packageFloor: false } : {}),
        ...(provider.runtimeImage ? { runtimeImage: provider.runtimeImage } : {}),
      });
      const unsupported = provider.snapshotUnsupportedReason?.(planned.dockerfile) ?? null;
      if (unsupported) {
        const what = input.template
          ? ` for template ${input.template.slug}${planned.dockerfilePath ? ` (${planned.dockerfilePath})` : ''}`
          : '';
        return {
          skipped: `${provider.name}: no per-project image${what}: ${unsupported}; booted from the provider's default image`,
        };
      }
      const where = { provider_key: { provider: provider.name, key: planned.key } };
      const deadline = Date.now() + waitTimeoutMs;
      let preparing = false;
      const prepare = async () => {
        if (preparing) return;
        preparing = true;
        await input.onPreparing();
      };
      let sawBuilding = false;
      for (;;) {
        const row = await db.snapshot.findUnique({ where });
        if (!row) {
          let created: Snapshot | null = null;
          try {
            created = await db.snapshot.create({
              data: {
                provider: provider.name,
                key: planned.key,
                status: 'BUILDING',
                cpu: input.spec.cpu,
                memoryGiB: input.spec.memoryGiB,
                diskGiB: input.spec.diskGiB,
                runtimeVersion: options.runtimeVersion,
              },
            });
          } catch (error) {
            if (!isUniqueViolation(error)) throw error;
          }
          if (created) {
            await prepare();
            return build(created, provider, planned, input.spec);
          }
          continue;
        }
        if (row.status === 'ACTIVE' && row.providerRef) {
          return { snapshot: row, providerRef: row.providerRef, built: false };
        }
        if (row.status === 'FAILED') {
          // A build this session waited for failed: report it rather than rebuild in lockstep.
          if (sawBuilding) throw new SnapshotBuildError(row.error ?? 'the image build failed');
          if (await takeOver(row)) {
            await prepare();
            return build({ ...row, status: 'BUILDING' }, provider, planned, input.spec);
          }
          continue;
        }
        // BUILDING by someone else.
        sawBuilding = true;
        if (Date.now() - row.heartbeatAt.getTime() > staleAfterMs && (await takeOver(row))) {
          log.warn({ snapshotId: row.id }, 'taking over a stale image build');
          await prepare();
          return build({ ...row, status: 'BUILDING' }, provider, planned, input.spec);
        }
        await prepare();
        if (Date.now() > deadline) {
          throw new SnapshotBuildError(
            `waited ${Math.round(waitTimeoutMs / 1000)} s for the image build of ${planned.key.slice(0, 12)}`,
          );
        }
        await sleep(pollIntervalMs);
      }
    },
  };
}
