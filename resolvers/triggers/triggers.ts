// Triggers (R-TRIG-1, R-SES-3): a WEBHOOK or SCHEDULE that creates a session exactly as
// createSession does (admission, branch cut from baseRef at fire time), recording every firing as a
// run: SESSION_CREATED with the session, SKIPPED_LIMIT or FAILED with the reason.
//
// Webhooks carry `X-SingulaComp-Timestamp: <Unix seconds>` and `X-Hub-Signature-256: sha256=<hex>`,
// the hex HMAC-SHA256 (key: the trigger's secret) of `<timestamp>.<raw body>`. A delivery is
// accepted only while its signed timestamp is within ±webhookToleranceSeconds of the server's clock,
// and its signature is claimed in a replay store (TriggerWebhookDelivery) before the session is
// created, so the same signed request never fires twice. Outside the window a replay is refused as
// stale anyway, so each accepted delivery prunes signatures signed more than two tolerances ago (one
// window plus a margin for requests in flight and clocks of other processes): the store holds at
// most the deliveries of that span, however long the trigger lives. The timestamp is required: a
// body-only signature (GitHub's own deliveries) has no time, so refusing its replays would mean
// remembering it forever.
//
// Schedules use croner (maintained, dependency-free, seconds and time zones; evaluated in UTC): each
// process polls for due triggers and advances `nextFireAt` by compare-and-set, and the (trigger,
// scheduledFor) unique index backs it up, so a due time fires once across the fleet.
import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import { Cron } from 'croner';
import { GraphQLError } from 'graphql';
import type { Trigger, TriggerKind, TriggerRun } from '../../prisma/generated/client/client';
import type { Db } from '../platform';
import type { Logger } from '../platform';
import { assertCanReadProject, assertCanWriteProject } from '../auth/authz';
import { decrypt, encrypt } from '../auth/crypto';
import { type Principal, type UserPrincipal, userOf } from '../auth/principal';
import { can } from '../auth/policy';
import { ConflictError, DomainError, NotFoundError, ValidationError, isUniqueViolation } from '../errors';
import { parseId } from '../ids';
import type { SessionLifecycle } from '../sessions/lifecycle';
import { requireRefName, requireText } from '../validate';

export const SIGNATURE_HEADER = 'x-hub-signature-256';
export const TIMESTAMP_HEADER = 'x-singulacomp-timestamp';
const SIGNATURE_HEADER_NAME = 'X-Hub-Signature-256';
const TIMESTAMP_HEADER_NAME = 'X-SingulaComp-Timestamp';
/** Default acceptance window of a delivery's signed timestamp, either side of the server's clock. */
export const DEFAULT_WEBHOOK_TOLERANCE_SECONDS = 300;

export interface TriggerInput {
  name?: string | null;
  schedule?: string | null;
  prompt?: string | null;
  baseRef?: string | null;
  templateSlug?: string | null;
  agent?: string | null;
}

export interface TriggerServiceOptions {
  db: Db;
  sessions: SessionLifecycle;
  logger: Logger;
  encryptionKey: Buffer;
  /** How often to look for due schedules. @default 5_000 */
  tickMs?: number;
  /** Shortest interval between two firings of a schedule; finer schedules are refused. @default 60 */
  minIntervalSeconds?: number;
  /** How far a delivery's signed timestamp may be from now, either way. @default 300 */
  webhookToleranceSeconds?: number;
  now?: () => Date;
}

/** What happened to a webhook delivery; the HTTP answer's `code`. */
export type WebhookCode =
  | 'SESSION_CREATED'
  | 'TRIGGER_NOT_FOUND'
  | 'TIMESTAMP_MISSING'
  | 'SIGNATURE_INVALID'
  | 'TIMESTAMP_OUTSIDE_WINDOW'
  | 'TRIGGER_PAUSED'
  | 'REPLAYED'
  | 'CONCURRENT_SESSION_LIMIT'
  | 'FIRING_FAILED';

/** The outcome of a webhook delivery, for the HTTP answer. */
export interface WebhookOutcome {
  status: 202 | 401 | 404 | 409 | 429 | 422;
  code: WebhookCode;
  message: string;
  run: TriggerRun | null;
}

/** A delivery as received: the two headers (absent: undefined) and the raw body. */
export interface WebhookDelivery {
  signature: string | undefined;
  timestamp: string | undefined;
  body: Buffer;
}

export type TriggerService = ReturnType<typeof createTriggerService>;

function nextRun(schedule: string, after: Date): Date | null {
  return new Cron(schedule, { timezone: 'UTC', paused: true }).nextRun(after);
}

/**
 * The shortest gap, in seconds, between the schedule's next firings. Firings closer than a minute
 * come from a seconds field (croner reads a sixth field as seconds first) naming several seconds,
 * and those fire back to back within one minute: among the next five firings there is always a
 * whole firing minute, so the closest pair shows.
 */
export function shortestIntervalSeconds(schedule: string, from: Date): number {
  const runs = new Cron(schedule, { timezone: 'UTC', paused: true }).nextRuns(5, from);
  let shortest = Number.POSITIVE_INFINITY;
  for (let i = 1; i < runs.length; i++) {
    shortest = Math.min(shortest, (runs[i]!.getTime() - runs[i - 1]!.getTime()) / 1000);
  }
  return shortest;
}

/** `sha256=<hex>` of HMAC-SHA256(secret, `<timestamp>.<body>`), the X-Hub-Signature-256 value. */
export function signWebhook(secret: string, timestamp: number | string, body: Buffer | string): string {
  return `sha256=${createHmac('sha256', secret).update(`${timestamp}.`).update(body).digest('hex')}`;
}

export function createTriggerService(options: TriggerServiceOptions) {
  const { db, sessions } = options;
  const log = options.logger.child({ module: 'triggers' });
  const now = options.now ?? (() => new Date());
  const toleranceSeconds = options.webhookToleranceSeconds ?? DEFAULT_WEBHOOK_TOLERANCE_SECONDS;
  const minIntervalSeconds = options.minIntervalSeconds ?? 60;
  let timer: NodeJS.Timeout | null = null;
  let ticking: Promise<void> | null = null;

  function validate(kind: TriggerKind, input: TriggerInput, partial: boolean) {
    const data: Record<string, string | null | Date> = {};
    if (input.name != null || !partial)
      data.name = requireText(input.name ?? '', ['input', 'name'], { max: 100 });
    if (input.prompt != null) data.prompt = requireText(input.prompt, ['input', 'prompt'], { max: 100_000 });
    if (input.baseRef != null) data.baseRef = requireRefName(input.baseRef, ['input', 'baseRef']);
    if (input.templateSlug != null)
      data.templateSlug = requireText(input.templateSlug, ['input', 'templateSlug'], { max: 200 });
    if (input.agent != null) data.agent = requireText(input.agent, ['input', 'agent'], { max: 64 });
    if (kind === 'SCHEDULE' && (input.schedule != null || !partial)) {
      const schedule = requireText(input.schedule ?? '', ['input', 'schedule'], { max: 200 });
      let next: Date | null;
      try {
        next = nextRun(schedule, now());
      } catch (error) {
        throw new ValidationError(`schedule is not a valid cron expression: ${(error as Error).message}`, [
          'input',
          'schedule',
        ]);
      }
      if (!next) throw new ValidationError('schedule never fires.', ['input', 'schedule']);
      if (shortestIntervalSeconds(schedule, now()) < minIntervalSeconds) {
        throw new ValidationError(
          minIntervalSeconds === 60
            ? 'schedule fires more often than once a minute; use a 5-field cron expression (minute hour day-of-month month day-of-week), e.g. "*/5 * * * *".'
            : `schedule fires more often than once every ${minIntervalSeconds} s; choose a coarser cron expression.`,
          ['input', 'schedule'],
        );
      }
      data.schedule = schedule;
      data.nextFireAt = next;
    } else if (kind === 'WEBHOOK' && input.schedule != null) {
      throw new ValidationError('A WEBHOOK trigger has no schedule.', ['input', 'schedule']);
    }
    return data;
  }

  async function loadFor(principal: Principal, id: string, write: boolean): Promise<Trigger> {
    const triggerId = parseId(id, 'Trigger', ['input', 'triggerId']);
    const trigger = await db.trigger.findUnique({ where: { id: triggerId } });
    if (!trigger || trigger.accountId !== principal.accountId) {
      throw new NotFoundError('No trigger with that id.', ['input', 'triggerId']);
    }
    if (write) assertCanWriteProject(principal, trigger, 'sessions:write');
    else assertCanReadProject(principal, { id: trigger.projectId, accountId: trigger.accountId });
    return trigger;
  }

  /** The principal a firing acts as: the trigger's creator, limited to creating sessions. */
  function firingPrincipal(trigger: Trigger): UserPrincipal {
    return {
      kind: 'USER',
      userId: trigger.userId ?? '',
      accountId: trigger.accountId,
      isAdmin: false,
      scopes: new Set(['sessions:write']),
      tokenId: `trigger:${trigger.id}`,
      expiresAt: null,
    };
  }

  /** Creates the session for a claimed run and records the outcome on it. */
  async function fire(trigger: Trigger, runId: string): Promise<TriggerRun> {
    try {
      const session = await sessions.create(firingPrincipal(trigger), {
        projectId: trigger.projectId,
        baseRef: trigger.baseRef,
        templateSlug: trigger.templateSlug,
        prompt: trigger.prompt,
        agent: trigger.agent,
      });
      log.info({ triggerId: trigger.id, sessionId: session.id }, 'trigger created a session');
      return db.triggerRun.update({
        where: { id: runId },
        data: { status: 'SESSION_CREATED', sessionId: session.id, reason: null },
      });
    } catch (error) {
      const limited = error instanceof GraphQLError && error.extensions.code === 'CONCURRENT_SESSION_LIMIT';
      const reason =
        error instanceof GraphQLError || error instanceof DomainError
          ? error.message
          : `unexpected failure: ${(error as Error).message}`;
      log.warn({ triggerId: trigger.id, err: error, limited }, 'trigger firing created no session');
      return db.triggerRun.update({
        where: { id: runId },
        data: { status: limited ? 'SKIPPED_LIMIT' : 'FAILED', reason: reason.slice(0, 2_000) },
      });
    }
  }

  async function tick(): Promise<void> {
    const due = await db.trigger.findMany({
      where: { kind: 'SCHEDULE', paused: false, nextFireAt: { lte: now() } },
      orderBy: { nextFireAt: 'asc' },
      take: 20,
    });
    for (const trigger of due) {
      const scheduledFor = trigger.nextFireAt!;
      // Never closer than the minimum interval, even for a schedule stored before finer ones were refused.
      const after = new Date(
        Math.max(now().getTime(), scheduledFor.getTime() + (minIntervalSeconds - 1) * 1000),
      );
      const next = trigger.schedule ? nextRun(trigger.schedule, after) : null;
      // Compare-and-set: of all processes that saw this due time, exactly one advances it.
      const { count } = await db.trigger.updateMany({
        where: { id: trigger.id, nextFireAt: scheduledFor, paused: false },
        data: { nextFireAt: next },
      });
      if (count === 0) continue;
      let run: TriggerRun;
      try {
        run = await db.triggerRun.create({
          data: { triggerId: trigger.id, status: 'FAILED', reason: 'firing', scheduledFor },
        });
      } catch {
        continue; // already fired for this time
      }
      await fire(trigger, run.id);
    }
  }

  return {
    loadFor,

    async create(
      principal: Principal,
      input: TriggerInput & { projectId: string; kind: TriggerKind },
    ): Promise<{ trigger: Trigger; webhookSecret: string | null }> {
      const projectId = parseId(input.projectId, 'Project', ['input', 'projectId']);
      const project = await db.project.findUnique({ where: { id: projectId } });
      if (!project || project.accountId !== principal.accountId) {
        throw new NotFoundError('No project with that id in your account.', ['input', 'projectId']);
      }
      assertCanWriteProject(principal, project, 'sessions:write');
      const owner = userOf(principal);
      if (!can(principal, 'trigger.own') || owner === null)
        throw new ValidationError('Only users can own triggers.', ['input']);
      const data = validate(input.kind, input, false);
      const webhookSecret = input.kind === 'WEBHOOK' ? randomBytes(32).toString('hex') : null;
      const existing = await db.trigger.findUnique({
        where: { projectId_name: { projectId, name: data.name as string } },
      });
      if (existing)
        throw new ConflictError('A trigger with that name exists in this project.', ['input', 'name']);
      const trigger = await db.trigger.create({
        data: {
          ...data,
          name: data.name as string,
          kind: input.kind,
          accountId: project.accountId,
          projectId,
          userId: owner,
          webhookSecretEnc: webhookSecret ? encrypt(options.encryptionKey, webhookSecret) : null,
        },
      });
      return { trigger, webhookSecret };
    },

    async update(principal: Principal, input: TriggerInput & { triggerId: string }): Promise<Trigger> {
      const trigger = await loadFor(principal, input.triggerId, true);
      return db.trigger.update({ where: { id: trigger.id }, data: validate(trigger.kind, input, true) });
    },

    async setPaused(principal: Principal, input: { triggerId: string; paused: boolean }): Promise<Trigger> {
      const trigger = await loadFor(principal, input.triggerId, true);
      // A trigger whose owner was removed fires as whoever resumes it (a user: sessions have an owner).
      let userId = trigger.userId;
      if (!input.paused && userId === null) {
        const owner = userOf(principal);
        if (!can(principal, 'trigger.own') || owner === null) {
          throw new ValidationError(
            'This trigger lost its owner (a removed member); a user resumes it and its firings then act as that user.',
            ['input', 'triggerId'],
          );
        }
        userId = owner;
      }
      const nextFireAt =
        !input.paused && trigger.kind === 'SCHEDULE' && trigger.schedule
          ? nextRun(trigger.schedule, now())
          : trigger.nextFireAt;
      return db.trigger.update({
        where: { id: trigger.id },
        data: { paused: input.paused, nextFireAt, userId },
      });
    },

    async remove(principal: Principal, input: { triggerId: string }): Promise<Trigger> {
      const trigger = await loadFor(principal, input.triggerId, true);
      await db.trigger.delete({ where: { id: trigger.id } });
      return trigger;
    },

    /**
     * A webhook delivery: check the timestamp's form, the signature over `<timestamp>.<body>`, the
     * window, then claim the signature against replays and fire. A firing is recorded as a run; a
     * refused delivery only counts on the trigger (refusedDeliveries, lastRefusedAt, lastRefusedCode).
     */
    async deliver(triggerId: string, delivery: WebhookDelivery): Promise<WebhookOutcome> {
      const trigger = /^[0-9a-f-]{36}$/i.test(triggerId)
        ? await db.trigger.findUnique({ where: { id: triggerId.toLowerCase() } })
        : null;
      if (trigger?.kind !== 'WEBHOOK' || !trigger.webhookSecretEnc) {
        return {
          status: 404,
          code: 'TRIGGER_NOT_FOUND',
          message: 'No webhook trigger at this URL.',
          run: null,
        };
      }
      // A refusal writes no row: anyone who knows the URL can send deliveries, so they are counted on
      // the trigger (one row updated in place) instead of recorded as a run each.
      const refuse = async (
        status: WebhookOutcome['status'],
        code: WebhookCode,
        reason: string,
      ): Promise<WebhookOutcome> => {
        await db.trigger.updateMany({
          where: { id: trigger.id },
          data: { refusedDeliveries: { increment: 1 }, lastRefusedAt: now(), lastRefusedCode: code },
        });
        return { status, code, message: reason, run: null };
      };
      const timestamp = delivery.timestamp?.trim() ?? '';
      if (!/^\d{1,12}$/.test(timestamp)) {
        return refuse(
          401,
          'TIMESTAMP_MISSING',
          `Missing or malformed ${TIMESTAMP_HEADER_NAME} header: send the Unix time in seconds and sign "<timestamp>.<body>".`,
        );
      }
      const expected = Buffer.from(
        signWebhook(decrypt(options.encryptionKey, trigger.webhookSecretEnc), timestamp, delivery.body),
      );
      const given = Buffer.from(delivery.signature ?? '');
      if (given.length !== expected.length || !timingSafeEqual(given, expected)) {
        return refuse(
          401,
          'SIGNATURE_INVALID',
          `Bad or missing ${SIGNATURE_HEADER_NAME} signature (HMAC-SHA256 of "<timestamp>.<body>").`,
        );
      }
      const signedAt = Number(timestamp);
      const nowSeconds = Math.floor(now().getTime() / 1000);
      const skew = nowSeconds - signedAt;
      if (Math.abs(skew) > toleranceSeconds) {
        return refuse(
          401,
          'TIMESTAMP_OUTSIDE_WINDOW',
          `${TIMESTAMP_HEADER_NAME} is ${Math.abs(skew)} s in the ${skew > 0 ? 'past' : 'future'}; deliveries are accepted within ${toleranceSeconds} s of the server's clock.`,
        );
      }
      if (trigger.paused) return refuse(409, 'TRIGGER_PAUSED', 'The trigger is paused.');
      // A signature signed before the window's start can no longer pass it: forget it. The cutoff is
      // one more tolerance back, so a replay that passed the window check a moment ago in this or
      // another process (whose clock may differ a little) still finds its signature here.
      await db.triggerWebhookDelivery.deleteMany({
        where: { signedAt: { lt: new Date((nowSeconds - 2 * toleranceSeconds) * 1000) } },
      });
      let claimed: TriggerRun;
      try {
        // One transaction: the signature is claimed exactly when the run that fires it exists.
        [, claimed] = await db.$transaction([
          db.triggerWebhookDelivery.create({
            data: {
              triggerId: trigger.id,
              signature: delivery.signature!,
              signedAt: new Date(signedAt * 1000),
            },
          }),
          db.triggerRun.create({ data: { triggerId: trigger.id, status: 'FAILED', reason: 'firing' } }),
        ]);
      } catch (error) {
        if (!isUniqueViolation(error)) throw error;
        return refuse(409, 'REPLAYED', 'Replayed delivery: this signed request was already received.');
      }
      const run = await fire(trigger, claimed.id);
      if (run.status === 'SESSION_CREATED')
        return { status: 202, code: 'SESSION_CREATED', message: 'Session created.', run };
      return run.status === 'SKIPPED_LIMIT'
        ? { status: 429, code: 'CONCURRENT_SESSION_LIMIT', message: run.reason ?? run.status, run }
        : { status: 422, code: 'FIRING_FAILED', message: run.reason ?? run.status, run };
    },

    tick,

    start(): void {
      if (timer) return;
      timer = setInterval(() => {
        if (ticking) return;
        ticking = tick()
          .catch((error: unknown) => log.warn({ err: error }, 'schedule tick failed'))
          .finally(() => {
            ticking = null;
          });
      }, options.tickMs ?? 5_000);
      timer.unref();
    },

    async stop(): Promise<void> {
      if (timer) clearInterval(timer);
      timer = null;
      await ticking;
    },
  };
}
