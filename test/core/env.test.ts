// The server's configuration is parsed once, with every problem reported in one error.
import { describe, expect, it } from 'vitest';
import { parseEnv } from '../../server/env';

describe('parseEnv', () => {
  it('reports every invalid variable at once, cross-field rules included', () => {
    let message = '';
    try {
      parseEnv({
        PORT: 'not-a-port',
        SINGULACOMP_RATES: '{"DAYTONA":{"cpuPerHourUsd":-1}}',
        SINGULACOMP_IDLE_TIMEOUT_MS: '0',
        PLATINUM_API_KEY: 'k',
      });
    } catch (error) {
      message = (error as Error).message;
    }
    expect(message.split('\n')[0]).toBe('Invalid environment:');
    expect(message).toContain('PORT:');
    expect(message).toContain('SINGULACOMP_RATES: DAYTONA.cpuPerHourUsd');
    expect(message).toContain('SINGULACOMP_IDLE_TIMEOUT_MS:');
    expect(message).toContain('PLATINUM_API_URL: required when PLATINUM_API_KEY is set');
    expect(message.split('\n')).toHaveLength(5);
  });

  it.each([
    [undefined, { http: true, jit: true, findManySql: true, statementNames: true, daemonPipe: true }],
    ['on', { http: true, jit: true, findManySql: true, statementNames: true, daemonPipe: true }],
    ['off', { http: false, jit: false, findManySql: false, statementNames: false, daemonPipe: false }],
    [
      'jit, statement-names',
      { http: false, jit: true, findManySql: false, statementNames: true, daemonPipe: false },
    ],
    ['daemon-pipe', { http: false, jit: false, findManySql: false, statementNames: false, daemonPipe: true }],
  ])('SINGULACOMP_FAST_PATHS=%s turns the fast paths on or off', (value, fastPaths) => {
    expect(parseEnv({ SINGULACOMP_FAST_PATHS: value }).fastPaths).toEqual(fastPaths);
  });

  it('refuses an unknown fast path, and the HTTP one without the compiled execution it runs', () => {
    expect(() => parseEnv({ SINGULACOMP_FAST_PATHS: 'jit,yoga' })).toThrow(
      /SINGULACOMP_FAST_PATHS\.1: each one of on, off, http, jit/,
    );
    expect(() => parseEnv({ SINGULACOMP_FAST_PATHS: 'http' })).toThrow(/http runs compiled: add jit/);
  });

  it('reports malformed rate JSON beside the other problems', () => {
    expect(() => parseEnv({ SINGULACOMP_RATES: '{', HOST: '' })).toThrow(/SINGULACOMP_RATES: not JSON/);
  });

  it('maps variables to the nested camelCase configuration with defaults', () => {
    const env = parseEnv({
      PORT: '4100',
      SINGULACOMP_RATES: '{"E2B":{"cpuPerHourUsd":0.05}}',
      DAYTONA_API_KEY: 'dk',
      SINGULACOMP_LOCAL_PASS_ENV: 'A_B, C',
    });
    expect(env.port).toBe(4100);
    expect(env.rates).toEqual({ E2B: { cpuPerHourUsd: 0.05 } });
    expect(env.daytona).toEqual({
      apiKey: 'dk',
      apiUrl: 'https://app.daytona.io/api',
      target: null,
      caps: {},
      defaultImage: null,
    });
    expect(env.e2b).toBeNull();
    expect(env.localPassEnv).toEqual(['A_B', 'C']);
    expect(env.idleTimeoutMs).toBe(15 * 60_000);
    expect(env.graphiql).toBe(true);
  });

  it('reads the record settings: 30 days and 256 KiB by default, 0 days keeps records', () => {
    expect(parseEnv({}).record).toEqual({ retentionMs: 30 * 86_400_000, maxOutputChars: 262_144 });
    expect(
      parseEnv({ SINGULACOMP_RECORD_RETENTION_DAYS: '0', SINGULACOMP_RECORD_MAX_OUTPUT_BYTES: '4096' })
        .record,
    ).toEqual({ retentionMs: 0, maxOutputChars: 4_096 });
    expect(() => parseEnv({ SINGULACOMP_RECORD_RETENTION_DAYS: '-1' })).toThrow(
      /SINGULACOMP_RECORD_RETENTION_DAYS:/,
    );
    expect(() => parseEnv({ SINGULACOMP_RECORD_MAX_OUTPUT_BYTES: '10' })).toThrow(
      /SINGULACOMP_RECORD_MAX_OUTPUT_BYTES:/,
    );
  });

  it('reads the webhook window in seconds: 300 by default, a positive whole number otherwise', () => {
    expect(parseEnv({}).webhookToleranceSeconds).toBe(300);
    expect(parseEnv({ SINGULACOMP_WEBHOOK_TOLERANCE_SECONDS: '60' }).webhookToleranceSeconds).toBe(60);
    for (const value of ['0', '-5', '1.5', 'soon']) {
      expect(() => parseEnv({ SINGULACOMP_WEBHOOK_TOLERANCE_SECONDS: value })).toThrow(
        /SINGULACOMP_WEBHOOK_TOLERANCE_SECONDS:/,
      );
    }
  });
});
