import {
  DaytonaAuthenticationError,
  DaytonaAuthorizationError,
  DaytonaBadGatewayError,
  DaytonaConnectionError,
  DaytonaConflictError,
  DaytonaError,
  DaytonaInternalServerError,
  DaytonaNotFoundError,
  DaytonaProcessNotFoundError,
  DaytonaRateLimitError,
  DaytonaServiceUnavailableError,
  DaytonaSessionEndedError,
  DaytonaTimeoutError,
  DaytonaValidationError,
} from '@daytonaio/sdk';
import {
  AuthenticationError,
  BuildError,
  FileUploadError,
  InvalidArgumentError,
  NotEnoughSpaceError,
  RateLimitError,
  SandboxError,
  SandboxNotFoundError,
  ServiceBusyError,
  TimeoutError,
} from 'e2b';
import { describe, expect, it } from 'vitest';
import {
  backoffDelayMs,
  ERROR_MAPPING,
  ProviderAccessError,
  ProviderAuthError,
  ProviderBuildError,
  ProviderBusyError,
  ProviderDiskFullError,
  ProviderHttpError,
  ProviderLifetimeExceededError,
  ProviderNotFoundError,
  ProviderQuotaError,
  ProviderSessionLostError,
  ProviderRateLimitedError,
  ProviderUnavailableError,
  ProviderValidationError,
  parseRetryAfterMs,
  toProviderError,
  withProviderRetry,
} from '../../resolvers/providers/errors';

const context = { provider: 'DAYTONA' as const, operation: 'create' };

const withStatus = <T extends Error & { statusCode?: number }>(error: T, status: number): T => {
  error.statusCode = status;
  return error;
};

const domTimeout = () => {
  const error = new Error('The operation was aborted due to timeout');
  error.name = 'TimeoutError';
  return error;
};

// One example per row of ERROR_MAPPING, keyed by the row's source, with the class it must become.
const ROWS: Record<
  string,
  { error: unknown; expected: new (...args: never[]) => Error; retryAfterMs?: number | null }
> = {
  'Daytona toolbox DaytonaProcessNotFoundError (404 PROCESS_NOT_FOUND)': {
    error: new DaytonaProcessNotFoundError(
      'command not found',
      404,
      undefined,
      'PROCESS_NOT_FOUND',
      'DAYTONA_DAEMON',
    ),
    expected: ProviderSessionLostError,
  },
  'DaytonaGoneError / DaytonaSessionEndedError (410, a toolbox session)': {
    error: new DaytonaSessionEndedError('session ended', 410, undefined, 'SESSION_ENDED', 'DAYTONA_DAEMON'),
    expected: ProviderSessionLostError,
  },
  'DaytonaAuthorizationError (403) over a resource limit': {
    error: new DaytonaAuthorizationError(
      'Disk request 20GB exceeds maximum allowed per sandbox (10GB).',
      403,
    ),
    expected: ProviderQuotaError,
  },
  'DaytonaAuthorizationError (403) region not available': {
    error: new DaytonaAuthorizationError('Region eu is not available to the organization', 403),
    expected: ProviderAccessError,
  },
  'DaytonaValidationError (400) over a resource limit': {
    error: new DaytonaValidationError('Total CPU limit exceeded. Maximum allowed: 10.', 400),
    expected: ProviderQuotaError,
  },
  'DaytonaValidationError (400) state change in progress': {
    error: new DaytonaValidationError('Sandbox state change in progress', 400),
    expected: ProviderBusyError,
  },
  'DaytonaConflictError (409)': {
    error: new DaytonaConflictError('session already exists', 409),
    expected: ProviderValidationError,
  },
  'Daytona toolbox 404 NOT_FOUND (a session or command, not the sandbox)': {
    error: new DaytonaNotFoundError('command x not found', 404, undefined, 'NOT_FOUND', 'DAYTONA_DAEMON'),
    expected: ProviderSessionLostError,
  },
  'e2b RateLimitError 429 over the concurrent sandboxes of the plan': {
    error: new RateLimitError(
      'Rate limit exceeded - You have reached the maximum number of concurrent E2B sandboxes (20)',
    ),
    expected: ProviderQuotaError,
  },
  'DaytonaRateLimitError (429)': {
    error: new DaytonaRateLimitError('slow down', 429, { 'retry-after': '7' } as never),
    expected: ProviderRateLimitedError,
    retryAfterMs: 7_000,
  },
  'DaytonaAuthenticationError (401)': {
    error: new DaytonaAuthenticationError('no', 401),
    expected: ProviderAuthError,
  },
  'DaytonaAuthorizationError (403)': {
    error: new DaytonaAuthorizationError('no', 403),
    expected: ProviderAuthError,
  },
  'DaytonaNotFoundError (404)': {
    error: new DaytonaNotFoundError('gone', 404),
    expected: ProviderNotFoundError,
  },
  'DaytonaValidationError (400)': {
    error: new DaytonaValidationError('bad', 400),
    expected: ProviderValidationError,
  },
  'DaytonaTimeoutError (408/504, client deadline)': {
    error: new DaytonaTimeoutError('late', 504),
    expected: ProviderUnavailableError,
  },
  'DaytonaInternalServerError (500)': {
    error: new DaytonaInternalServerError('boom', 500),
    expected: ProviderUnavailableError,
  },
  'DaytonaBadGatewayError (502)': {
    error: new DaytonaBadGatewayError('bg', 502),
    expected: ProviderUnavailableError,
  },
  'DaytonaServiceUnavailableError (503)': {
    error: new DaytonaServiceUnavailableError('down', 503),
    expected: ProviderUnavailableError,
  },
  'DaytonaConnectionError (no response)': {
    error: new DaytonaConnectionError('ECONNREFUSED'),
    expected: ProviderUnavailableError,
  },
  'DaytonaError with another HTTP status': {
    error: new DaytonaError('unprocessable', 422),
    expected: ProviderValidationError,
  },
  'e2b SandboxError 400 Max instance length exceeded': {
    error: withStatus(new SandboxError('400: Max instance length exceeded'), 400),
    expected: ProviderLifetimeExceededError,
  },
  'e2b SandboxError 403 (no access to the resource)': {
    error: withStatus(new SandboxError("403: You don't have access to template 'x'"), 403),
    expected: ProviderAccessError,
  },
  'e2b NotEnoughSpaceError (envd 507)': {
    error: new NotEnoughSpaceError('not enough disk space'),
    expected: ProviderDiskFullError,
  },
  'e2b FileUploadError': {
    error: new FileUploadError('Failed to upload file: Bad Gateway'),
    expected: ProviderUnavailableError,
  },
  'e2b BuildError': {
    error: new BuildError('step 3 failed: exit status 1'),
    expected: ProviderBuildError,
  },
  'e2b RateLimitError (429 after the SDK’s own Retry-After retries)': {
    error: new RateLimitError('Rate limit exceeded'),
    expected: ProviderRateLimitedError,
    retryAfterMs: null,
  },
  'e2b AuthenticationError (401)': {
    error: new AuthenticationError('Unauthorized'),
    expected: ProviderAuthError,
  },
  'e2b NotFoundError / SandboxNotFoundError (404)': {
    error: new SandboxNotFoundError('Sandbox x not found'),
    expected: ProviderNotFoundError,
  },
  'e2b InvalidArgumentError (400)': {
    error: new InvalidArgumentError('bad'),
    expected: ProviderValidationError,
  },
  'e2b ServiceBusyError (503)': { error: new ServiceBusyError('busy'), expected: ProviderUnavailableError },
  'e2b TimeoutError (envd unavailable, deadline)': {
    error: new TimeoutError('deadline'),
    expected: ProviderUnavailableError,
  },
  'e2b SandboxError with an HTTP status': {
    error: withStatus(new SandboxError('409: Sandbox x is changing state'), 409),
    expected: ProviderBusyError,
  },
  'e2b SandboxError from envd RPC (unknown code)': {
    error: new SandboxError('2: [unknown] HTTP 500'),
    expected: ProviderUnavailableError,
  },
  'ProviderHttpError (plain fetch: any status)': {
    error: new ProviderHttpError(429, 'slow down', '3'),
    expected: ProviderRateLimitedError,
    retryAfterMs: 3_000,
  },
  'DOMException TimeoutError / AbortError (request timeout)': {
    error: domTimeout(),
    expected: ProviderUnavailableError,
  },
  'fetch TypeError (connection refused / reset)': {
    error: new TypeError('fetch failed'),
    expected: ProviderUnavailableError,
  },
};

describe('the provider error mapping table', () => {
  it('has one tested example for every row and no example without a row', () => {
    expect(Object.keys(ROWS).sort()).toEqual(ERROR_MAPPING.map((row) => row.source).sort());
  });

  it.each(ERROR_MAPPING.map((row) => [row.source]))('maps %s', (source) => {
    const row = ROWS[source];
    if (!row) throw new Error(`no example for ${source}`);
    const mapped = toProviderError(row.error, context);
    expect(mapped).toBeInstanceOf(row.expected);
    expect((mapped as Error & { cause?: unknown }).cause).toBe(row.error);
    if (row.retryAfterMs !== undefined)
      expect((mapped as ProviderRateLimitedError).retryAfterMs).toBe(row.retryAfterMs);
  });

  it('maps every plain HTTP status class the Platinum contract names', () => {
    const cases: Array<[number, new (...args: never[]) => Error]> = [
      [400, ProviderValidationError],
      [401, ProviderAuthError],
      [403, ProviderAuthError],
      [404, ProviderNotFoundError],
      [409, ProviderValidationError],
      [422, ProviderValidationError],
      [429, ProviderRateLimitedError],
      [500, ProviderUnavailableError],
      [502, ProviderUnavailableError],
      [503, ProviderUnavailableError],
      [504, ProviderUnavailableError],
    ];
    for (const [status, expected] of cases) {
      expect(toProviderError(new ProviderHttpError(status, 'x'), context), String(status)).toBeInstanceOf(
        expected,
      );
    }
  });

  it('maps the statuses E2B and Daytona answer while a sandbox changes state to a retried ProviderBusyError', () => {
    expect(toProviderError(withStatus(new SandboxError('500: boom'), 500), context)).toBeInstanceOf(
      ProviderUnavailableError,
    );
    // Daytona's 409s are clashes (a name, a session, a recent recovery): final.
    expect(toProviderError(new DaytonaError('exists', 409), context)).toBeInstanceOf(ProviderValidationError);
    // Platinum's contract keeps 409 for a state or name clash: final.
    expect(toProviderError(new ProviderHttpError(409, 'name taken'), context)).toBeInstanceOf(
      ProviderValidationError,
    );
  });

  it('reads the status E2B puts in a BuildError message: 5xx retried, 409 busy, 4xx final, none a build failure', () => {
    expect(toProviderError(new BuildError('500: Internal Server Error'), context)).toBeInstanceOf(
      ProviderUnavailableError,
    );
    expect(toProviderError(new BuildError('409: build in progress'), context)).toBeInstanceOf(
      ProviderBusyError,
    );
    expect(
      toProviderError(new BuildError('400: CPU count must be 1 or an even number'), context),
    ).toBeInstanceOf(ProviderValidationError);
    expect(toProviderError(new BuildError('Unknown error'), context)).toBeInstanceOf(ProviderBuildError);
  });

  it('tells a resource limit and a region or template without access apart from a bad key', () => {
    const quota = toProviderError(
      new DaytonaAuthorizationError('CPU request 8 exceeds maximum allowed per sandbox (4).', 403),
      context,
    );
    expect(quota).toBeInstanceOf(ProviderQuotaError);
    expect((quota as Error).message).not.toContain('Set a valid key');
    expect((quota as Error).message).toContain('DAYTONA_MAX_');
    const access = toProviderError(withStatus(new SandboxError('403: no access'), 403), {
      provider: 'E2B',
      operation: 'buildSnapshot',
    });
    expect(access).toBeInstanceOf(ProviderAccessError);
    expect((access as Error).message).toContain('The API key is valid');
    // A bare 403 from Daytona is still the key's permissions.
    expect(toProviderError(new DaytonaAuthorizationError('Forbidden', 403), context)).toBeInstanceOf(
      ProviderAuthError,
    );
  });

  it('leaves errors the table does not know unchanged', () => {
    const error = new RangeError('a bug of ours');
    expect(toProviderError(error, context)).toBe(error);
  });

  it('names the environment variable to fix in an auth error', () => {
    const error = toProviderError(new AuthenticationError('Unauthorized'), {
      provider: 'E2B',
      operation: 'create',
    });
    expect(error).toBeInstanceOf(ProviderAuthError);
    expect((error as ProviderAuthError).envVar).toBe('E2B_API_KEY');
    expect((error as Error).message).toContain('Set a valid key in E2B_API_KEY');
  });

  it('parses Retry-After as seconds or as an HTTP date', () => {
    expect(parseRetryAfterMs('2')).toBe(2_000);
    expect(
      parseRetryAfterMs('Thu, 01 Jan 2099 00:00:10 GMT', Date.parse('Thu, 01 Jan 2099 00:00:00 GMT')),
    ).toBe(10_000);
    expect(parseRetryAfterMs('soon')).toBeNull();
    expect(parseRetryAfterMs(undefined)).toBeNull();
  });
});

describe('withProviderRetry', () => {
  const recordSleeps = () => {
    const sleeps: number[] = [];
    return { sleeps, sleep: async (ms: number) => void sleeps.push(ms) };
  };

  it('waits the Retry-After of a 429 and then succeeds', async () => {
    const { sleeps, sleep } = recordSleeps();
    let calls = 0;
    const result = await withProviderRetry(
      async () => {
        calls += 1;
        if (calls === 1) throw new ProviderHttpError(429, 'slow down', '2');
        return 'ok';
      },
      context,
      { sleep, jitter: false },
    );
    expect(result).toBe('ok');
    expect(calls).toBe(2);
    expect(sleeps).toEqual([2_000]);
  });

  it('backs off exponentially with a cap on 5xx and gives up with ProviderUnavailableError', async () => {
    const { sleeps, sleep } = recordSleeps();
    let calls = 0;
    const failure = withProviderRetry(
      async () => {
        calls += 1;
        throw new ProviderHttpError(503, 'down');
      },
      context,
      { sleep, jitter: false, maxAttempts: 5, baseDelayMs: 100, maxDelayMs: 300 },
    );
    const error = await failure.catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ProviderUnavailableError);
    expect((error as ProviderUnavailableError).attempts).toBe(5);
    expect(calls).toBe(5);
    expect(sleeps).toEqual([100, 200, 300, 300]);
    expect(backoffDelayMs(10, 100, 300)).toBe(300);
  });

  it('keeps jittered delays within half and all of the backoff', async () => {
    const { sleeps, sleep } = recordSleeps();
    await withProviderRetry(
      async (attempt) => {
        if (attempt < 4) throw new ProviderHttpError(500, 'x');
        return null;
      },
      context,
      { sleep, baseDelayMs: 100, maxDelayMs: 10_000 },
    );
    expect(sleeps).toHaveLength(3);
    sleeps.forEach((ms, i) => {
      const full = 100 * 2 ** i;
      expect(ms).toBeGreaterThanOrEqual(full / 2);
      expect(ms).toBeLessThanOrEqual(full);
    });
  });

  it('retries a 409-while-busy with backoff and then succeeds', async () => {
    const { sleeps, sleep } = recordSleeps();
    let calls = 0;
    const result = await withProviderRetry(
      async () => {
        calls += 1;
        if (calls < 3) throw new DaytonaValidationError('Sandbox state change in progress', 400);
        return 'deleted';
      },
      context,
      { sleep, jitter: false, baseDelayMs: 100 },
    );
    expect(result).toBe('deleted');
    expect(calls).toBe(3);
    expect(sleeps).toEqual([100, 200]);
  });

  it('does not retry auth, not-found or validation errors', async () => {
    for (const status of [401, 404, 400]) {
      let calls = 0;
      await withProviderRetry(
        async () => {
          calls += 1;
          throw new ProviderHttpError(status, 'no');
        },
        context,
        { sleep: async () => {} },
      ).catch(() => undefined);
      expect(calls, String(status)).toBe(1);
    }
  });

  it('surfaces a rate limit whose Retry-After exceeds the longest wait instead of sleeping', async () => {
    const { sleeps, sleep } = recordSleeps();
    const error = await withProviderRetry(
      async () => {
        throw new ProviderHttpError(429, 'later', '3600');
      },
      context,
      { sleep, maxRetryAfterMs: 60_000 },
    ).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ProviderRateLimitedError);
    expect((error as ProviderRateLimitedError).retryAfterMs).toBe(3_600_000);
    expect(sleeps).toEqual([]);
  });
});
