// Queries and mutations run compiled (graphql-jit, server/fast-paths/compiled-execution.ts); each answer here
// is checked against graphql-js executing the same document in-process on the same data: the same
// data, the same errors and no more SQL (the Prisma plugin's planned queries keep covering nested
// relations and connections).
import { type DocumentNode, type ExecutionResult, execute, parse } from 'graphql';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { SESSIONS_PAGE, instantProvider, seedSessionsPage } from '../../bench/support/sessions-page';
import { schema } from '../../schema/index';
import { compilable } from '../../server/fast-paths/compiled-execution';
import { type SeededAccount, type TestApp, startTestApp } from '../support/app';
import { createTestRepo } from '../support/git';

const NESTED_CONNECTIONS = `{ sessions(first: 4) { edges { node { id project { id name
  sessions(first: 2) { edges { cursor node { id status template { slug }
    project { name sessions(first: 1) { edges { node { id } } pageInfo { hasNextPage } } } } } } } } } } }`;
const FRAGMENTS = `query { sessions(first: 3) { edges { node { id ...S } } } }
  fragment S on Session { project { ...P } sandbox { status lease { generation } } }
  fragment P on Project { id name templates { slug } }`;

describe('compiled execution', () => {
  let t: TestApp;
  let reader: SeededAccount;
  const repo = createTestRepo({ 'README.md': '# compiled\n' });

  beforeAll(async () => {
    t = await startTestApp({ providers: [instantProvider()], env: { SINGULACOMP_FAST_PATHS: 'on' } });
    await seedSessionsPage(t, repo.url, 12);
    // Reads projects but not sessions: Project.sessions refuses it.
    reader = await t.seedAccount({ scopes: ['projects:read'] });
    await t.app.services.db.project.create({
      data: { accountId: reader.accountId, name: 'reader', repositoryUrl: repo.url },
    });
  });
  afterAll(async () => t?.stop());

  /** graphql-js in-process, with the context the server builds for this token. */
  async function reference(token: string) {
    const services = t.app.services;
    const principal = await services.tokens.authenticate(`Bearer ${token}`);
    return async (document: DocumentNode, variables: Record<string, unknown>) =>
      (await execute({
        schema,
        document,
        variableValues: variables,
        contextValue: { principal, services },
      })) as ExecutionResult;
  }

  /** The fewest statements over three runs: the server's background loops can only add. */
  async function fewest(run: () => Promise<unknown>): Promise<number> {
    const stats = t.app.services.database.stats;
    let least = Number.POSITIVE_INFINITY;
    for (let i = 0; i < 3; i++) {
      const before = stats.statements;
      await run();
      least = Math.min(least, stats.statements - before);
    }
    return least;
  }

  test.each([
    ['the nested sessions page', SESSIONS_PAGE, { first: 10 }],
    ['connections nested in a connection', NESTED_CONNECTIONS, {}],
    ['fragments', FRAGMENTS, {}],
  ])('%s: the same data and no more SQL than graphql-js', async (_label, query, variables) => {
    const document = parse(query);
    await t.raw({ query, variables }); // authenticates and caches the token
    let compiled: Awaited<ReturnType<TestApp['raw']>> | undefined;
    const compiledStatements = await fewest(async () => {
      compiled = await t.raw({ query, variables });
    });
    const graphqlJs = await reference(t.adminToken);
    let expected: ExecutionResult | undefined;
    const referenceStatements = await fewest(async () => {
      expected = await graphqlJs(document, variables);
    });
    expect(compiled?.errors).toBeUndefined();
    expect(expected?.errors).toBeUndefined();
    expect(compiled?.data).toEqual(JSON.parse(JSON.stringify(expected?.data)));
    expect(compiledStatements).toBeLessThanOrEqual(referenceStatements);
  });

  test('a refused field answers as on graphql-js: null where allowed, the same FORBIDDEN errors', async () => {
    const query =
      '{ viewer { projects(first: 5) { edges { node { name sessions(first: 1) { edges { cursor } } } } } } }';
    const compiled = await t.raw({ query }, reader.token);
    const expected = await (await reference(reader.token))(parse(query), {});
    expect(compiled.errors?.length).toBeGreaterThan(0);
    expect(compiled.errors?.map((e) => [e.message, e.path, e.extensions?.code])).toEqual(
      expected.errors?.map((e) => [e.message, e.path, e.extensions?.code]),
    );
    expect(compiled.data).toEqual(JSON.parse(JSON.stringify(expected.data)));
  });

  test('runs queries and mutations alone in their document compiled; the rest on graphql-js', () => {
    const args = (query: string) => ({ document: parse(query) });
    expect(compilable(args('{ viewer { kind } }'))).toBe(true);
    expect(compilable(args('query Q($first: Int) { sessions(first: $first) { edges { cursor } } }'))).toBe(
      true,
    );
    // The compiled-query cache does not key by operation name.
    expect(compilable(args('query A { viewer { kind } } query B { viewer { kind } }'))).toBe(false);
    expect(compilable(args('subscription { accountSessions { __typename } }'))).toBe(false);
  });

  test('variables that do not coerce are answered as graphql-js answers them: HTTP 400 with the reason', async () => {
    const query = 'query Q($first: Int) { sessions(first: $first) { edges { cursor } } }';
    const refused = await t.raw({ query, variables: { first: 'x' } });
    expect(refused.status).toBe(400);
    expect(refused.data ?? null).toBeNull();
    expect(refused.errors?.map((e) => e.message)).toEqual([
      'Variable "$first" got invalid value "x"; Int cannot represent non-integer value: "x"',
    ]);
    // The same document with good variables, compiled and cached by now, still answers.
    const accepted = await t.raw({ query, variables: { first: 2 } });
    expect(accepted.status).toBe(200);
    expect(accepted.errors).toBeUndefined();
    expect((accepted.data as { sessions: { edges: unknown[] } }).sessions.edges).toHaveLength(2);
    const again = await t.raw({ query, variables: { first: 'y' } });
    expect(again.status).toBe(400);
    expect(again.errors?.[0]?.message).toMatch(/Int cannot represent non-integer value: "y"/);
  });
});
