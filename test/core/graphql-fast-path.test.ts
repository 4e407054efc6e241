// The GraphQL fast path (server/fast-paths/graphql-fast-path.ts): a request whose query text yoga
// has run before is answered from node:http. Each request below is sent twice; the first is yoga's
// answer, the second the fast path's (or yoga's again, where only yoga can answer), and both must
// be the same bytes with the same status and headers. /metrics tells which path answered.
import { request } from 'node:http';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { type TestApp, startTestApp } from '../support/app';
import { withClient } from '../support/database';

interface Answer {
  status: number;
  headers: [string, string][];
  body: string;
}

describe('GraphQL fast path', () => {
  let t: TestApp;

  beforeAll(async () => {
    t = await startTestApp({ env: { SINGULACOMP_FAST_PATHS: 'on' } });
  });
  afterAll(async () => t?.stop());

  async function send(body: unknown, headers: Record<string, string> = {}): Promise<Answer> {
    const res = await fetch(t.graphqlUrl, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${t.adminToken}`, ...headers },
      body: JSON.stringify(body),
    });
    const varying = new Set(['date', 'x-request-id']);
    return {
      status: res.status,
      headers: [...res.headers.entries()].filter(([name]) => !varying.has(name)),
      // The request id an unexpected error carries differs per request.
      body: (await res.text()).replace(/"requestId":"[^"]+"/g, '"requestId":"…"'),
    };
  }

  async function outcomes(): Promise<{ answered: number; handedOver: number }> {
    const text = await (await fetch(`${t.url}/metrics`)).text();
    const count = (outcome: string) =>
      Number(
        new RegExp(`^singulacomp_graphql_fast_path_total\\{outcome="${outcome}"\\} (\\d+)$`, 'm').exec(
          text,
        )?.[1] ?? 0,
      );
    return { answered: count('answered'), handedOver: count('handed_over') };
  }

  /** Sends the request twice; returns both answers and how the second one was answered. */
  async function twice(body: unknown, headers: Record<string, string> = {}) {
    const first = await send(body, headers);
    const before = await outcomes();
    const second = await send(body, headers);
    const after = await outcomes();
    const path =
      after.answered === before.answered + 1 && after.handedOver === before.handedOver
        ? 'fast'
        : after.handedOver === before.handedOver + 1 && after.answered === before.answered
          ? 'handed over'
          : 'yoga';
    return { first, second, path };
  }

  const VIEWER = { query: '{ viewer { kind } }' };
  const BAD_ID = { query: '{ node(id: "bogus") { id } }' };
  const BOTH = 'application/graphql-response+json, application/json';

  test.each([
    ['a query', VIEWER, {}, 'fast', 200],
    ['a query accepting graphql-response+json first', VIEWER, { accept: BOTH }, 'fast', 200],
    [
      'a query accepting only graphql-response+json',
      VIEWER,
      { accept: 'application/graphql-response+json' },
      'fast',
      200,
    ],
    ['a query accepting */*', VIEWER, { accept: '*/*' }, 'fast', 200],
    ['a field error', BAD_ID, {}, 'fast', 200],
    ['a field error accepting graphql-response+json', BAD_ID, { accept: BOTH }, 'fast', 200],
    ['no token (a 401 carried by the field error)', VIEWER, { authorization: '' }, 'fast', 401],
    ['a token that does not authenticate', VIEWER, { authorization: 'Bearer nope' }, 'handed over', 401],
    [
      'variables that do not coerce',
      { query: 'query($n: Int) { sessions(first: $n) { edges { cursor } } }', variables: { n: 'x' } },
      {},
      'handed over',
      400,
    ],
    [
      'an operation name the document lacks',
      { query: 'query A { viewer { kind } }', operationName: 'B' },
      {},
      'handed over',
      400,
    ],
    [
      'a parameter beside query, variables and operationName',
      { ...VIEWER, extensions: {} },
      {},
      'handed over',
      200,
    ],
    ['a document that does not validate', { query: '{ viewer { nope } }' }, {}, 'handed over', 200],
    ['introspection', { query: '{ __schema { queryType { name } } }' }, {}, 'handed over', 200],
    ['an Origin (CORS is yoga’s)', VIEWER, { origin: 'http://elsewhere.example' }, 'yoga', 200],
    ['an Accept the fast path does not answer', VIEWER, { accept: 'application/json;q=0.9' }, 'yoga', 200],
  ])('%s: the same answer twice', async (_label, body, headers, path, status) => {
    const answer = await twice(body, headers as Record<string, string>);
    expect(answer.second).toEqual(answer.first);
    expect(answer.first.status).toBe(status);
    expect(answer.path).toBe(path);
  });

  test('a request with two Authorization headers is handed to yoga, which reads them joined', async () => {
    await send(VIEWER);
    const before = await outcomes();
    const status = await new Promise<number>((resolve, reject) => {
      const body = JSON.stringify(VIEWER);
      const req = request(t.graphqlUrl, { method: 'POST' }, (res) => {
        res.resume();
        res.on('end', () => resolve(res.statusCode ?? 0));
      });
      req.setHeader('content-type', 'application/json');
      req.setHeader('content-length', Buffer.byteLength(body));
      req.setHeader('authorization', [`Bearer ${t.adminToken}`, 'Bearer another']);
      req.on('error', reject);
      req.end(body);
    });
    const after = await outcomes();
    expect(status).toBe(401);
    expect(after).toEqual({ answered: before.answered, handedOver: before.handedOver + 1 });
  });

  test('a mutation on the fast path runs once per request, with its own variables', async () => {
    const query =
      'mutation($name: String!) { createPersonalAccessToken(input: { name: $name, scopes: ["projects:read"] }) { __typename } }';
    const names = ['fast-a', 'fast-b', 'fast-c'];
    const before = await outcomes();
    for (const name of names) {
      const answer = await send({ query, variables: { name } });
      expect(answer.status).toBe(200);
      expect(JSON.parse(answer.body).errors).toBeUndefined();
    }
    const after = await outcomes();
    expect(after.answered - before.answered).toBe(names.length - 1);
    const rows = await t.app.services.db.token.findMany({
      where: { name: { in: names } },
      select: { name: true },
    });
    expect(rows.map((r) => r.name).sort()).toEqual(names);
  });

  test('an unexpected error is masked on the fast path as on yoga: no driver text', async () => {
    const query = { query: '{ viewer { projects(first: 1) { edges { cursor } } } }' };
    expect((await send(query)).status).toBe(200);
    const database = t.database!;
    await withClient((c) => c.query('ALTER TABLE "Project" RENAME TO "ProjectAway"'), database.url);
    try {
      const { first, second, path } = await twice(query);
      expect(path).toBe('fast');
      expect(second).toEqual(first);
      const error = JSON.parse(second.body).errors[0];
      expect(error.message).toBe('Unexpected error.');
      expect(error.extensions.code).toBe('INTERNAL_SERVER_ERROR');
      expect(second.body).not.toMatch(/ProjectAway|relation|does not exist|prisma/i);
    } finally {
      await withClient((c) => c.query('ALTER TABLE "ProjectAway" RENAME TO "Project"'), database.url);
    }
  });
});
