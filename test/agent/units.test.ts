import { spawn } from 'node:child_process';
import { type IncomingMessage, type Server, type ServerResponse, createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { mkdir, mkdtemp, readFile, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, test } from 'vitest';
import { waitFor } from '../support/wait';
import { z } from 'zod';
import { parseAgentEnv } from '../../agent/env';
import { TurnTracker, turnUpdateFrom } from '../../agent/events';
import { createLogger } from '../../agent/logger';
import { ApiClient, type ApiClientOptions } from '../../agent/api-client';
import { LeaseKeeper } from '../../agent/lease';
import { Supervisor } from '../../agent/supervisor';
import { Telemetry, createSystemReaders, parseCgroupLimit } from '../../agent/telemetry';
import { parseObject, prettify, type Shape } from '../../agent/validate';
import { signUserContext, UserContextVerifier, verifyUserContext } from '../../contract/user-context';

const GiB = 1024 ** 3;

/** Starts a test server on a free port; the daemon's API client pointed at it, with a silent logger. */
async function listenWithClient(
  server: Server,
  options: Partial<ApiClientOptions> = {},
): Promise<{ api: ApiClient; logger: ReturnType<typeof createLogger> }> {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const logger = createLogger('silent');
  const apiUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return { logger, api: new ApiClient({ apiUrl, token: 't', logger, ...options }) };
}

describe('user context', () => {
  const token = 'sandbox-token';
  const now = 1_800_000_000;

  test('a header signed with the sandbox token for this session verifies', () => {
    const header = signUserContext(
      { sessionId: 's1', userId: 'u1', audience: 'control', ttlSeconds: 60, nowSeconds: now },
      token,
    );
    expect(header).toMatch(/^v1\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$/);
    expect(verifyUserContext(header, token, 's1', now + 10)).toEqual({
      ok: true,
      claims: { sid: 's1', sub: 'u1', iat: now, exp: now + 60, aud: 'control' },
    });
  });

  test('the documented key derivation and signature produce the same header', async () => {
    const { createHash, createHmac } = await import('node:crypto');
    const payload = Buffer.from(
      JSON.stringify({ sid: 's1', sub: 'u1', iat: now, exp: now + 60, aud: 'control' }),
    ).toString('base64url');
    const key = createHash('sha256').update(`singulacomp-user-context\0${token}`).digest();
    const signature = createHmac('sha256', key).update(`v1.${payload}`).digest('base64url');
    expect(
      signUserContext(
        { sessionId: 's1', userId: 'u1', audience: 'control', ttlSeconds: 60, nowSeconds: now },
        token,
      ),
    ).toBe(`v1.${payload}.${signature}`);
  });

  test('forged, tampered, expired, over-long and other-session headers are refused with 401 or 403', () => {
    const good = signUserContext(
      { sessionId: 's1', userId: 'u1', audience: 'control', ttlSeconds: 60, nowSeconds: now },
      token,
    );
    const [, payload, signature] = good.split('.');
    const tampered = `v1.${Buffer.from(JSON.stringify({ sid: 's1', sub: 'admin', iat: now, exp: now + 60 })).toString('base64url')}.${signature}`;
    const longLived = `v1.${Buffer.from(JSON.stringify({ sid: 's1', sub: 'u1', iat: now, exp: now + 3600 })).toString('base64url')}`;
    const cases: Array<[string | undefined, number]> = [
      [undefined, 401],
      ['', 401],
      ['v2.a.b', 401],
      [`v1.${payload}`, 401],
      [
        signUserContext(
          { sessionId: 's1', userId: 'u1', audience: 'control', nowSeconds: now },
          'other-token',
        ),
        401,
      ],
      [tampered, 401],
      [`${longLived}.${signature}`, 401],
      [
        signUserContext(
          { sessionId: 's1', userId: 'u1', audience: 'control', ttlSeconds: 60, nowSeconds: now - 120 },
          token,
        ),
        401,
      ],
      [
        signUserContext(
          { sessionId: 's2', userId: 'u1', audience: 'control', ttlSeconds: 60, nowSeconds: now },
          token,
        ),
        403,
      ],
    ];
    for (const [header, status] of cases) {
      const verdict = verifyUserContext(header, token, 's1', now + 1);
      expect(verdict.ok ? 200 : verdict.status, String(header)).toBe(status);
    }
  });
  test('the per-server verifier gives the same verdicts and re-checks the clock for a header it saw', () => {
    const verifier = new UserContextVerifier(token, 's1');
    const good = signUserContext(
      { sessionId: 's1', userId: 'u1', audience: 'control', ttlSeconds: 60, nowSeconds: now },
      token,
    );
    const forged = signUserContext(
      { sessionId: 's1', userId: 'u1', audience: 'control', nowSeconds: now },
      'other-token',
    );
    const other = signUserContext(
      { sessionId: 's2', userId: 'u1', audience: 'control', ttlSeconds: 60, nowSeconds: now },
      token,
    );
    for (const at of [now + 1, now + 2]) {
      expect(verifier.verify(good, at)).toEqual(verifyUserContext(good, token, 's1', at));
      expect(verifier.verify(forged, at)).toEqual({
        ok: false,
        status: 401,
        reason: 'bad user context signature',
      });
      expect(verifier.verify(other, at)).toEqual({
        ok: false,
        status: 403,
        reason: 'user context is for another session',
      });
    }
    // Seen and accepted before; expired now.
    expect(verifier.verify(good, now + 60)).toEqual({
      ok: false,
      status: 401,
      reason: 'user context expired',
    });
    // Issued in the future for this clock, though verified at a later one.
    const later = signUserContext(
      { sessionId: 's1', userId: 'u1', audience: 'control', ttlSeconds: 60, nowSeconds: now + 100 },
      token,
    );
    expect(verifier.verify(later, now + 100).ok).toBe(true);
    expect(verifier.verify(later, now).ok).toBe(false);
    expect(verifier.verify(undefined)).toEqual({ ok: false, status: 401, reason: 'missing user context' });
  });
});

describe('turn state', () => {
  test('OpenCode status events map to busy, retry, idle and error, aborts excluded', () => {
    const ev = (type: string, properties: Record<string, unknown>) => turnUpdateFrom({ type, properties });
    expect(ev('session.status', { sessionID: 'a', status: { type: 'busy' } })?.state).toBe('busy');
    expect(
      ev('session.status', { sessionID: 'a', status: { type: 'retry', attempt: 2, message: '429' } }),
    ).toEqual({
      opencodeSessionId: 'a',
      state: 'retry',
      message: 'retry attempt 2: 429',
    });
    expect(ev('session.idle', { sessionID: 'a' })?.state).toBe('idle');
    expect(
      ev('session.error', { sessionID: 'a', error: { name: 'APIError', data: { message: 'boom' } } }),
    ).toEqual({
      opencodeSessionId: 'a',
      state: 'error',
      message: 'APIError: boom',
    });
    expect(ev('session.error', { sessionID: 'a', error: { name: 'MessageAbortedError' } })).toBeNull();
    expect(ev('message.updated', { sessionID: 'a' })).toBeNull();
  });

  test('the aggregate stays busy while any session is busy and an error is not overwritten by its idle', () => {
    const tracker = new TurnTracker();
    const seen: string[] = [];
    tracker.on('change', (change) => seen.push(change.state));
    tracker.set('a', 'busy');
    tracker.set('b', 'busy');
    tracker.set('a', 'idle');
    tracker.set('b', 'error', 'APIError: boom');
    tracker.set('b', 'idle');
    tracker.set('a', 'retry', 'retry attempt 1');
    tracker.set('a', 'busy');
    tracker.expectAbort('a', 'SandboxMemoryGuard: …');
    tracker.set('a', 'busy');
    tracker.set('a', 'idle');
    expect(seen).toEqual(['busy', 'error', 'retry', 'busy', 'error']);
    expect(tracker.turnInFlight).toBe(false);
  });
});

describe('telemetry readers', () => {
  async function fakeRoots(files: Record<string, string>): Promise<{ procRoot: string; cgroupRoot: string }> {
    const root = await mkdtemp(join(tmpdir(), 'agent-proc-'));
    for (const [path, text] of Object.entries(files)) {
      await mkdir(join(root, path, '..'), { recursive: true });
      await writeFile(join(root, path), text);
    }
    return { procRoot: join(root, 'proc'), cgroupRoot: join(root, 'cgroup') };
  }
  const meminfo = `MemTotal:       16777216 kB\nMemFree:         1048576 kB\nMemAvailable:    8388608 kB\n`;

  test('a cgroup v2 limit below the box total bounds memory; usage comes from memory.current', async () => {
    const readers = createSystemReaders(
      await fakeRoots({
        'proc/meminfo': meminfo,
        'cgroup/memory.max': `${4 * GiB}\n`,
        'cgroup/memory.current': `${3 * GiB}\n`,
        'proc/loadavg': '1.25 0.80 0.50 2/300 4242\n',
        'proc/4242/status': 'Name:\topencode\nVmRSS:\t  204800 kB\n',
      }),
    );
    expect(await readers.memory()).toEqual({ usedBytes: 3 * GiB, limitBytes: 4 * GiB });
    expect(await readers.load1()).toBe(1.25);
    expect(await readers.processRss(4242)).toBe(200 * 1024 * 1024);
  });

  test("'max', a v1 sentinel or no cgroup at all fall back to the box total", async () => {
    expect(parseCgroupLimit('max\n', 16 * GiB)).toBeNull();
    expect(parseCgroupLimit('9223372036854771712\n', 16 * GiB)).toBeNull();
    expect(parseCgroupLimit(`${2 * GiB}`, 16 * GiB)).toBe(2 * GiB);
    const v1 = createSystemReaders(
      await fakeRoots({
        'proc/meminfo': meminfo,
        'cgroup/memory/memory.limit_in_bytes': '9223372036854771712',
      }),
    );
    expect(await v1.memory()).toEqual({ usedBytes: 8 * GiB, limitBytes: 16 * GiB });
  });
});

describe('telemetry reports', () => {
  test('against a server that is behind, one report is on its way at a time: interval ticks are skipped, a state change follows', async () => {
    // A control plane that answers only when the test says so, counting requests it holds at once.
    const held: Array<{ reason: string; res: ServerResponse }> = [];
    const received: string[] = [];
    let open = 0;
    let mostOpen = 0;
    const server = createServer(async (req: IncomingMessage, res) => {
      let body = '';
      for await (const chunk of req) body += chunk;
      const reason = (JSON.parse(body) as { variables: { input: { reason: string } } }).variables.input
        .reason;
      received.push(reason);
      open += 1;
      mostOpen = Math.max(mostOpen, open);
      held.push({ reason, res });
    });
    const { api, logger } = await listenWithClient(server);
    const answer = () => {
      const next = held.shift()!;
      open -= 1;
      next.res.writeHead(200, { 'content-type': 'application/json' });
      next.res.end(
        JSON.stringify({
          data: { reportTelemetry: { __typename: 'ReportTelemetrySuccess', sample: { at: 'now' } } },
        }),
      );
      return next.reason;
    };
    const telemetry = new Telemetry({
      api,
      logger,
      readers: createSystemReaders(),
      workspace: tmpdir(),
      intervalMs: 60_000,
      sandboxId: () => 'sandbox-1',
      opencodePid: () => undefined,
    });
    try {
      const first = telemetry.report('INTERVAL');
      await waitFor(() => held.length === 1, 10_000, 'the first report to arrive');
      // Still on its way: the next tick is skipped, a state change is sampled and waits its turn.
      expect(await telemetry.report('INTERVAL')).toBeNull();
      expect(telemetry.skipped).toBe(1);
      const change = telemetry.report('STATE_CHANGE');
      expect(answer()).toBe('INTERVAL');
      expect(await first).toMatchObject({ sandboxId: 'sandbox-1', reason: 'INTERVAL' });
      await waitFor(() => held.length === 1, 10_000, 'the state change to follow');
      expect(answer()).toBe('STATE_CHANGE');
      expect(await change).toMatchObject({ sandboxId: 'sandbox-1', reason: 'STATE_CHANGE' });
      expect(received).toEqual(['INTERVAL', 'STATE_CHANGE']);
      expect(mostOpen).toBe(1);
      // Caught up: the next tick is sent again.
      const after = telemetry.report('INTERVAL');
      await waitFor(() => held.length === 1, 10_000, 'the next tick');
      expect(answer()).toBe('INTERVAL');
      expect(await after).toMatchObject({ reason: 'INTERVAL' });
      expect(telemetry.skipped).toBe(1);
    } finally {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    }
  });
});

describe('execution lease keeper', () => {
  test('an acquire whose answer was lost is retried with its key; renewals carry the generation; the next acquire takes a new key', async () => {
    // A control plane that keeps a live lease for a repeated acquire key, as the real one does, and
    // loses its first three answers after applying the call: the API client's two attempts fail,
    // and the keeper's next tick tries again.
    const calls: Array<Record<string, unknown>> = [];
    const lease = { generation: 0, key: null as string | null, released: true };
    let answersToLose = 3;
    const server = createServer(async (req: IncomingMessage, res) => {
      let body = '';
      for await (const chunk of req) body += chunk;
      const { query, variables } = JSON.parse(body) as {
        query: string;
        variables: { input: { generation?: number; acquisition?: string } };
      };
      const { input } = variables;
      const operation = query.includes('mutation ReleaseLease') ? 'releaseLease' : 'renewLease';
      calls.push({ operation, ...input });
      if (operation === 'releaseLease') {
        if (input.generation === lease.generation) lease.released = true;
      } else if (input.generation === undefined) {
        if (lease.released || !input.acquisition || input.acquisition !== lease.key) lease.generation += 1;
        lease.key = input.acquisition ?? null;
        lease.released = false;
      }
      if (answersToLose > 0) {
        answersToLose -= 1;
        req.socket.destroy();
        return;
      }
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(
        JSON.stringify({
          data: {
            [operation]: {
              __typename: operation === 'releaseLease' ? 'ReleaseLeaseSuccess' : 'RenewLeaseSuccess',
              lease: { generation: lease.generation, expiresAt: 'later', releasedAt: null },
            },
          },
        }),
      );
    });
    const { api, logger } = await listenWithClient(server, {
      backoff: { initialMs: 20, maxMs: 20 },
      maxAttempts: 2,
    });
    const keeper = new LeaseKeeper({
      api,
      logger,
      sessionId: 'session-1',
      renewIntervalMs: 200,
    });
    try {
      keeper.hold();
      await waitFor(() => calls.length >= 5, 10_000, 'four acquire attempts and a renewal');
      const [attempt, ...rest] = calls;
      expect(attempt).toEqual({
        operation: 'renewLease',
        sessionId: 'session-1',
        acquisition: expect.any(String),
      });
      expect(String(attempt!.acquisition)).toMatch(/^[0-9a-f-]{36}$/);
      expect(rest.slice(0, 3)).toEqual([attempt, attempt, attempt]);
      expect(rest[3]).toEqual({ operation: 'renewLease', sessionId: 'session-1', generation: 1 });
      expect(keeper.generation).toBe(1);
      expect(lease.generation).toBe(1);

      await keeper.release();
      expect(calls.at(-1)).toEqual({ operation: 'releaseLease', sessionId: 'session-1', generation: 1 });
      expect(keeper.held).toBe(false);
      const seen = calls.length;
      keeper.hold();
      await waitFor(() => keeper.generation === 2, 10_000, 'the second acquire');
      const next = calls[seen]!;
      expect(next).toEqual({
        operation: 'renewLease',
        sessionId: 'session-1',
        acquisition: expect.any(String),
      });
      expect(next.acquisition).not.toBe(attempt!.acquisition);
      expect(lease.generation).toBe(2);
    } finally {
      await keeper.stop();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    }
  });

  test('a renewal held up behind a slow one is not followed by another within moments', async () => {
    // The first answer takes one and a half intervals: the tick meanwhile queues a renewal that goes
    // out late, right after it, and the next tick comes soon after that one.
    const interval = 400;
    const arrivals: number[] = [];
    const server = createServer((req, res) => {
      req.resume();
      req.on('end', () => {
        arrivals.push(performance.now());
        const answer = () => {
          res.writeHead(200, { 'content-type': 'application/json' });
          res.end(
            JSON.stringify({
              data: {
                renewLease: {
                  __typename: 'RenewLeaseSuccess',
                  lease: { generation: 1, expiresAt: 'later', releasedAt: null },
                },
              },
            }),
          );
        };
        if (arrivals.length === 1) setTimeout(answer, interval * 1.5);
        else answer();
      });
    });
    const { api, logger } = await listenWithClient(server);
    const keeper = new LeaseKeeper({
      api,
      logger,
      sessionId: 'session-1',
      renewIntervalMs: interval,
    });
    try {
      keeper.hold();
      await waitFor(() => arrivals.length >= 4, 10_000, 'four renewals');
      const gaps = arrivals.slice(1).map((at, i) => at - arrivals[i]!);
      // The second renewal waited for the first answer; every renewal after it keeps its distance.
      for (const gap of gaps.slice(1)) expect(gap).toBeGreaterThan(interval / 2);
    } finally {
      await keeper.stop();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    }
  });
});

describe('daemon configuration', () => {
  test('the documented environment and host flags parse into the agent settings', () => {
    const env = parseAgentEnv(
      {
        SINGULACOMP_SESSION_ID: 's',
        SINGULACOMP_BRANCH_NAME: 's',
        SINGULACOMP_PROJECT_ID: 'p',
        SINGULACOMP_TOKEN: 't',
        SINGULACOMP_API_URL: 'http://127.0.0.1:4000',
        SINGULACOMP_SERVICE_PORT: '8123',
        SINGULACOMP_ATTACHMENT_OFFLOAD: '0',
      },
      ['--workspace', '/w', '--opencode-port', '5000'],
    );
    expect(env).toMatchObject({
      servicePort: 8123,
      workspace: '/w',
      home: '/opt/singulacomp/home',
      opencodePort: 5000,
      memoryGuardPct: 92,
      attachmentOffload: false,
    });
  });

  test("the gateway's models the server listed parse into the agent settings; a list without ids is refused", () => {
    const base = {
      SINGULACOMP_SESSION_ID: 's',
      SINGULACOMP_PROJECT_ID: 'p',
      SINGULACOMP_TOKEN: 't',
      SINGULACOMP_API_URL: 'http://127.0.0.1:4000',
    };
    expect(parseAgentEnv({ ...base, SINGULACOMP_LLM_MODELS: '["a","b"]' }, []).gatewayModels).toEqual([
      'a',
      'b',
    ]);
    expect(parseAgentEnv(base, []).gatewayModels).toBeUndefined();
    // The server's word that the gateway serves none: nothing to ask the gateway at the start.
    expect(parseAgentEnv({ ...base, SINGULACOMP_LLM_MODELS: '[]' }, []).gatewayModels).toEqual([]);
    for (const bad of ['["a",1]', '[""]', '{"a":1}', 'not json']) {
      expect(() => parseAgentEnv({ ...base, SINGULACOMP_LLM_MODELS: bad }, [])).toThrowError(
        /SINGULACOMP_LLM_MODELS/,
      );
    }
  });

  test('every configuration problem is reported at once', () => {
    expect(() =>
      parseAgentEnv({ SINGULACOMP_API_URL: 'not a url', SINGULACOMP_SERVICE_PORT: 'x' }, [
        '--opencode-port',
        'abc',
      ]),
    ).toThrowError(
      /SINGULACOMP_SESSION_ID[\s\S]*SINGULACOMP_TOKEN[\s\S]*SINGULACOMP_API_URL[\s\S]*SINGULACOMP_SERVICE_PORT[\s\S]*--opencodePort/,
    );
  });
});

describe('input checks', () => {
  // The daemon's checks replaced zod schemas; their results and texts must stay zod's.
  const cases: Array<[string, Shape, z.ZodType, unknown[]]> = [
    [
      'message body',
      { text: { type: 'string', min: 1, max: 5 } },
      z.object({ text: z.string().min(1).max(5) }),
      [
        { text: 'hi' },
        { text: '' },
        { text: '123456' },
        { text: 3 },
        {},
        [],
        null,
        'text',
        { text: 'a', x: 1 },
      ],
    ],
    [
      'reload body',
      {
        reloadId: { type: 'string', min: 1 },
        noRepo: { type: 'boolean', optional: true },
        force: { type: 'boolean', optional: true },
      },
      z.object({
        reloadId: z.string().min(1),
        noRepo: z.boolean().optional(),
        force: z.boolean().optional(),
      }),
      [{ reloadId: 'r' }, { reloadId: 'r', noRepo: true, force: false }, { noRepo: 'yes' }, { reloadId: '' }],
    ],
    [
      'environment values',
      {
        url: { type: 'url' },
        port: { type: 'number', int: true, min: 0, max: 65_535, default: 8000 },
        pct: { type: 'number', gt: 0, max: 100, default: 92 },
        interval: { type: 'number', int: true, min: 100, max: 600_000, optional: true },
        flag: { type: 'enum', values: ['0', '1'], default: '1' },
        ports: { type: 'string', pattern: /^\d{1,5}(,\d{1,5})*$/, patternMessage: 'ports', optional: true },
      },
      z.object({
        url: z.url(),
        port: z.coerce.number().int().min(0).max(65_535).default(8000),
        pct: z.coerce.number().gt(0).max(100).default(92),
        interval: z.coerce.number().int().min(100).max(600_000).optional(),
        flag: z.enum(['0', '1']).default('1'),
        ports: z
          .string()
          .regex(/^\d{1,5}(,\d{1,5})*$/, 'ports')
          .optional(),
      }),
      [
        { url: ' http://127.0.0.1:4000 ' },
        { url: 'not a url', port: 'x', pct: '0', interval: '1.5', flag: '2', ports: '1,a' },
        { url: 'http://h', port: '', pct: '100', interval: '99', ports: '80,443' },
        { url: 'http://h', port: '70000', pct: '101', interval: 'Infinity' },
        {},
      ],
    ],
  ];
  test.each(cases)('%s: the same results and messages as the zod schema', (_name, shape, schema, inputs) => {
    for (const input of inputs) {
      const ours = parseObject(shape, input);
      const theirs = schema.safeParse(input);
      expect(ours.success, JSON.stringify(input)).toBe(theirs.success);
      if (ours.success && theirs.success) expect(ours.data).toEqual(theirs.data);
      if (!ours.success && !theirs.success) {
        expect(ours.issues).toEqual(theirs.error.issues.map(({ path, message }) => ({ path, message })));
        expect(prettify(ours.issues)).toBe(z.prettifyError(theirs.error));
      }
    }
  });
});

describe('daemon log lines', () => {
  function capture(level: string) {
    const lines: string[] = [];
    const logger = createLogger(level, { write: (text) => lines.push(text) });
    return { logger, records: () => lines.map((text) => JSON.parse(text) as Record<string, unknown>), lines };
  }

  test("one JSON object per line in pino's shape, bindings of children included", () => {
    const { logger, records, lines } = capture('info');
    const before = Date.now();
    logger.child({ module: 'lease' }).warn({ generation: 3 }, 'lease fenced');
    logger.info('daemon stopping');
    expect(lines.every((text) => text.endsWith('\n') && !text.slice(0, -1).includes('\n'))).toBe(true);
    const [fenced, stopping] = records();
    expect(fenced).toMatchObject({
      level: 40,
      pid: process.pid,
      name: 'singulacomp-agent',
      module: 'lease',
      generation: 3,
      msg: 'lease fenced',
    });
    expect(fenced!.time).toBeGreaterThanOrEqual(before);
    expect(stopping).toMatchObject({ level: 30, msg: 'daemon stopping' });
    expect(stopping).not.toHaveProperty('module');
  });

  test('lines below the level, and every line at silent, are not written', () => {
    const warn = capture('warn');
    warn.logger.debug('d');
    warn.logger.info({ a: 1 }, 'i');
    warn.logger.error({ b: 2 }, 'e');
    expect(warn.records().map((r) => r.msg)).toEqual(['e']);
    const silent = capture('silent');
    silent.logger.fatal('f');
    expect(silent.lines).toEqual([]);
    expect(() => createLogger('loud')).toThrow('unknown log level "loud"');
  });

  test("tokens, authorization and user-context headers are redacted at the top and one level down, without changing the caller's objects", () => {
    const { logger, records } = capture('info');
    const request = {
      headers: { authorization: 'Bearer secret-1', 'x-singulacomp-user-context': 'v1.a.b', accept: '*/*' },
    };
    const fields = {
      token: 'secret-2',
      request,
      env: { SINGULACOMP_TOKEN: 'secret-3', HOME: '/home/agent' },
      nested: { token: 'secret-4', keep: 'visible' },
      deep: { a: { token: 'kept-three-levels-down' } },
    };
    logger.info(fields, 'call');
    logger.child({ authorization: 'Basic secret-5' }).info('child');
    const [call, child] = records();
    expect(call).toMatchObject({
      token: '[redacted]',
      request: {
        headers: { authorization: '[redacted]', 'x-singulacomp-user-context': '[redacted]', accept: '*/*' },
      },
      env: { SINGULACOMP_TOKEN: '[redacted]', HOME: '/home/agent' },
      nested: { token: '[redacted]', keep: 'visible' },
      deep: { a: { token: 'kept-three-levels-down' } },
    });
    expect(child).toMatchObject({ authorization: '[redacted]', msg: 'child' });
    expect(JSON.stringify(records())).not.toMatch(/secret-/);
    expect(request.headers.authorization).toBe('Bearer secret-1');
    expect(fields.env.SINGULACOMP_TOKEN).toBe('secret-3');
  });

  test('a daemon whose stdout reader went away (EPIPE) keeps running and stops logging', async () => {
    const logger = new URL('../../agent/logger.ts', import.meta.url).pathname;
    // Logs one line, waits for the parent to close its end of the pipe, then logs again: the
    // broken pipe's error arrives on the next tick, before the child reports that it is alive.
    const script = [
      `import { createLogger } from ${JSON.stringify(logger)};`,
      "const log = createLogger('info');",
      "log.info('first');",
      "process.stdin.once('data', () => {",
      "  for (let i = 0; i < 20; i++) log.warn({ i }, 'after the reader left');",
      "  setImmediate(() => setImmediate(() => { process.stderr.write('alive'); process.exit(0); }));",
      '});',
    ].join('\n');
    const child = spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], {
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    let stderr = '';
    child.stderr.on('data', (chunk: Buffer) => {
      stderr += chunk.toString();
    });
    const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
    const first = await new Promise<string>((resolve) =>
      child.stdout.once('data', (chunk: Buffer) => resolve(chunk.toString())),
    );
    expect(JSON.parse(first)).toMatchObject({ level: 30, msg: 'first' });
    child.stdout.destroy();
    child.stdin.write('go\n');
    expect(await exited).toBe(0);
    expect(stderr).toBe('alive');
  });

  test('errors are written with type, message and stack; a cyclic field keeps the line', () => {
    const { logger, records } = capture('info');
    logger.error({ err: new TypeError('bad input') }, 'failed');
    const cyclic: Record<string, unknown> = { name: 'loop' };
    cyclic.self = cyclic;
    logger.warn({ cyclic }, 'still logged');
    const [failed, loop] = records();
    expect(failed!.err).toMatchObject({ type: 'TypeError', message: 'bad input' });
    expect(String((failed!.err as { stack: string }).stack)).toContain('TypeError: bad input');
    expect(loop).toMatchObject({ level: 40, msg: 'still logged' });
    expect(String(loop!.logError)).toMatch(/circular/i);
    expect(loop).not.toHaveProperty('cyclic');
  });
});

describe('OpenCode start', () => {
  /**
   * A stand-in for `opencode serve --port N` running `handler` (the body of a node:http request
   * handler, with `healthy` false until SIGUSR2). On SIGUSR2 it becomes healthy and prints its
   * listening line, as OpenCode does when it can answer; it prints a line once its port is open,
   * as OpenCode prints a warning first. Each health request is marked in a file, not on stdout,
   * which would wake the poll itself.
   */
  async function fakeOpencode(handler: string, healthRequestTimeoutMs?: number) {
    const dir = await mkdtemp(join(tmpdir(), 'singulacomp-fake-opencode-'));
    const script = join(dir, 'fake-opencode.mjs');
    await writeFile(
      script,
      `import { createServer } from 'node:http';
import { appendFileSync } from 'node:fs';
const port = Number(process.argv[process.argv.indexOf('--port') + 1]);
let healthy = false;
process.on('SIGUSR2', () => { healthy = true; console.log('opencode server listening on http://127.0.0.1:' + port); });
createServer((req, res) => {
  appendFileSync(${JSON.stringify(join(dir, 'polls'))}, 'x');
  ${handler}
}).listen(port, '127.0.0.1', () => console.log('started'));
`,
    );
    const bin = join(dir, 'opencode');
    await writeFile(bin, `#!/bin/sh\nexec '${process.execPath}' '${script}' "$@"\n`, { mode: 0o755 });
    const { OpencodeProcess } = await import('../../agent/opencode');
    const { freePort } = await import('../../contract/ports');
    const proc = new OpencodeProcess({
      bin,
      port: await freePort(),
      workspace: dir,
      home: dir,
      configDir: dir,
      logger: createLogger('silent'),
      ...(healthRequestTimeoutMs ? { healthRequestTimeoutMs } : {}),
    });
    const polls = async () => (await readFile(join(dir, 'polls'), 'utf8').catch(() => '')).length;
    return { proc, polls };
  }

  const ANSWER = `res.setHeader('content-type', 'application/json');
  res.end(JSON.stringify({ healthy, version: 'fake' }));`;

  /**
   * Polls the fake's health with an interval far beyond the test's timeout, makes it healthy
   * (SIGUSR2) once its first health request arrived, and returns how many requests it saw by the
   * time the poll returned: only OpenCode's output can end the pause.
   */
  async function healthyAfterOutput(handler: string, healthRequestTimeoutMs?: number): Promise<number> {
    const { proc, polls } = await fakeOpencode(handler, healthRequestTimeoutMs);
    try {
      const healthy = proc.waitHealthy(600_000, 600_000);
      await waitFor(async () => (await polls()) >= 1, 30_000, 'a first health request');
      proc.signal('SIGUSR2');
      await healthy;
      return await polls();
    } finally {
      await proc.stop(1_000);
    }
  }

  test('the health poll wakes when OpenCode prints, instead of waiting out its interval', async () => {
    expect(await healthyAfterOutput(ANSWER)).toBeGreaterThanOrEqual(2);
  }, 60_000);

  test('a health request OpenCode leaves unanswered while it boots is dropped when it prints', async () => {
    // Requests that arrive before SIGUSR2 are never answered, as OpenCode leaves those that
    // connect between opening its port and its listening line; the request timeout is far beyond
    // the test's, so only the output can end the wait.
    expect(await healthyAfterOutput(`if (!healthy) return;\n  ${ANSWER}`, 600_000)).toBeGreaterThanOrEqual(2);
  }, 60_000);
});

describe('supervisor boot', () => {
  test('the launch is prepared while the bootstrap claim is answered; a failed preparation fails the boot once the claim is', async () => {
    const events: string[] = [];
    let held: ServerResponse | null = null;
    const server = createServer((req, res) => {
      req.resume();
      req.on('end', () => {
        events.push('claim arrived');
        held = res;
      });
    });
    const { api, logger } = await listenWithClient(server);
    const supervisor = new Supervisor({
      api,
      logger,
      sessionId: 'session-1',
      bin: '/nonexistent/opencode',
      port: 1,
      workspace: tmpdir(),
      home: tmpdir(),
      configDir: tmpdir(),
      env: {},
      healthTimeoutMs: 1_000,
      healthPollMs: 50,
      restartBackoff: { initialMs: 10, maxMs: 10 },
      stableAfterMs: 1_000,
      stopGraceMs: 100,
      reportState: (state) => events.push(state),
      beforeLaunch: async () => {
        events.push('prepare started');
        // The gateway is down, say: the boot fails with it, but only once the claim is answered.
        throw new Error('cannot prepare');
      },
    });
    try {
      const booted = supervisor.boot();
      booted.catch(() => {});
      await waitFor(
        () => held !== null && events.includes('prepare started'),
        10_000,
        'the claim and the preparation',
      );
      // Both under way with the claim still unanswered; nothing launched.
      expect([...events].sort()).toEqual(['claim arrived', 'prepare started']);
      held!.writeHead(200, { 'content-type': 'application/json' });
      held!.end(
        JSON.stringify({
          data: {
            claimBootstrap: {
              __typename: 'ClaimBootstrapSuccess',
              sessionId: 'session-1',
              sandboxId: 'sandbox-1',
              prompt: null,
              turnLedgerId: null,
              agent: 'build',
              alreadyClaimed: false,
            },
          },
        }),
      );
      await expect(booted).rejects.toThrow('cannot prepare');
      expect(supervisor.bootstrap?.sandboxId).toBe('sandbox-1');
      expect(supervisor.current).toBeNull();
      expect(events.filter((e) => e === 'STARTING')).toEqual([]);
    } finally {
      await supervisor.stop();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    }
  });
});
