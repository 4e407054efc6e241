// Bad input never yields a 500 or a partial write: every case below is refused with a typed error
// that names the field (or a top-level error with a code), and no table changes.
import { request } from 'node:http';
import type pg from 'pg';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import {
  CreatePersonalAccessTokenDocument,
  CreateProjectDocument,
  CreateSessionDocument,
  DeleteSecretDocument,
  NodeDocument,
  RevokeTokenDocument,
  SessionDocument,
  SetSecretDocument,
  StopSessionDocument,
  SyncProjectManifestDocument,
  UpdateAccountDocument,
} from '../generated/graphql';
import type { GqlResult, TestApp } from '../support/app';
import { type AppWithProject, startAppWithProject } from '../support/fixtures';
import { createTestRepo } from '../support/git';

const TABLES = ['Account', 'User', 'Token', 'Project', 'ProjectSecret', 'Template', 'Session', 'Sandbox'];

describe('bad input', () => {
  let t: TestApp;
  let sql: pg.Client;
  const repo = createTestRepo({ 'README.md': '# input\n' });
  let projectId: string;

  async function snapshot(): Promise<Record<string, number>> {
    const counts: Record<string, number> = {};
    for (const table of TABLES) {
      const { rows } = await sql.query<{ n: number }>(`SELECT count(*)::int AS n FROM "${table}"`);
      counts[table] = rows[0]!.n;
    }
    const { rows } = await sql.query<{ limit: number | null; tier: string }>(
      'SELECT "concurrentSessionLimit" AS limit, tier::text FROM "Account"',
    );
    counts.accountState = rows.reduce((h, r) => h + (r.limit ?? -1) + r.tier.length, 0);
    return counts;
  }

  /** Runs a request and checks the two invariants: no 5xx/masked error, nothing written. */
  async function refused<T>(run: () => Promise<GqlResult<T>>): Promise<GqlResult<T>> {
    const before = await snapshot();
    const res = await run();
    expect(res.status).toBeLessThan(500);
    for (const error of res.errors ?? []) {
      expect(error.extensions?.code).not.toBe('INTERNAL_SERVER_ERROR');
      expect(error.message).not.toMatch(/unexpected error/i);
    }
    expect(await snapshot()).toEqual(before);
    return res;
  }

  let kit: AppWithProject;

  beforeAll(async () => {
    kit = await startAppWithProject('input', { repo });
    ({ app: t, sql } = kit);
    projectId = kit.project.id;
  });
  afterAll(async () => {
    await kit?.stop();
  });

  const huge = 'x'.repeat(10_000);

  test.each([
    ['a malformed project id', { projectId: 'not-an-id' }, ['input', 'projectId']],
    ['a global id of another type', { projectId: 'U2Vzc2lvbjoxMjM=' }, ['input', 'projectId']],
    ['an oversized prompt', { prompt: 'p'.repeat(100_001) }, ['input', 'prompt']],
    ['a prompt with a NUL character', { prompt: 'a\u0000b' }, ['input', 'prompt']],
    ['an invalid agent name', { agent: 'Not An Agent!' }, ['input', 'agent']],
    ['an invalid base ref', { baseRef: 'a..b' }, ['input', 'baseRef']],
    ['an oversized base ref', { baseRef: huge }, ['input', 'baseRef']],
    ['an unknown template slug', { templateSlug: huge }, ['input', 'templateSlug']],
    ['a template slug with a NUL character', { templateSlug: 'a\u0000' }, ['input', 'templateSlug']],
  ])('createSession with %s is a typed error naming the field', async (_label, input, field) => {
    const res = await refused(() =>
      t.request(CreateSessionDocument, { input: { projectId, ...input } as { projectId: string } }),
    );
    expect(res.data?.createSession).toMatchObject({ field });
    expect((res.data?.createSession as { code?: string } | undefined)?.code).toMatch(
      /^(VALIDATION_FAILED|NOT_FOUND)$/,
    );
  });

  test.each([
    ['an oversized name', { name: huge }, ['input', 'name']],
    ['an empty name', { name: '   ' }, ['input', 'name']],
    ['a name with a NUL character', { name: 'a\u0000b' }, ['input', 'name']],
    [
      'a repository URL with embedded credentials',
      { repositoryUrl: 'https://u:p@example.com/r.git' },
      ['input', 'repositoryUrl'],
    ],
    ['a relative repository path', { repositoryUrl: 'relative/path' }, ['input', 'repositoryUrl']],
    ['an invalid default branch', { defaultBranch: 'refs/../x' }, ['input', 'defaultBranch']],
    ['an oversized git credential', { gitCredential: 'c'.repeat(5_000) }, ['input', 'gitCredential']],
  ])('createProject with %s is a typed error naming the field', async (_label, input, field) => {
    const res = await refused(() =>
      t.request(CreateProjectDocument, { input: { name: 'p2', repositoryUrl: repo.url, ...input } }),
    );
    expect(res.data?.createProject).toMatchObject({ code: 'VALIDATION_FAILED', field });
  });

  test('secrets, tokens and account updates with bad values are typed errors naming the field', async () => {
    const secret = (input: { name: string; value: string }) =>
      refused(() => t.request(SetSecretDocument, { input: { projectId, ...input } }));
    expect((await secret({ name: 'SINGULACOMP_TOKEN', value: 'v' })).data?.setSecret).toMatchObject({
      __typename: 'ReservedSecretNameError',
      code: 'RESERVED_SECRET_NAME',
      field: ['input', 'name'],
    });
    expect((await secret({ name: '1-bad', value: 'v' })).data?.setSecret).toMatchObject({
      field: ['input', 'name'],
    });
    expect((await secret({ name: 'BIG', value: 'v'.repeat(64 * 1024 + 1) })).data?.setSecret).toMatchObject({
      field: ['input', 'value'],
    });
    const deleted = await refused(() =>
      t.request(DeleteSecretDocument, { input: { projectId, name: 'a\u0000' } }),
    );
    expect(deleted.data?.deleteSecret).toMatchObject({ field: ['input', 'name'] });

    const token = (input: { name: string; scopes: string[]; expiresAt?: string }) =>
      refused(() => t.request(CreatePersonalAccessTokenDocument, { input }));
    expect((await token({ name: 'x', scopes: ['root'] })).data?.createPersonalAccessToken).toMatchObject({
      __typename: 'ValidationError',
      field: ['input', 'scopes'],
    });
    expect((await token({ name: 'x', scopes: [] })).data?.createPersonalAccessToken).toMatchObject({
      field: ['input', 'scopes'],
    });
    expect(
      (await token({ name: huge, scopes: ['sessions:read'] })).data?.createPersonalAccessToken,
    ).toMatchObject({
      field: ['input', 'name'],
    });
    expect(
      (await token({ name: 'x', scopes: ['sessions:read'], expiresAt: '2001-01-01T00:00:00Z' })).data
        ?.createPersonalAccessToken,
    ).toMatchObject({ field: ['input', 'expiresAt'] });
    const badDate = await token({ name: 'x', scopes: ['sessions:read'], expiresAt: 'tomorrow' });
    expect(badDate.errors?.[0]?.message).toMatch(/ISO-8601/);
    // A timestamp without an offset is refused, not read in the server's local time zone.
    const localTime = await token({ name: 'x', scopes: ['sessions:read'], expiresAt: '2099-01-31T12:00:00' });
    expect(localTime.data?.createPersonalAccessToken ?? null).toBeNull();
    expect(localTime.errors?.[0]?.extensions).toMatchObject({ code: 'BAD_USER_INPUT' });
    expect(localTime.errors?.[0]?.message).toMatch(/with an offset/);
    // The same wall time with its offset is the instant it names.
    const withOffset = await t.request(CreatePersonalAccessTokenDocument, {
      input: { name: 'offset', scopes: ['sessions:read'], expiresAt: '2099-01-31T12:00:00+02:00' },
    });
    expect(withOffset.errors).toBeUndefined();
    const created = withOffset.data?.createPersonalAccessToken;
    expect(created?.__typename === 'CreateTokenSuccess' && created.token.expiresAt).toBe(
      '2099-01-31T10:00:00.000Z',
    );

    const account = await refused(() =>
      t.request(UpdateAccountDocument, { input: { concurrentSessionLimit: -1 } }),
    );
    expect(account.data?.updateAccount).toMatchObject({ field: ['input', 'concurrentSessionLimit'] });
    const revoke = await refused(() => t.request(RevokeTokenDocument, { input: { tokenId: 'nope' } }));
    expect(revoke.data?.revokeToken).toMatchObject({ field: ['input', 'tokenId'] });
    const stop = await refused(() => t.request(StopSessionDocument, { input: { sessionId: huge } }));
    expect(stop.data?.stopSession).toMatchObject({ field: ['input', 'sessionId'] });
    const sync = await refused(() =>
      t.request(SyncProjectManifestDocument, { input: { projectId, ref: 'a\u0000' } }),
    );
    expect(sync.data?.syncProjectManifest).toMatchObject({ field: ['input', 'ref'] });
  });

  test.each([
    ['garbage', 'nope'],
    ['base64 of a non-UUID id', Buffer.from('Session:nope').toString('base64')],
    ['an oversized id', huge],
  ])('node(id:) and session(id:) with %s answer BAD_USER_INPUT, not a database error', async (_l, id) => {
    const node = await refused(() => t.request(NodeDocument, { id }));
    expect(node.data?.node ?? null).toBeNull();
    expect(node.errors?.[0]?.extensions).toMatchObject({ code: 'BAD_USER_INPUT', field: ['id'] });
    const session = await refused(() => t.request(SessionDocument, { id }));
    expect(session.errors?.[0]?.extensions).toMatchObject({ code: 'BAD_USER_INPUT', field: ['id'] });
  });

  test('unknown enum values are refused at validation, as literals and as variables', async () => {
    const literal = await refused(() => t.raw({ query: '{ sessions(status: BOGUS) { edges { cursor } } }' }));
    expect(literal.errors?.[0]?.message).toMatch(/BOGUS.*SessionStatus/);
    const variable = await refused(() =>
      t.raw({
        query: 'mutation($i: UpdateAccountInput!) { updateAccount(input: $i) { __typename } }',
        variables: { i: { tier: 'GOLD' } },
      }),
    );
    expect(variable.status).toBe(400);
    expect(variable.errors?.[0]?.message).toMatch(/GOLD.*AccountTier/);
    const provider = await refused(() =>
      t.raw({
        query: 'mutation($i: CreateProjectInput!) { createProject(input: $i) { __typename } }',
        variables: { i: { name: 'enum', repositoryUrl: repo.url, provider: 'AWS' } },
      }),
    );
    expect(provider.errors?.[0]?.message).toMatch(/AWS.*Provider/);
  });

  test('deep, aliased, oversized and malformed requests are refused before execution', async () => {
    const levels = Array.from({ length: 6 }, () => 'sandbox { session {').join(' ');
    const deep = `{ sessions { edges { node { ${levels} id ${'} } '.repeat(6)}} } } }`;
    const depth = await refused(() => t.raw({ query: deep }));
    expect(depth.data).toBeNull();
    expect(depth.errors?.[0]?.message).toMatch(/depth limit/i);

    const aliases = Array.from(
      { length: 30 },
      (_, i) => `a${i}: createSession(input: { projectId: "${projectId}" }) { __typename }`,
    );
    const aliased = await refused(() => t.raw({ query: `mutation { ${aliases.join(' ')} }` }));
    expect(aliased.data).toBeNull();
    expect(aliased.errors?.[0]?.message).toMatch(/aliases limit/i);

    const body = JSON.stringify({ query: '{ viewer { kind } }', variables: { pad: 'x'.repeat(1_100_000) } });
    const oversized = await refused(() => t.raw(body));
    expect(oversized.status).toBe(413);

    const notJson = await refused(() => t.raw('{"query": '));
    expect(notJson.status).toBe(400);

    const negative = await refused(() => t.raw({ query: '{ sessions(first: -1) { edges { cursor } } }' }));
    expect(negative.errors?.[0]?.message).toMatch(/non-negative/);
    const costly = await refused(() =>
      t.raw({ query: `{ sessions(first: ${2 ** 31 - 1}) { edges { cursor } } }` }),
    );
    expect(costly.errors?.[0]?.message).toMatch(/cost limit/i);
    const cursor = await refused(() => t.raw({ query: '{ sessions(after: "junk") { edges { cursor } } }' }));
    expect(cursor.errors?.[0]?.message).toMatch(/cursor/i);
  });

  test('a chunked body without Content-Length is counted: a small one is answered, one past 25 MB is refused with 413', async () => {
    const chunked = (chunks: string[]) =>
      new Promise<{ status: number; body: string }>((resolve, reject) => {
        const req = request(
          t.graphqlUrl,
          {
            method: 'POST',
            headers: { 'content-type': 'application/json', authorization: `Bearer ${t.adminToken}` },
          },
          (res) => {
            let body = '';
            res.on('data', (c: Buffer) => {
              body += c.toString();
            });
            res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
          },
        );
        req.on('error', reject);
        for (const chunk of chunks) req.write(chunk);
        req.end();
      });
    const small = await chunked(['{"query": "{ viewer', ' { kind } }"}']);
    expect(small.status).toBe(200);
    expect(JSON.parse(small.body)).toEqual({ data: { viewer: { kind: 'PERSONAL_ACCESS' } } });
    const pad = 'x'.repeat(1_000_000);
    const large = await chunked([
      '{"query": "{ viewer { kind } }", "variables": { "pad": "',
      ...Array.from({ length: 26 }, () => pad),
      '" } }',
    ]);
    expect(large.status).toBe(413);
    expect(large.body).toMatch(/Request body too large/);
  });
});
