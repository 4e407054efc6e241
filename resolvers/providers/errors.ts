// Typed provider errors, the one table that maps SDK errors and HTTP statuses onto them, and the
// bounded retry helper every adapter wraps its provider calls in.
import {
  DaytonaAuthenticationError,
  DaytonaAuthorizationError,
  DaytonaBadGatewayError,
  DaytonaConflictError,
  DaytonaConnectionError,
  DaytonaError,
  DaytonaGoneError,
  DaytonaInternalServerError,
  DaytonaNotFoundError,
  DaytonaProcessNotFoundError,
  DaytonaRateLimitError,
  DaytonaServiceUnavailableError,
  DaytonaTimeoutError,
  DaytonaValidationError,
} from '@daytonaio/sdk';
import {
  AuthenticationError as E2BAuthenticationError,
  BuildError as E2BBuildError,
  FileUploadError as E2BFileUploadError,
  InvalidArgumentError as E2BInvalidArgumentError,
  NotEnoughSpaceError as E2BNotEnoughSpaceError,
  NotFoundError as E2BNotFoundError,
  RateLimitError as E2BRateLimitError,
  SandboxError as E2BSandboxError,
  ServiceBusyError as E2BServiceBusyError,
  TimeoutError as E2BTimeoutError,
} from 'e2b';
import type { ProviderName } from './types';
import { cappedExponentialMs, retry } from '../../contract/retry';

/** Environment variable an operator sets to fix a provider's credentials (named in auth errors). */
export const API_KEY_ENV_VARS: Record<ProviderName, string> = {
  LOCAL: '',
  DAYTONA: 'DAYTONA_API_KEY',
  E2B: 'E2B_API_KEY',
  PLATINUM: 'PLATINUM_API_KEY',
  DOCKER: 'DOCKER_HOST',
};

export interface ProviderErrorContext {
  provider: ProviderName;
  /** What the adapter was doing, e.g. `create`, `keepAlive`. */
  operation: string;
  /** Overrides the env var named in auth errors. */
  apiKeyEnvVar?: string;
}

/** Base class of every mapped provider failure. */
export class ProviderError extends Error {
  readonly provider: ProviderName;
  readonly operation: string;
  constructor(message: string, context: ProviderErrorContext, options?: { cause?: unknown }) {
    super(message, options);
    this.name = new.target.name;
    this.provider = context.provider;
    this.operation = context.operation;
  }
}

/** Thrown when the provider keeps answering 429 after the retries allowed; `retryAfterMs` is its last hint. */
export class ProviderRateLimitedError extends ProviderError {
  readonly retryAfterMs: number | null;
  constructor(context: ProviderErrorContext, retryAfterMs: number | null, options?: { cause?: unknown }) {
    const hint = retryAfterMs === null ? '' : ` (retry after ${Math.ceil(retryAfterMs / 1000)} s)`;
    super(`${context.provider} rate-limited ${context.operation}${hint}.`, context, options);
    this.retryAfterMs = retryAfterMs;
  }
}

/** Thrown when the provider rejects our credentials (401/403): a configuration error, never retried. */
export class ProviderAuthError extends ProviderError {
  readonly envVar: string;
  constructor(context: ProviderErrorContext, detail: string, options?: { cause?: unknown }) {
    const envVar = context.apiKeyEnvVar ?? API_KEY_ENV_VARS[context.provider];
    // A Docker Engine's credentials are the TLS client certificate of a tcp DOCKER_HOST.
    const what = context.provider === 'DOCKER' ? ['credentials', 'valid ones'] : ['API key', 'a valid key'];
    super(
      `${context.provider} rejected the ${what[0]} during ${context.operation}: ${detail}. ` +
        `Set ${what[1]} in ${envVar} and restart the server.`,
      context,
      options,
    );
    this.envVar = envVar;
  }
}

/** Thrown when the provider no longer knows the sandbox (404): callers treat it as DESTROYED. */
export class ProviderNotFoundError extends ProviderError {}

/** Thrown when the provider stays unreachable (5xx, timeouts, connection failures) after bounded retries. */
export class ProviderUnavailableError extends ProviderError {
  readonly attempts: number;
  constructor(
    context: ProviderErrorContext,
    detail: string,
    attempts: number,
    options?: { cause?: unknown },
  ) {
    super(
      `${context.provider} unavailable during ${context.operation} after ${attempts} attempt(s): ${detail}`,
      context,
      options,
    );
    this.attempts = attempts;
  }
}

/** Thrown when the provider rejects the request itself (400/409/422): fix the input, do not retry. */
export class ProviderValidationError extends ProviderError {}

/**
 * Thrown when the provider keeps refusing because the resource is changing state (E2B 409,
 * Daytona's 400 "State change in progress") after the retries allowed: try again later.
 */
export class ProviderBusyError extends ProviderError {
  constructor(context: ProviderErrorContext, detail: string, options?: { cause?: unknown }) {
    super(
      `${context.provider} is busy with a state change during ${context.operation}: ${detail}. Try again shortly.`,
      context,
      options,
    );
  }
}

/**
 * Thrown when a request exceeds the account's resource limits (Daytona 400 or 403 "exceeds maximum
 * allowed per sandbox" / "Total CPU limit exceeded" / "… quota exceeded", E2B 429 over the plan's
 * concurrent sandboxes): the key is fine, the size or the number of sandboxes is not.
 */
export class ProviderQuotaError extends ProviderError {
  constructor(context: ProviderErrorContext, detail: string, options?: { cause?: unknown }) {
    super(
      `${context.provider} refused ${context.operation} over the account's resource limits: ${detail}. ` +
        `Lower the template's cpu/memory/disk (or the ${context.provider}_MAX_* settings to the account's ` +
        'limits), stop other sandboxes, or raise the limits with the provider.',
      context,
      options,
    );
  }
}

/**
 * Thrown when a valid key lacks access to one resource (Daytona "region not available to the
 * organization", E2B 403 on a template of another team): fix the target or template, not the key.
 */
export class ProviderAccessError extends ProviderError {
  constructor(context: ProviderErrorContext, detail: string, options?: { cause?: unknown }) {
    super(
      `${context.provider} denied access during ${context.operation}: ${detail}. The API key is valid; ` +
        'check the configured target/region or that the template belongs to this account.',
      context,
      options,
    );
  }
}

/**
 * Thrown when an in-sandbox process or toolbox session is gone (Daytona's daemon: 404 with code
 * `NOT_FOUND` or `PROCESS_NOT_FOUND`, 410 `SESSION_ENDED`): the sandbox itself still exists, so the
 * operation is retried.
 */
export class ProviderSessionLostError extends ProviderError {}

/**
 * Thrown when the sandbox reached the provider's maximum lifetime (E2B 400 "Max instance length
 * exceeded"): it cannot be kept alive; end the session and start a new one.
 */
export class ProviderLifetimeExceededError extends ProviderError {}

/** Thrown when an operation needs a running sandbox and it is paused or stopped (E2B setTimeout → 404). */
export class ProviderNotRunningError extends ProviderValidationError {}

/** Thrown when an image/template build failed at the provider (E2B BuildError, Daytona build_failed). */
export class ProviderBuildError extends ProviderError {}

/** Thrown when the sandbox's disk is full (E2B envd 507): free space or raise the disk size. */
export class ProviderDiskFullError extends ProviderError {}

/**
 * Thrown when a snapshot/template a sandbox should boot from is not usable (a provider state other
 * than active that cannot be recovered in place): provisioning marks it failed so it is rebuilt.
 */
export class ProviderSnapshotUnusableError extends ProviderError {
  constructor(
    context: ProviderErrorContext,
    readonly snapshotRef: string,
    readonly state: string,
    detail: string,
    options?: { cause?: unknown },
  ) {
    super(
      `${context.provider} snapshot ${snapshotRef} is ${state}: ${detail}; it will be rebuilt.`,
      context,
      options,
    );
  }
}

/**
 * Thrown when the sandbox's entry process exited right after launch (e.g. the binary is missing
 * from the image): the sandbox would never serve the daemon.
 */
export class ProviderEntryFailedError extends ProviderError {}

/** A raw HTTP failure from a plain-fetch adapter (Platinum); mapped through the same table. */
export class ProviderHttpError extends Error {
  constructor(
    readonly status: number,
    message: string,
    readonly retryAfter: string | null = null,
  ) {
    super(message);
    this.name = 'ProviderHttpError';
  }
}

type Mapped =
  | { kind: 'rate-limited'; retryAfterMs: number | null }
  | { kind: 'auth' }
  | { kind: 'not-found' }
  | { kind: 'unavailable' }
  | { kind: 'validation' }
  | { kind: 'busy' }
  | { kind: 'quota' }
  | { kind: 'access' }
  | { kind: 'session-lost' }
  | { kind: 'lifetime' }
  | { kind: 'build' }
  | { kind: 'disk-full' };

export interface ErrorMappingRow {
  /** Human-readable source of the row (SDK class or HTTP status), used as the test row name. */
  source: string;
  matches(error: unknown): boolean;
  map(error: unknown): Mapped;
}

/** Parses `Retry-After` (delta-seconds or an HTTP date) into milliseconds. */
export function parseRetryAfterMs(value: unknown, now = Date.now()): number | null {
  if (typeof value !== 'string' && typeof value !== 'number') return null;
  const text = String(value).trim();
  if (/^\d+(\.\d+)?$/.test(text)) return Math.round(Number(text) * 1000);
  const at = Date.parse(text);
  return Number.isNaN(at) ? null : Math.max(0, at - now);
}

function headerOf(headers: unknown, name: string): unknown {
  if (!headers || typeof headers !== 'object') return undefined;
  const getter = (headers as { get?: (key: string) => unknown }).get;
  if (typeof getter === 'function') {
    const value = getter.call(headers, name);
    if (value !== undefined && value !== null) return value;
  }
  const record = headers as Record<string, unknown>;
  return record[name] ?? record[name.toLowerCase()];
}

/**
 * Plain status classes. `conflict` says what 409 means for the provider: E2B answers it for a
 * sandbox in transition (retry); Daytona (a name taken, a session that exists, "recovery attempted
 * recently") and Platinum's contract for a clash that another attempt does not resolve (final).
 */
function statusMapping(
  status: number,
  retryAfter: unknown,
  conflict: 'busy' | 'validation' = 'validation',
): Mapped | null {
  if (status === 429) return { kind: 'rate-limited', retryAfterMs: parseRetryAfterMs(retryAfter) };
  if (status === 401 || status === 403) return { kind: 'auth' };
  if (status === 404 || status === 410) return { kind: 'not-found' };
  if (status === 409) return { kind: conflict };
  if (status === 400 || status === 422) return { kind: 'validation' };
  if (status === 507) return { kind: 'disk-full' };
  if (status === 408 || status >= 500) return { kind: 'unavailable' };
  return null;
}

/**
 * Daytona's quota refusals (apps/api sandbox.service.ts and snapshot.service.ts
 * validateOrganizationQuotas, organization usage): "CPU request 8 exceeds maximum allowed per
 * sandbox (4)", "Total CPU limit exceeded. Maximum allowed: 10", "… quota exceeded", and the
 * per-organization counts ("Snapshot quota exceeded", "Volume quota exceeded", "maximum number of
 * … reached"). Answered as 400 by current Daytona, as 403 by older releases: both are matched.
 */
const DAYTONA_QUOTA =
  /exceeds maximum allowed per sandbox|total (cpu|gpu|memory|disk) (limit|quota) exceeded|quota exceeded|limit exceeded|maximum number of .* reached/i;
/** Daytona's 403s about a resource rather than the key (region.service.ts, snapshot.service.ts). */
const DAYTONA_ACCESS = /region .*not available|not available to the organization|organization is suspended/i;
/** Daytona's "busy" refusals (SandboxError 400 in sandbox.service.ts start/stop/destroy). */
const DAYTONA_BUSY = /state change in progress/i;
/**
 * E2B's concurrency refusal (infra packages/api: 429 "you have reached the maximum number of
 * concurrent E2B sandboxes"): a plan limit, not a request rate — waiting seconds does not help.
 */
const E2B_CONCURRENCY = /concurrent/i;
/** E2B keep-alive past the sandbox's maximum length (infra packages/api/internal/orchestrator/keep_alive.go). */
const E2B_LIFETIME = /max instance length exceeded/i;

const messageMatches = (e: unknown, pattern: RegExp): boolean =>
  e instanceof Error && pattern.test(e.message);

/** `NNN: message` as the e2b SDK formats API errors for classes without a status (BuildError). */
function leadingStatus(e: unknown): number | null {
  const match = e instanceof Error ? /^(\d{3}): /.exec(e.message) : null;
  return match ? Number(match[1]) : null;
}

const isTimeoutDomException = (e: unknown): boolean =>
  e instanceof Error &&
  (e.name === 'TimeoutError' || e.name === 'AbortError') &&
  !(e instanceof E2BSandboxError);

/**
 * The one mapping table, first match wins. Subclasses come before their parents (the SDKs'
 * `DaytonaConnectionTimeoutError` extends `DaytonaConnectionError`, E2B `RateLimitError` extends
 * `SandboxError`).
 */
export const ERROR_MAPPING: readonly ErrorMappingRow[] = [
  {
    source: 'Daytona toolbox DaytonaProcessNotFoundError (404 PROCESS_NOT_FOUND)',
    matches: (e) => e instanceof DaytonaProcessNotFoundError,
    map: () => ({ kind: 'session-lost' }),
  },
  {
    // The daemon answers a missing session or command with code NOT_FOUND (apps/daemon toolbox
    // process/session); the SDK makes it a plain DaytonaNotFoundError with source DAYTONA_DAEMON.
    source: 'Daytona toolbox 404 NOT_FOUND (a session or command, not the sandbox)',
    matches: (e) => e instanceof DaytonaNotFoundError && e.source === 'DAYTONA_DAEMON',
    map: () => ({ kind: 'session-lost' }),
  },
  {
    // The API never answers 410 for a sandbox (a removed one is 404); the toolbox does for a session.
    source: 'DaytonaGoneError / DaytonaSessionEndedError (410, a toolbox session)',
    matches: (e) => e instanceof DaytonaGoneError,
    map: () => ({ kind: 'session-lost' }),
  },
  {
    source: 'DaytonaAuthorizationError (403) over a resource limit',
    matches: (e) => e instanceof DaytonaAuthorizationError && messageMatches(e, DAYTONA_QUOTA),
    map: () => ({ kind: 'quota' }),
  },
  {
    source: 'DaytonaAuthorizationError (403) region not available',
    matches: (e) => e instanceof DaytonaAuthorizationError && messageMatches(e, DAYTONA_ACCESS),
    map: () => ({ kind: 'access' }),
  },
  {
    source: 'DaytonaValidationError (400) over a resource limit',
    matches: (e) => e instanceof DaytonaValidationError && messageMatches(e, DAYTONA_QUOTA),
    map: () => ({ kind: 'quota' }),
  },
  {
    source: 'DaytonaValidationError (400) state change in progress',
    matches: (e) => e instanceof DaytonaValidationError && messageMatches(e, DAYTONA_BUSY),
    map: () => ({ kind: 'busy' }),
  },
  {
    // A name taken, a toolbox session that exists, "recovery attempted recently": never a state
    // change (that is the 400 above), so another attempt gets the same answer.
    source: 'DaytonaConflictError (409)',
    matches: (e) => e instanceof DaytonaConflictError,
    map: () => ({ kind: 'validation' }),
  },
  {
    source: 'DaytonaRateLimitError (429)',
    matches: (e) => e instanceof DaytonaRateLimitError,
    map: (e) => ({
      kind: 'rate-limited',
      retryAfterMs: parseRetryAfterMs(headerOf((e as DaytonaError).headers, 'retry-after')),
    }),
  },
  {
    source: 'DaytonaAuthenticationError (401)',
    matches: (e) => e instanceof DaytonaAuthenticationError,
    map: () => ({ kind: 'auth' }),
  },
  {
    source: 'DaytonaAuthorizationError (403)',
    matches: (e) => e instanceof DaytonaAuthorizationError,
    map: () => ({ kind: 'auth' }),
  },
  {
    source: 'DaytonaNotFoundError (404)',
    matches: (e) => e instanceof DaytonaNotFoundError,
    map: () => ({ kind: 'not-found' }),
  },
  {
    source: 'DaytonaValidationError (400)',
    matches: (e) => e instanceof DaytonaValidationError,
    map: () => ({ kind: 'validation' }),
  },
  {
    source: 'DaytonaTimeoutError (408/504, client deadline)',
    matches: (e) => e instanceof DaytonaTimeoutError,
    map: () => ({ kind: 'unavailable' }),
  },
  {
    source: 'DaytonaInternalServerError (500)',
    matches: (e) => e instanceof DaytonaInternalServerError,
    map: () => ({ kind: 'unavailable' }),
  },
  {
    source: 'DaytonaBadGatewayError (502)',
    matches: (e) => e instanceof DaytonaBadGatewayError,
    map: () => ({ kind: 'unavailable' }),
  },
  {
    source: 'DaytonaServiceUnavailableError (503)',
    matches: (e) => e instanceof DaytonaServiceUnavailableError,
    map: () => ({ kind: 'unavailable' }),
  },
  {
    source: 'DaytonaConnectionError (no response)',
    matches: (e) => e instanceof DaytonaConnectionError,
    map: () => ({ kind: 'unavailable' }),
  },
  {
    source: 'DaytonaError with another HTTP status',
    matches: (e) =>
      e instanceof DaytonaError &&
      typeof e.statusCode === 'number' &&
      statusMapping(e.statusCode, undefined) !== null,
    map: (e) => statusMapping((e as DaytonaError).statusCode as number, undefined) as Mapped,
  },
  {
    source: 'e2b SandboxError 400 Max instance length exceeded',
    matches: (e) => e instanceof E2BSandboxError && e.statusCode === 400 && messageMatches(e, E2B_LIFETIME),
    map: () => ({ kind: 'lifetime' }),
  },
  {
    // E2B's 401 is AuthenticationError; its 403 is about a resource (a template of another team).
    source: 'e2b SandboxError 403 (no access to the resource)',
    matches: (e) => e instanceof E2BSandboxError && e.statusCode === 403,
    map: () => ({ kind: 'access' }),
  },
  {
    source: 'e2b NotEnoughSpaceError (envd 507)',
    matches: (e) => e instanceof E2BNotEnoughSpaceError,
    map: () => ({ kind: 'disk-full' }),
  },
  {
    // Upload transport failures: the build was not started, so it can be retried.
    source: 'e2b FileUploadError',
    matches: (e) => e instanceof E2BFileUploadError,
    map: () => ({ kind: 'unavailable' }),
  },
  {
    // BuildError carries no status: API failures read "NNN: message", a failed build does not.
    source: 'e2b BuildError',
    matches: (e) => e instanceof E2BBuildError,
    map: (e) => {
      const status = leadingStatus(e);
      return (status !== null && statusMapping(status, undefined, 'busy')) || { kind: 'build' };
    },
  },
  {
    source: 'e2b RateLimitError 429 over the concurrent sandboxes of the plan',
    matches: (e) => e instanceof E2BRateLimitError && messageMatches(e, E2B_CONCURRENCY),
    map: () => ({ kind: 'quota' }),
  },
  {
    source: 'e2b RateLimitError (429 after the SDK’s own Retry-After retries)',
    matches: (e) => e instanceof E2BRateLimitError,
    map: () => ({ kind: 'rate-limited', retryAfterMs: null }),
  },
  {
    source: 'e2b AuthenticationError (401)',
    matches: (e) => e instanceof E2BAuthenticationError,
    map: () => ({ kind: 'auth' }),
  },
  {
    source: 'e2b NotFoundError / SandboxNotFoundError (404)',
    matches: (e) => e instanceof E2BNotFoundError,
    map: () => ({ kind: 'not-found' }),
  },
  {
    source: 'e2b InvalidArgumentError (400)',
    matches: (e) => e instanceof E2BInvalidArgumentError,
    map: () => ({ kind: 'validation' }),
  },
  {
    source: 'e2b ServiceBusyError (503)',
    matches: (e) => e instanceof E2BServiceBusyError,
    map: () => ({ kind: 'unavailable' }),
  },
  {
    source: 'e2b TimeoutError (envd unavailable, deadline)',
    matches: (e) => e instanceof E2BTimeoutError,
    map: () => ({ kind: 'unavailable' }),
  },
  {
    source: 'e2b SandboxError with an HTTP status',
    matches: (e) =>
      e instanceof E2BSandboxError &&
      typeof e.statusCode === 'number' &&
      statusMapping(e.statusCode, undefined, 'busy') !== null,
    map: (e) => statusMapping((e as E2BSandboxError).statusCode as number, undefined, 'busy') as Mapped,
  },
  {
    // handleRpcError formats unmapped Connect codes as `<code>: [unknown] <message>` (HTTP 500 from envd).
    source: 'e2b SandboxError from envd RPC (unknown code)',
    matches: (e) => e instanceof E2BSandboxError && /\[(unknown|internal|unavailable)\]/.test(e.message),
    map: () => ({ kind: 'unavailable' }),
  },
  {
    source: 'ProviderHttpError (plain fetch: any status)',
    matches: (e) => e instanceof ProviderHttpError && statusMapping(e.status, e.retryAfter) !== null,
    map: (e) => statusMapping((e as ProviderHttpError).status, (e as ProviderHttpError).retryAfter) as Mapped,
  },
  {
    source: 'DOMException TimeoutError / AbortError (request timeout)',
    matches: isTimeoutDomException,
    map: () => ({ kind: 'unavailable' }),
  },
  {
    source: 'fetch TypeError (connection refused / reset)',
    matches: (e) => e instanceof TypeError && /fetch failed|ECONNREFUSED|ECONNRESET|socket/i.test(e.message),
    map: () => ({ kind: 'unavailable' }),
  },
];

function classify(error: unknown): Mapped | null {
  for (const row of ERROR_MAPPING) if (row.matches(error)) return row.map(error);
  return null;
}

const messageOf = (error: unknown): string => (error instanceof Error ? error.message : String(error));

/**
 * Maps any SDK/transport failure to a typed provider error; errors the table does not know (and
 * errors that already are `ProviderError`s) are returned unchanged.
 */
export function toProviderError(error: unknown, context: ProviderErrorContext, attempts = 1): unknown {
  if (error instanceof ProviderError) return error;
  const mapped = classify(error);
  if (!mapped) return error;
  const cause = { cause: error };
  switch (mapped.kind) {
    case 'rate-limited':
      return new ProviderRateLimitedError(context, mapped.retryAfterMs, cause);
    case 'auth':
      return new ProviderAuthError(context, messageOf(error), cause);
    case 'not-found':
      return new ProviderNotFoundError(
        `${context.provider} does not know the sandbox (${context.operation}): ${messageOf(error)}`,
        context,
        cause,
      );
    case 'unavailable':
      return new ProviderUnavailableError(context, messageOf(error), attempts, cause);
    case 'validation':
      return new ProviderValidationError(
        `${context.provider} rejected ${context.operation}: ${messageOf(error)}`,
        context,
        cause,
      );
    case 'busy':
      return new ProviderBusyError(context, messageOf(error), cause);
    case 'quota':
      return new ProviderQuotaError(context, messageOf(error), cause);
    case 'access':
      return new ProviderAccessError(context, messageOf(error), cause);
    case 'session-lost':
      return new ProviderSessionLostError(
        `${context.provider} lost an in-sandbox process or session during ${context.operation}: ${messageOf(error)}`,
        context,
        cause,
      );
    case 'lifetime':
      return new ProviderLifetimeExceededError(
        `${context.provider} sandbox reached its maximum lifetime (${context.operation}): ${messageOf(error)}`,
        context,
        cause,
      );
    case 'build':
      return new ProviderBuildError(
        `${context.provider} image build failed (${context.operation}): ${messageOf(error)}`,
        context,
        cause,
      );
    case 'disk-full':
      return new ProviderDiskFullError(
        `${context.provider} sandbox disk is full (${context.operation}): ${messageOf(error)}`,
        context,
        cause,
      );
  }
}

/** Failures worth another attempt: rate limits, outages, state transitions, lost toolbox sessions. */
export function isRetryable(error: unknown): error is ProviderError {
  return (
    error instanceof ProviderRateLimitedError ||
    error instanceof ProviderUnavailableError ||
    error instanceof ProviderBusyError ||
    error instanceof ProviderSessionLostError
  );
}

export interface RetryOptions {
  /** @default 4 */
  maxAttempts?: number;
  /** First backoff delay for 5xx/timeouts (doubles per attempt). @default 250 */
  baseDelayMs?: number;
  /** Cap of the exponential backoff. @default 4_000 */
  maxDelayMs?: number;
  /** A `Retry-After` longer than this is not waited for: the rate-limit error surfaces instead. @default 60_000 */
  maxRetryAfterMs?: number;
  /** Randomises each backoff delay within [delay/2, delay] so server processes do not retry in lockstep. @default true */
  jitter?: boolean;
  /** @default setTimeout-based */
  sleep?: (ms: number) => Promise<void>;
  /** Called before each wait; for logs and tests. */
  onRetry?: (info: { attempt: number; delayMs: number; error: ProviderError }) => void;
}

/** Backoff delay before attempt `attempt + 1` (attempt counts from 1), before jitter. */
export function backoffDelayMs(attempt: number, baseDelayMs: number, maxDelayMs: number): number {
  return cappedExponentialMs(attempt - 1, { initialMs: baseDelayMs, maxMs: maxDelayMs });
}

/**
 * Runs `fn`, mapping failures through the table: 429 waits `Retry-After` (or the backoff when the
 * provider gave none), 5xx/timeouts back off exponentially (capped), both at most `maxAttempts`
 * times in total; 409-while-busy and lost toolbox sessions back off like 5xx. Auth, quota, access,
 * not-found and validation errors are thrown at once.
 */
export async function withProviderRetry<T>(
  fn: (attempt: number) => Promise<T>,
  context: ProviderErrorContext,
  options: RetryOptions = {},
): Promise<T> {
  const maxRetryAfterMs = options.maxRetryAfterMs ?? 60_000;
  return retry<T, ProviderError>(
    async (attempt) => {
      try {
        return await fn(attempt);
      } catch (raw) {
        throw toProviderError(raw, context, attempt);
      }
    },
    {
      maxAttempts: options.maxAttempts ?? 4,
      // Jitter within [delay/2, delay]: never past the cap.
      backoff: {
        initialMs: options.baseDelayMs ?? 250,
        maxMs: options.maxDelayMs ?? 4_000,
        jitter: (options.jitter ?? true) ? 0.5 : 0,
        jitterSide: 'below',
      },
      retryable: isRetryable,
      delayFor: (error, backoffMs) => {
        if (!(error instanceof ProviderRateLimitedError) || error.retryAfterMs === null) return backoffMs;
        if (error.retryAfterMs > maxRetryAfterMs) throw error;
        return error.retryAfterMs;
      },
      onRetry: options.onRetry,
      sleep: options.sleep,
    },
  );
}
