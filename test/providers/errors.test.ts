// The provider error table, checked against errors the real SDKs raise when they talk to the
// emulators: each row's example is produced by an SDK call (a request the emulator refuses as the
// real service would, or an injected answer of the real service the emulator holds no state for),
// never a hand-built SDK error object. E2B's envd calls go through `sandboxUrl` with the
// E2b-Sandbox-Id routing header, as the SDK sends them to `sandbox.<domain>` in production.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Daytona, type Sandbox as DaytonaSandbox } from '@daytonaio/sdk';
import { Sandbox, Template } from 'e2b';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
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
  ProviderRateLimitedError,
  ProviderSessionLostError,
  ProviderUnavailableError,
  ProviderValidationError,
  parseRetryAfterMs,
  toProviderError,
  withProviderRetry,
} from '../../resolvers/providers/errors';
import { DaytonaEmulator } from '../emulators/daytona';
import { E2BEmulator } from '../emulators/e2b';

const context = { provider: 'DAYTONA' as const, operation: 'create' };

let daytona: DaytonaEmulator;
let e2b: E2BEmulator;
/** An E2B team at its concurrent-sandbox limit. */
let e2bFull: E2BEmulator;
let client: Daytona;
let dsandbox: DaytonaSandbox;
let esandbox: Sandbox;
let dir: string;
const disposables: Daytona[] = [];

const daytonaClient = (overrides: { apiKey?: string; apiUrl?: string; target?: string } = {}) => {
  const made = new Daytona({
    apiKey: daytona.apiKey,
    apiUrl: daytona.apiUrl,
    useDeprecatedPolling: true,
    ...overrides,
  });
  disposables.push(made);
  return made;
};
const e2bOpts = (emulator = e2b) => ({
  apiKey: emulator.apiKey,
  apiUrl: emulator.url,
  sandboxUrl: emulator.url,
  domain: emulator.domain,
});
/** The error a call fails with (a call that succeeds fails the test). */
const failure = (call: () => Promise<unknown>): Promise<unknown> =>
  call().then(
    () => {
      throw new Error('expected the call to fail');
    },
    (error: unknown) => error,
  );
const daemonBody = (status: number, message: string, code: string) => ({
  statusCode: status,
  message,
  code,
  source: 'DAYTONA_DAEMON',
});
const apiBody = (status: number, message: string, error: string) => ({ statusCode: status, message, error });

beforeAll(async () => {
  daytona = await DaytonaEmulator.start({ failBuildsMatching: /FAIL_THIS_BUILD/ });
  e2b = await E2BEmulator.start({ failBuildsMatching: /FAIL_THIS_BUILD/, createsPerSecond: 50 });
  e2bFull = await E2BEmulator.start({ maxConcurrent: 0 });
  dir = mkdtempSync(join(tmpdir(), 'provider-errors-'));
  writeFileSync(join(dir, 'payload.txt'), 'payload');
  client = daytonaClient();
  dsandbox = await client.create({ name: 'errors-fixture' });
  esandbox = await Sandbox.create('base', e2bOpts());
});

afterEach(() => {
  daytona.clearFaults();
  e2b.clearFaults();
});

afterAll(async () => {
  for (const made of disposables) await made[Symbol.asyncDispose]();
  await daytona.close();
  await e2b.close();
  await e2bFull.close();
  rmSync(dir, { recursive: true, force: true });
});

type Row = {
  produce: () => Promise<unknown>;
  expected: new (...args: never[]) => Error;
  retryAfterMs?: number | null;
};

// One example per row of ERROR_MAPPING, keyed by the row's source, with the class it must become.
const ROWS: Record<string, Row> = {
  'Daytona toolbox DaytonaProcessNotFoundError (404 PROCESS_NOT_FOUND)': {
    produce: () => {
      daytona.inject(
        { kind: 'reply', status: 404, json: daemonBody(404, 'process 42 not found', 'PROCESS_NOT_FOUND') },
        { path: '/process/session/' },
      );
      return failure(() => dsandbox.process.getSession('any'));
    },
    expected: ProviderSessionLostError,
  },
  'Daytona toolbox 404 NOT_FOUND (a session or command, not the sandbox)': {
    produce: () => failure(() => dsandbox.process.getSessionCommand('no-such-session', 'no-such-command')),
    expected: ProviderSessionLostError,
  },
  'DaytonaGoneError / DaytonaSessionEndedError (410, a toolbox session)': {
    produce: () => {
      daytona.inject(
        { kind: 'reply', status: 410, json: daemonBody(410, 'session ended', 'SESSION_ENDED') },
        { path: '/process/session/' },
      );
      return failure(() => dsandbox.process.getSession('any'));
    },
    expected: ProviderSessionLostError,
  },
  'DaytonaAuthorizationError (403) over a resource limit': {
    // Older Daytona releases answered quota refusals with 403.
    produce: () => {
      daytona.inject(
        {
          kind: 'reply',
          status: 403,
          json: apiBody(403, 'Disk request 20GB exceeds maximum allowed per sandbox (10GB).', 'Forbidden'),
        },
        { path: /^\/api\/sandbox$/, method: 'POST' },
      );
      return failure(() => client.create({}));
    },
    expected: ProviderQuotaError,
  },
  'DaytonaAuthorizationError (403) region not available': {
    produce: () => failure(() => daytonaClient({ target: 'ap' }).create({})),
    expected: ProviderAccessError,
  },
  'DaytonaValidationError (400) over a resource limit': {
    produce: () =>
      failure(() => client.create({ image: 'ubuntu:24.04', resources: { cpu: 8, memory: 1, disk: 3 } })),
    expected: ProviderQuotaError,
  },
  'DaytonaValidationError (400) state change in progress': {
    produce: () => {
      daytona.holdTransition(dsandbox.id, 'stopping', 'started', 1);
      return failure(() => dsandbox.delete());
    },
    expected: ProviderBusyError,
  },
  'DaytonaConflictError (409)': {
    produce: () => failure(() => client.create({ name: 'errors-fixture' })),
    expected: ProviderValidationError,
  },
  'DaytonaRateLimitError (429)': {
    produce: () => {
      daytona.inject({ kind: 'rate-limit', retryAfterSeconds: 7 }, { path: `/api/sandbox/${dsandbox.id}` });
      return failure(() => client.get(dsandbox.id));
    },
    expected: ProviderRateLimitedError,
    retryAfterMs: 7_000,
  },
  'DaytonaAuthenticationError (401)': {
    produce: () => failure(() => daytonaClient({ apiKey: 'wrong' }).get(dsandbox.id)),
    expected: ProviderAuthError,
  },
  'DaytonaAuthorizationError (403)': {
    produce: () => {
      daytona.inject(
        { kind: 'reply', status: 403, json: apiBody(403, 'Forbidden resource', 'Forbidden') },
        { path: `/api/sandbox/${dsandbox.id}` },
      );
      return failure(() => client.get(dsandbox.id));
    },
    expected: ProviderAuthError,
  },
  'DaytonaNotFoundError (404)': {
    produce: () => failure(() => client.get('no-such-sandbox')),
    expected: ProviderNotFoundError,
  },
  'DaytonaValidationError (400)': {
    produce: () => failure(() => dsandbox.getPreviewLink(70_000)),
    expected: ProviderValidationError,
  },
  'DaytonaTimeoutError (408/504, client deadline)': {
    produce: () => {
      daytona.inject({ kind: 'server-error', status: 504 }, { path: `/api/sandbox/${dsandbox.id}` });
      return failure(() => client.get(dsandbox.id));
    },
    expected: ProviderUnavailableError,
  },
  'DaytonaInternalServerError (500)': {
    produce: () => {
      daytona.inject({ kind: 'server-error', status: 500 }, { path: `/api/sandbox/${dsandbox.id}` });
      return failure(() => client.get(dsandbox.id));
    },
    expected: ProviderUnavailableError,
  },
  'DaytonaBadGatewayError (502)': {
    produce: () => {
      daytona.inject({ kind: 'server-error', status: 502 }, { path: `/api/sandbox/${dsandbox.id}` });
      return failure(() => client.get(dsandbox.id));
    },
    expected: ProviderUnavailableError,
  },
  'DaytonaServiceUnavailableError (503)': {
    produce: () => {
      daytona.inject({ kind: 'server-error', status: 503 }, { path: `/api/sandbox/${dsandbox.id}` });
      return failure(() => client.get(dsandbox.id));
    },
    expected: ProviderUnavailableError,
  },
  'DaytonaConnectionError (no response)': {
    produce: () => failure(() => daytonaClient({ apiUrl: 'http://127.0.0.1:1/api' }).get('any')),
    expected: ProviderUnavailableError,
  },
  'DaytonaError with another HTTP status': {
    produce: () => {
      daytona.inject(
        { kind: 'reply', status: 422, json: apiBody(422, 'unprocessable', 'Unprocessable Entity') },
        { path: `/api/sandbox/${dsandbox.id}` },
      );
      return failure(() => client.get(dsandbox.id));
    },
    expected: ProviderValidationError,
  },
  'e2b SandboxError 400 Max instance length exceeded': {
    produce: () => {
      e2b.inject(
        { kind: 'reply', status: 400, json: { code: 400, message: 'Max instance length exceeded' } },
        { path: `/sandboxes/${esandbox.sandboxId}/timeout` },
      );
      return failure(() => Sandbox.setTimeout(esandbox.sandboxId, 60_000, e2bOpts()));
    },
    expected: ProviderLifetimeExceededError,
  },
  'e2b SandboxError 403 (no access to the resource)': {
    produce: () => {
      e2b.inject(
        { kind: 'reply', status: 403, json: { code: 403, message: "You don't have access to sandbox" } },
        { path: `/sandboxes/${esandbox.sandboxId}` },
      );
      return failure(() => Sandbox.getInfo(esandbox.sandboxId, e2bOpts()));
    },
    expected: ProviderAccessError,
  },
  'e2b NotEnoughSpaceError (envd 507)': {
    produce: () => {
      e2b.inject({ kind: 'server-error', status: 507 }, { path: '/files' });
      return failure(() => esandbox.files.write('/tmp/payload.txt', 'payload'));
    },
    expected: ProviderDiskFullError,
  },
  'e2b FileUploadError': {
    produce: () => {
      e2b.inject({ kind: 'server-error', status: 502 }, { path: /\/files\// });
      const template = Template({ fileContextPath: dir })
        .fromImage('ubuntu:24.04')
        .copy('payload.txt', '/payload.txt');
      return failure(() => Template.build(template, `errors-upload-${Date.now()}`, e2bOpts()));
    },
    expected: ProviderUnavailableError,
  },
  'e2b BuildError': {
    produce: () =>
      failure(() =>
        Template.build(
          Template().fromDockerfile('FROM ubuntu:24.04\nRUN FAIL_THIS_BUILD\n'),
          `errors-build-${Date.now()}`,
          e2bOpts(),
        ),
      ),
    expected: ProviderBuildError,
  },
  'e2b RateLimitError 429 over the concurrent sandboxes of the plan': {
    produce: () => failure(() => Sandbox.create('base', e2bOpts(e2bFull))),
    expected: ProviderQuotaError,
  },
  'e2b RateLimitError (429 after the SDK’s own Retry-After retries)': {
    produce: () => {
      e2b.inject(
        { kind: 'rate-limit', retryAfterSeconds: 1 },
        { path: `/sandboxes/${esandbox.sandboxId}`, retryAfterHeader: false },
      );
      return failure(() => Sandbox.getInfo(esandbox.sandboxId, e2bOpts()));
    },
    expected: ProviderRateLimitedError,
    retryAfterMs: null,
  },
  'e2b AuthenticationError (401)': {
    produce: () => failure(() => Sandbox.getInfo(esandbox.sandboxId, { ...e2bOpts(), apiKey: 'e2b_wrong' })),
    expected: ProviderAuthError,
  },
  'e2b NotFoundError / SandboxNotFoundError (404)': {
    produce: () => failure(() => Sandbox.getInfo('no-such-sandbox', e2bOpts())),
    expected: ProviderNotFoundError,
  },
  'e2b InvalidArgumentError (400)': {
    // The SDK refuses this itself, before any request.
    produce: () =>
      failure(() => Sandbox.create('base', { ...e2bOpts(), lifecycle: { onTimeout: 'explode' as never } })),
    expected: ProviderValidationError,
  },
  'e2b ServiceBusyError (503)': {
    produce: () => {
      e2b.inject({ kind: 'server-error', status: 503 }, { path: `/sandboxes/${esandbox.sandboxId}` });
      return failure(() => Sandbox.getInfo(esandbox.sandboxId, e2bOpts()));
    },
    expected: ProviderUnavailableError,
  },
  'e2b TimeoutError (envd unavailable, deadline)': {
    produce: () => failure(() => esandbox.commands.run('sleep 5', { timeoutMs: 300 })),
    expected: ProviderUnavailableError,
  },
  'e2b SandboxError with an HTTP status': {
    // A keep-alive while E2B pauses the sandbox: 409, changing state.
    produce: async () => {
      const pausing = await Sandbox.create('base', e2bOpts());
      e2b.holdPausing(pausing.sandboxId, 60_000);
      return failure(() => Sandbox.setTimeout(pausing.sandboxId, 60_000, e2bOpts()));
    },
    expected: ProviderBusyError,
  },
  'e2b SandboxError from envd RPC (unknown code)': {
    produce: () => {
      e2b.inject({ kind: 'server-error', status: 500 }, { path: '/process.Process/Start' });
      return failure(() => esandbox.commands.run('true'));
    },
    expected: ProviderUnavailableError,
  },
  'ProviderHttpError (plain fetch: any status)': {
    // Our own error class (Platinum's plain-fetch adapter), not an SDK's.
    produce: async () => new ProviderHttpError(429, 'slow down', '3'),
    expected: ProviderRateLimitedError,
    retryAfterMs: 3_000,
  },
  'DOMException TimeoutError / AbortError (request timeout)': {
    produce: () => {
      e2b.inject({ kind: 'slow', delayMs: 1_000 }, { path: '/slow' });
      return failure(() => fetch(`${e2b.url}/slow`, { signal: AbortSignal.timeout(100) }));
    },
    expected: ProviderUnavailableError,
  },
  'fetch TypeError (connection refused / reset)': {
    produce: () => failure(() => fetch('http://127.0.0.1:1/')),
    expected: ProviderUnavailableError,
  },
};

/** The error the row's SDK call fails with. */
const produce = (source: string): Promise<unknown> => {
  const row = ROWS[source];
  if (!row) throw new Error(`no example for ${source}`);
  return row.produce();
};

describe('the provider error mapping table, on errors the SDKs raise against the emulators', () => {
  it('has one example for every row and no example without a row', () => {
    expect(Object.keys(ROWS).sort()).toEqual(ERROR_MAPPING.map((row) => row.source).sort());
  });

  it.each(ERROR_MAPPING.map((row) => [row.source]))('maps %s', async (source) => {
    const row = ROWS[source] as Row;
    const error = await produce(source);
    // The row that maps it is this one: the example is what the row is for.
    expect(ERROR_MAPPING.find((r) => r.matches(error))?.source).toBe(source);
    const mapped = toProviderError(error, context);
    expect(mapped).toBeInstanceOf(row.expected);
    expect((mapped as Error & { cause?: unknown }).cause).toBe(error);
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

  it('reads the status E2B puts in a BuildError message: 5xx retried, 409 busy, 4xx final, none a build failure', async () => {
    const build = (name: string, cpuCount = 2) =>
      failure(() =>
        Template.build(Template().fromDockerfile('FROM ubuntu:24.04\nRUN true\n'), name, {
          ...e2bOpts(),
          cpuCount,
        }),
      );
    e2b.inject({ kind: 'server-error', status: 500 }, { path: '/v3/templates' });
    expect(toProviderError(await build(`errors-500-${Date.now()}`), context)).toBeInstanceOf(
      ProviderUnavailableError,
    );
    e2b.inject(
      { kind: 'reply', status: 409, json: { code: 409, message: 'build in progress' } },
      { path: '/v3/templates' },
    );
    expect(toProviderError(await build(`errors-409-${Date.now()}`), context)).toBeInstanceOf(
      ProviderBusyError,
    );
    expect(toProviderError(await build(`errors-400-${Date.now()}`, 3), context)).toBeInstanceOf(
      ProviderValidationError,
    );
  });

  it('tells a resource limit and a region or template without access apart from a bad key', async () => {
    const quota = toProviderError(
      await produce('DaytonaValidationError (400) over a resource limit'),
      context,
    );
    expect(quota).toBeInstanceOf(ProviderQuotaError);
    expect((quota as Error).message).not.toContain('Set a valid key');
    expect((quota as Error).message).toContain('DAYTONA_MAX_');
    const access = toProviderError(await produce('e2b SandboxError 403 (no access to the resource)'), {
      provider: 'E2B',
      operation: 'buildSnapshot',
    });
    expect(access).toBeInstanceOf(ProviderAccessError);
    expect((access as Error).message).toContain('The API key is valid');
    // A bare 403 from Daytona is still the key's permissions.
    expect(toProviderError(await produce('DaytonaAuthorizationError (403)'), context)).toBeInstanceOf(
      ProviderAuthError,
    );
  });

  it('leaves errors the table does not know unchanged', () => {
    const error = new RangeError('a bug of ours');
    expect(toProviderError(error, context)).toBe(error);
  });

  it('names the environment variable to fix in an auth error', async () => {
    const error = toProviderError(await produce('e2b AuthenticationError (401)'), {
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
        if (calls < 3) throw await produce('DaytonaValidationError (400) state change in progress');
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
