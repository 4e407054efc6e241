// The execution lease, server side (R-LEASE-1…4). One ExecutionLease row per sandbox carries a
// fencing `generation`: every transition from "not held" to "held" (first acquire, acquire after a
// release or an expiry, a restarted daemon taking over) moves it on, so anyone holding an older
// generation — a stale daemon or a reaper that read the row earlier — is fenced out. Renewals of a
// live lease keep the generation and also touch the provider's own inactivity timer.
//
// Every state change is one SQL statement (row locks + ON CONFLICT), so it is atomic against the
// reaper's fencing update on any number of server processes, on PostgreSQL and PGlite alike.
import { type ExecutionLease, Prisma } from '../../prisma/generated/client/client';
import type { Db } from '../platform';
import type { Logger } from '../platform';
import {
  ConflictError,
  LeaseFencedError,
  NotFoundError,
  ValidationError,
  forbidden,
  isUniqueViolation,
} from '../errors';
import { parseId } from '../ids';
import type { Principal, SandboxPrincipal } from '../auth/principal';
import { decide } from '../auth/policy';
import type { ProviderRegistry } from '../providers/registry';
import type { ProviderName } from '../providers/types';

/** `holder` of a lease the idle reaper has fenced; the suffix is the stop reason it will record. */
export const REAPER_HOLDER_PREFIX = 'reaper:';

/** A lease keeps its sandbox alive while it is neither released nor expired (R-LEASE-1, R-LEASE-3). */
export function isLeaseLive(
  lease: Pick<ExecutionLease, 'releasedAt' | 'expiresAt'>,
  now = Date.now(),
): boolean {
  return lease.releasedAt === null && lease.expiresAt.getTime() > now;
}
const DAEMON_HOLDER = 'daemon';
/** The key a daemon gives one acquire and repeats on that acquire's retries. */
const ACQUISITION_KEY = /^[A-Za-z0-9_-]{1,64}$/;

export interface LeaseServiceOptions {
  db: Db;
  providers: ProviderRegistry;
  logger: Logger;
  /** How long a lease lives without renewal (R-LEASE-3: well above the daemon's 60 s). */
  leaseTtlMs: number;
  /** Upper bound for the provider keepAlive call made with each renewal. @default 10_000 */
  keepAliveTimeoutMs?: number;
  /** Clock (tests). @default Date.now */
  now?: () => number;
}

export type LeaseService = ReturnType<typeof createLeaseService>;

type LeaseRow = ExecutionLease & { provider: ProviderName; providerSandboxId: string | null };

/** The caller must be the sandbox token of exactly this session (R-AUTH-4). */
export function assertOwnSession(principal: Principal | null, sessionId: string): SandboxPrincipal {
  const decision = decide(principal, 'daemon.lease', { sessionId });
  // A missing credential reads as the others do: this call is the sandbox token's.
  if (!decision.allowed)
    throw forbidden(principal ? decision.message : 'Only the sandbox token of this session can do this.');
  return principal as SandboxPrincipal;
}

export function createLeaseService(options: LeaseServiceOptions) {
  const { db, providers } = options;
  const log = options.logger.child({ module: 'leases' });
  const now = options.now ?? Date.now;
  const keepAliveTimeoutMs = options.keepAliveTimeoutMs ?? 10_000;

  async function keepAlive(row: LeaseRow): Promise<void> {
    if (!row.providerSandboxId) return;
    let timer: NodeJS.Timeout | undefined;
    try {
      const provider = providers.get(row.provider);
      await Promise.race([
        provider.keepAlive(row.providerSandboxId),
        new Promise((_, reject) => {
          timer = setTimeout(
            () => reject(new Error(`keepAlive timed out after ${keepAliveTimeoutMs} ms`)),
            keepAliveTimeoutMs,
          );
        }),
      ]);
    } catch (error) {
      // The lease itself is what protects the sandbox from our reaper; a provider hiccup must not
      // fail the renewal (the next one retries the touch).
      log.warn({ sandboxId: row.sandboxId, provider: row.provider, err: error }, 'provider keepAlive failed');
    } finally {
      clearTimeout(timer);
    }
  }

  /** Explains why an acquire/renew/release statement changed nothing. */
  async function refusal(sessionId: string, sandboxId: string, generation: number | null): Promise<Error> {
    const session = await db.session.findUnique({
      where: { id: sessionId },
      select: { status: true, sandbox: { select: { id: true } } },
    });
    if (!session?.sandbox || session.sandbox.id !== sandboxId) {
      return new NotFoundError('This session has no sandbox.', ['input', 'sessionId']);
    }
    if (session.status !== 'RUNNING' && session.status !== 'PROVISIONING') {
      return new ConflictError(`The session is ${session.status}; its lease cannot be held.`, [
        'input',
        'sessionId',
      ]);
    }
    const lease = await db.executionLease.findUnique({ where: { sandboxId } });
    if (lease?.holder?.startsWith(REAPER_HOLDER_PREFIX)) {
      return new ConflictError('The idle reaper is stopping this sandbox; the lease cannot be acquired.', [
        'input',
        'sessionId',
      ]);
    }
    if (lease && generation !== null && lease.generation === generation) {
      return new LeaseFencedError(
        `Lease generation ${generation} expired at ${lease.expiresAt.toISOString()}; acquire a new generation (omit generation).`,
        ['input', 'generation'],
      );
    }
    return new LeaseFencedError(
      `Lease generation ${generation ?? 'none'} is not current (current: ${lease?.generation ?? 'none'}); acquire a new generation (omit generation).`,
      ['input', 'generation'],
    );
  }

  return {
    /**
     * renewLease: generation omitted, or the lease released → acquire (generation + 1); given and
     * current and unexpired → extend; otherwise LeaseFencedError. Touches the provider.
     *
     * An acquire is safe to retry when it carries an `acquisition` key: if an earlier attempt with
     * the same key took the lease and it is still live, the retry extends that generation instead
     * of moving it on (a daemon whose acquire timed out after the server applied it would otherwise
     * fence itself out of the lease it holds). The key is ignored when a generation is given.
     */
    async renew(
      principal: Principal | null,
      input: { sessionId: string; generation?: number | null; acquisition?: string | null },
    ): Promise<ExecutionLease> {
      const sessionId = parseId(input.sessionId, 'Session', ['input', 'sessionId']);
      const sandbox = assertOwnSession(principal, sessionId);
      const generation = input.generation ?? null;
      if (generation !== null && (!Number.isInteger(generation) || generation < 1)) {
        throw new ValidationError('generation must be a positive integer.', ['input', 'generation']);
      }
      const acquisition = input.acquisition ?? null;
      if (acquisition !== null && !ACQUISITION_KEY.test(acquisition)) {
        throw new ValidationError('acquisition must be 1–64 letters, digits, "-" or "_".', [
          'input',
          'acquisition',
        ]);
      }
      const holder = acquisition === null ? DAEMON_HOLDER : `${DAEMON_HOLDER}:${acquisition}`;
      const at = new Date(now());
      const expiresAt = new Date(at.getTime() + options.leaseTtlMs);
      // renewable: the caller's generation, still held and unexpired. kept: the lease stays as it
      // is — renewable, or acquired again with the key of the acquire that took it (a retry whose
      // first attempt was applied) while it is held and unexpired. acquirable: no generation given or
      // the lease released — unless the reaper has fenced it for a stop. Anything acquirable and not
      // kept moves the generation on.
      const live = Prisma.sql`(l."releasedAt" IS NULL AND l."expiresAt" > ${at})`;
      const renewable =
        generation === null
          ? Prisma.sql`FALSE`
          : Prisma.sql`(${live} AND l."generation" = ${generation}::int)`;
      const kept =
        generation === null && acquisition !== null
          ? Prisma.sql`(${live} AND l."holder" = ${holder})`
          : renewable;
      const acquirable =
        generation === null ? Prisma.sql`TRUE` : Prisma.sql`(${renewable} OR l."releasedAt" IS NOT NULL)`;
      const upsert = () => db.$queryRaw<LeaseRow[]>`
        WITH lease AS (
          INSERT INTO "ExecutionLease" AS l
            ("id", "sessionId", "sandboxId", "generation", "holder", "acquiredAt", "renewedAt", "expiresAt", "releasedAt")
          SELECT gen_random_uuid(), sb."sessionId", sb."id", 1, ${holder}, ${at}, ${at}, ${expiresAt}, NULL
          FROM "Sandbox" sb JOIN "Session" s ON s."id" = sb."sessionId"
          WHERE sb."id" = ${sandbox.sandboxId}::uuid AND s."id" = ${sessionId}::uuid
            AND s."status" IN ('PROVISIONING', 'RUNNING')
          ON CONFLICT ("sandboxId") DO UPDATE SET
            "generation" = CASE WHEN ${kept} THEN l."generation" ELSE l."generation" + 1 END,
            "acquiredAt" = CASE WHEN ${kept} THEN l."acquiredAt" ELSE ${at} END,
            "holder" = CASE WHEN ${kept} THEN l."holder" ELSE ${holder} END,
            "renewedAt" = ${at},
            "expiresAt" = ${expiresAt},
            "releasedAt" = NULL
          WHERE (l."holder" IS NULL OR l."holder" NOT LIKE ${`${REAPER_HOLDER_PREFIX}%`})
            AND ${acquirable}
          RETURNING l.*
        ),
        touched AS (
          UPDATE "Sandbox" sb SET "lastActivityAt" = ${at}
          FROM lease WHERE sb."id" = lease."sandboxId"
          RETURNING sb."id", sb."provider", sb."providerSandboxId"
        )
        SELECT lease.*, touched."provider", touched."providerSandboxId"
        FROM lease JOIN touched ON touched."id" = lease."sandboxId"`;
      // Two first inserts for one sandbox (this and the reaper's fence) can both pass ON CONFLICT's
      // check and collide on the session key instead; run again, the row is then there to update.
      const rows = await upsert().catch((error: unknown) => {
        if (!isUniqueViolation(error)) throw error;
        return upsert();
      });
      const row = rows[0];
      if (!row) throw await refusal(sessionId, sandbox.sandboxId, generation);
      await keepAlive(row);
      const { provider: _p, providerSandboxId: _s, ...lease } = row;
      return lease;
    },

    /** releaseLease: the turn ended. Releasing an already released generation answers it again. */
    async release(
      principal: Principal | null,
      input: { sessionId: string; generation: number },
    ): Promise<ExecutionLease> {
      const sessionId = parseId(input.sessionId, 'Session', ['input', 'sessionId']);
      const sandbox = assertOwnSession(principal, sessionId);
      const at = new Date(now());
      const rows = await db.$queryRaw<ExecutionLease[]>`
        WITH lease AS (
          UPDATE "ExecutionLease" l SET "releasedAt" = ${at}
          WHERE l."sandboxId" = ${sandbox.sandboxId}::uuid AND l."generation" = ${input.generation}::int
            AND l."releasedAt" IS NULL
          RETURNING l.*
        ),
        touched AS (
          UPDATE "Sandbox" sb SET "lastActivityAt" = ${at}
          FROM lease WHERE sb."id" = lease."sandboxId"
          RETURNING sb."id"
        )
        SELECT lease.* FROM lease LEFT JOIN touched ON touched."id" = lease."sandboxId"`;
      if (rows[0]) return rows[0];
      const current = await db.executionLease.findUnique({ where: { sandboxId: sandbox.sandboxId } });
      if (current && current.generation === input.generation && current.releasedAt) return current;
      throw await refusal(sessionId, sandbox.sandboxId, input.generation);
    },
  };
}
