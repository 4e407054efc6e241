// Tokens and capabilities (R-AUTH-2…4) against a real server and PostgreSQL.
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type pg from 'pg';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import {
  CreatePersonalAccessTokenDocument,
  CreateServiceAccountTokenDocument,
  CreateSessionDocument,
  RevokeTokenDocument,
  SessionDocument,
  SessionsDocument,
  StopSessionDocument,
  ViewerDocument,
} from '../generated/graphql';
import type { TestApp } from '../support/app';
import { type AppWithProject, startAppWithProject } from '../support/fixtures';
import { createTestClock } from '../support/clock';
import { createTestRepo } from '../support/git';
import { waitFor } from '../support/wait';

const BASE62 = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';

/** Changes one character at `index` (negative: from the end) to another base62 character. */
function tamper(token: string, index: number): string {
  const i = index < 0 ? token.length + index : index;
  const c = token[i]!;
  const replacement = BASE62[(BASE62.indexOf(c) + 1) % 62]!;
  return token.slice(0, i) + replacement + token.slice(i + 1);
}

describe('tokens and capabilities', () => {
  let t: TestApp;
  let sql: pg.Client;
  const clock = createTestClock();
  const repo = createTestRepo();
  let projectId: string;

  async function createPat(scopes: string[], extra: { expiresAt?: string; token?: string } = {}) {
    const res = await t.request(
      CreatePersonalAccessTokenDocument,
      { input: { name: `pat ${scopes.join(' ')}`, scopes, expiresAt: extra.expiresAt } },
      extra.token,
    );
    const payload = res.data?.createPersonalAccessToken;
    if (payload?.__typename !== 'CreateTokenSuccess') throw new Error(JSON.stringify(res));
    return payload;
  }

  async function createSession(): Promise<string> {
    const res = await t.request(CreateSessionDocument, { input: { projectId } });
    if (res.data?.createSession.__typename !== 'CreateSessionSuccess') throw new Error(JSON.stringify(res));
    return res.data.createSession.session.sessionId;
  }

  /**
   * Personal and service-account tokens: what the token mutations can create. Sandbox tokens are
   * left out because provisioning mints them in the background for sessions created earlier.
   */
  function mintedTokenCount(): Promise<number> {
    return t.app.services.db.token.count({ where: { kind: { not: 'SANDBOX' } } });
  }

  /** The SINGULACOMP_TOKEN the LOCAL provider handed to the session's sandbox. */
  async function sandboxTokenOf(sessionId: string): Promise<string> {
    const sandbox = await waitFor(async () => {
      const s = await t.app.services.db.sandbox.findUnique({ where: { sessionId } });
      return s?.providerSandboxId ? s : null;
    });
    const config = JSON.parse(
      readFileSync(join(t.dataDir, 'sandboxes', sandbox.providerSandboxId!, 'sandbox.json'), 'utf8'),
    ) as { env: Record<string, string> };
    return config.env.SINGULACOMP_TOKEN!;
  }

  let kit: AppWithProject;

  beforeAll(async () => {
    kit = await startAppWithProject('tokens', { app: { now: clock.now }, repo });
    ({ app: t, sql } = kit);
    projectId = kit.project.id;
  });
  afterAll(async () => {
    await kit?.stop();
  });

  test('a tampered checksum is rejected as UNAUTHENTICATED without a database query', async () => {
    const { secret } = await createPat(['sessions:read']);
    for (const forged of [tamper(secret, -1), tamper(secret, 20), `${secret.slice(0, -1)}`]) {
      const before = t.app.services.database.stats.statements;
      const res = await t.request(ViewerDocument, {}, forged);
      expect(res.status).toBe(401);
      expect(res.errors?.[0]?.extensions?.code).toBe('UNAUTHENTICATED');
      expect(res.data).toBeNull();
      expect(t.app.services.database.stats.statements).toBe(before);
    }
    // The untampered token does reach the database (the check above can fail).
    const before = t.app.services.database.stats.statements;
    const ok = await t.request(ViewerDocument, {}, secret);
    expect(ok.data?.viewer.kind).toBe('PERSONAL_ACCESS');
    expect(t.app.services.database.stats.statements).toBeGreaterThan(before);
  });

  test('the plaintext of personal and service-account tokens is never stored, only its SHA-256', async () => {
    const pat = await createPat(['projects:read']);
    const sa = await t.request(CreateServiceAccountTokenDocument, {
      input: { name: 'ci-bot', scopes: ['sessions:read'] },
    });
    if (sa.data?.createServiceAccountToken.__typename !== 'CreateTokenSuccess')
      throw new Error(JSON.stringify(sa));
    const secrets = [pat.secret, sa.data.createServiceAccountToken.secret];
    expect(secrets[0]).toMatch(/^singulacomp_pat_[0-9A-Za-z]{38}$/);
    expect(secrets[1]).toMatch(/^singulacomp_sa_[0-9A-Za-z]{38}$/);
    const { rows } = await sql.query('SELECT * FROM "Token"');
    const dump = JSON.stringify(rows);
    for (const secret of secrets) {
      const body = secret.replace(/^singulacomp_(pat|sa)_/, '');
      expect(dump).not.toContain(secret);
      expect(dump).not.toContain(body.slice(4));
      const hash = createHash('sha256').update(secret).digest('hex');
      expect(rows.filter((r) => r.hash === hash)).toHaveLength(1);
    }
    // The secret is shown once: the token as read back carries only its display prefix.
    expect(pat.token.prefix).toBe(pat.secret.slice(0, 'singulacomp_pat_'.length + 4));
  });

  test('lastUsedAt is written when a token is used', async () => {
    const { secret, token } = await createPat(['sessions:read']);
    expect(token.lastUsedAt).toBeNull();
    const hash = createHash('sha256').update(secret).digest('hex');
    const { rows: before } = await sql.query('SELECT "lastUsedAt" FROM "Token" WHERE hash = $1', [hash]);
    expect(before[0]?.lastUsedAt).toBeNull();
    const startedAt = Date.now();
    expect((await t.request(ViewerDocument, {}, secret)).data?.viewer.kind).toBe('PERSONAL_ACCESS');
    const used = await waitFor(async () => {
      const { rows } = await sql.query<{ lastUsedAt: Date | null }>(
        'SELECT "lastUsedAt" FROM "Token" WHERE hash = $1',
        [hash],
      );
      return rows[0]?.lastUsedAt ?? null;
    });
    expect(used.getTime()).toBeGreaterThanOrEqual(startedAt - 1_000);
  });

  test('a revoked token is UNAUTHENTICATED on its next request', async () => {
    const { secret, token } = await createPat(['sessions:read', 'tokens:write']);
    expect((await t.request(ViewerDocument, {}, secret)).status).toBe(200);
    const revoked = await t.request(RevokeTokenDocument, { input: { tokenId: token.id } });
    expect(revoked.data?.revokeToken).toMatchObject({ __typename: 'RevokeTokenSuccess' });
    const res = await t.request(ViewerDocument, {}, secret);
    expect(res.status).toBe(401);
    expect(res.errors?.[0]?.extensions?.code).toBe('UNAUTHENTICATED');
    const { rows } = await sql.query<{ revokedAt: Date | null }>(
      'SELECT "revokedAt" FROM "Token" WHERE hash = $1',
      [createHash('sha256').update(secret).digest('hex')],
    );
    expect(rows[0]?.revokedAt).toBeInstanceOf(Date);
  });

  test('an expired token is UNAUTHENTICATED, both from the database and from the auth cache', async () => {
    // Never used before expiry: rejected by the row.
    const stale = await createPat(['sessions:read']);
    await sql.query(`UPDATE "Token" SET "expiresAt" = now() - interval '1 second' WHERE hash = $1`, [
      createHash('sha256').update(stale.secret).digest('hex'),
    ]);
    const fromRow = await t.request(ViewerDocument, {}, stale.secret);
    expect(fromRow.errors?.[0]?.extensions?.code).toBe('UNAUTHENTICATED');
    expect(fromRow.errors?.[0]?.message).toMatch(/expired/i);

    // Used (and cached) while valid, then expires. The server's clock stands still meanwhile, so
    // a slow machine cannot expire the token early or the cache entry (5 s) before the check.
    clock.freeze();
    try {
      const expiresAt = new Date(clock.now() + 1_500);
      const soon = await createPat(['sessions:read'], { expiresAt: expiresAt.toISOString() });
      expect((await t.request(ViewerDocument, {}, soon.secret)).data?.viewer.kind).toBe('PERSONAL_ACCESS');
      clock.advance(expiresAt.getTime() - clock.now() + 50);
      const fromCache = await t.request(ViewerDocument, {}, soon.secret);
      expect(fromCache.status).toBe(401);
      expect(fromCache.errors?.[0]?.extensions?.code).toBe('UNAUTHENTICATED');
    } finally {
      clock.resume();
    }
  });

  test('a token without sessions:write cannot create sessions, and one without tokens:write cannot mint tokens', async () => {
    const reader = await createPat(['sessions:read']);
    const before = await t.app.services.db.session.count();
    const res = await t.request(CreateSessionDocument, { input: { projectId } }, reader.secret);
    expect(res.errors?.[0]?.extensions?.code).toBe('FORBIDDEN');
    expect(res.data).toBeNull();
    expect(await t.app.services.db.session.count()).toBe(before);
    // The same token may still read.
    expect((await t.request(SessionsDocument, { first: 1 }, reader.secret)).errors).toBeUndefined();

    const tokensBefore = await mintedTokenCount();
    const mint = await t.request(
      CreatePersonalAccessTokenDocument,
      { input: { name: 'escalate', scopes: ['sessions:write'] } },
      reader.secret,
    );
    expect(mint.errors?.[0]?.extensions?.code).toBe('FORBIDDEN');
    // A token can never grant scopes its creator lacks.
    const minter = await createPat(['tokens:write', 'sessions:read']);
    const escalate = await t.request(
      CreatePersonalAccessTokenDocument,
      { input: { name: 'escalate', scopes: ['sessions:write'] } },
      minter.secret,
    );
    expect(escalate.errors?.[0]?.extensions?.code).toBe('FORBIDDEN');
    expect(await mintedTokenCount()).toBe(tokensBefore + 1);
  });

  test('a sandbox token cannot create sessions, mint tokens or read another session', async () => {
    const own = await createSession();
    const other = await createSession();
    const sandboxToken = await sandboxTokenOf(own);

    const viewer = await t.request(ViewerDocument, {}, sandboxToken);
    expect(viewer.data?.viewer).toMatchObject({ kind: 'SANDBOX', sessionId: own });
    const ownRead = await t.request(SessionDocument, { id: own }, sandboxToken);
    expect(ownRead.data?.session?.sessionId).toBe(own);

    const sessionsBefore = await t.app.services.db.session.count();
    const create = await t.request(CreateSessionDocument, { input: { projectId } }, sandboxToken);
    expect(create.errors?.[0]?.extensions?.code).toBe('FORBIDDEN');
    expect(await t.app.services.db.session.count()).toBe(sessionsBefore);

    const tokensBefore = await mintedTokenCount();
    const input = { name: 'x', scopes: ['sessions:read'] };
    const pat = await t.request(CreatePersonalAccessTokenDocument, { input }, sandboxToken);
    expect(pat.errors?.[0]?.extensions?.code).toBe('FORBIDDEN');
    const sa = await t.request(CreateServiceAccountTokenDocument, { input }, sandboxToken);
    expect(sa.errors?.[0]?.extensions?.code).toBe('FORBIDDEN');
    expect(await mintedTokenCount()).toBe(tokensBefore);

    const otherRead = await t.request(SessionDocument, { id: other }, sandboxToken);
    expect(otherRead.errors?.[0]?.extensions?.code).toBe('FORBIDDEN');
    expect(otherRead.data?.session ?? null).toBeNull();

    // Stopping the session revokes the sandbox token.
    await t.request(StopSessionDocument, { input: { sessionId: own } });
    await t.request(StopSessionDocument, { input: { sessionId: other } });
    const after = await t.request(ViewerDocument, {}, sandboxToken);
    expect(after.errors?.[0]?.extensions?.code).toBe('UNAUTHENTICATED');
  });
});
