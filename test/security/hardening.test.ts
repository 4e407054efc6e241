// Attacks 3 and 6 plus regressions: SSE subscriptions, token rules, unbounded nodes(ids:),
// anonymous introspection, malformed Host, and what an error response may carry.
import { request as httpRequest } from 'node:http';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { SCOPES } from '../../resolvers/auth/principal';
import { type TestApp, startTestApp } from '../support/app';

const INTROSPECTION = '{ __schema { queryType { name } } }';

describe('hardening', () => {
  let t: TestApp;
  let userId: string;

  beforeAll(async () => {
    // As in production: introspection only with a token.
    t = await startTestApp({ env: { SINGULACOMP_INTROSPECTION: 'authenticated' } });
    const admin = await t.app.services.tokens.authenticate(`Bearer ${t.adminToken}`);
    if (admin?.kind !== 'USER') throw new Error('admin token did not authenticate');
    userId = admin.userId;
  });
  afterAll(async () => t?.stop());

  async function patFor(scopes: string[], owner = userId) {
    const user = await t.app.services.db.user.findUniqueOrThrow({ where: { id: owner } });
    const principal = {
      kind: 'USER' as const,
      userId: owner,
      accountId: user.accountId,
      isAdmin: user.role === 'ADMIN',
      scopes: new Set<string>(SCOPES),
      tokenId: '',
      expiresAt: null,
    };
    return t.app.services.tokens.createPersonalAccessToken(principal, {
      name: scopes.join(' ').slice(0, 100),
      scopes,
    });
  }

  test('a subscription over HTTP (SSE) is refused: subscriptions run only where revocation is enforced', async () => {
    const response = await fetch(t.graphqlUrl, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        accept: 'text/event-stream',
        authorization: `Bearer ${t.adminToken}`,
      },
      body: JSON.stringify({ query: 'subscription { accountSessions { seq } }' }),
    });
    const text = await response.text();
    expect(text).toContain('SUBSCRIPTIONS_OVER_WEBSOCKET_ONLY');
    expect(text).not.toContain('"seq"');
  });

  test('a narrow token cannot revoke a stronger token of the same user, and nothing is revoked', async () => {
    // A member (not an account admin): only admins may revoke tokens stronger than their own.
    const admin = await t.app.services.db.user.findUniqueOrThrow({ where: { id: userId } });
    const member = await t.app.services.db.user.create({
      data: {
        accountId: admin.accountId,
        email: `member-${Date.now()}@example.com`,
        name: 'Member',
        role: 'MEMBER',
      },
    });
    const narrow = await patFor(['projects:read', 'tokens:write'], member.id);
    const strong = await patFor([...SCOPES], member.id);
    const res = await t.raw(
      {
        query: 'mutation($id: ID!) { revokeToken(input: { tokenId: $id }) { __typename } }',
        variables: { id: Buffer.from(`Token:${strong.token.id}`).toString('base64') },
      },
      narrow.secret,
    );
    expect(res.errors?.[0]?.extensions?.code).toBe('FORBIDDEN');
    const row = await t.app.services.db.token.findUniqueOrThrow({ where: { id: strong.token.id } });
    expect(row.revokedAt).toBeNull();
  });

  test('revoking needs tokens:write, even for a weaker token', async () => {
    const reader = await patFor(['projects:read']);
    const weaker = await patFor(['projects:read']);
    const res = await t.raw(
      {
        query: 'mutation($id: ID!) { revokeToken(input: { tokenId: $id }) { __typename } }',
        variables: { id: Buffer.from(`Token:${weaker.token.id}`).toString('base64') },
      },
      reader.secret,
    );
    expect(res.errors?.[0]?.extensions?.code).toBe('FORBIDDEN');
    expect(
      (await t.app.services.db.token.findUniqueOrThrow({ where: { id: weaker.token.id } })).revokedAt,
    ).toBeNull();
  });

  test('listing tokens needs tokens:read', async () => {
    const narrow = await patFor(['projects:read']);
    const refused = await t.raw(
      { query: '{ viewer { tokens { edges { node { id name } } } } }' },
      narrow.secret,
    );
    expect(refused.data).toBeNull();
    expect(refused.errors?.[0]?.extensions?.code).toBe('FORBIDDEN');
    const reader = await patFor(['tokens:read']);
    const allowed = await t.raw(
      { query: '{ viewer { tokens { edges { node { name } } } } }' },
      reader.secret,
    );
    const names = (
      allowed.data as { viewer: { tokens: { edges: Array<{ node: { name: string } }> } } }
    ).viewer.tokens.edges.map((e) => e.node.name);
    expect(names).toContain('projects:read');
  });

  test('nodes(ids:) takes at most 100 ids', async () => {
    const admin = await t.app.services.tokens.authenticate(`Bearer ${t.adminToken}`);
    const own = Buffer.from(`Token:${admin!.tokenId}`).toString('base64');
    const id = Buffer.from('Project:00000000-0000-4000-8000-000000000000').toString('base64');
    const tooMany = await t.raw({
      query: 'query($ids: [ID!]!) { nodes(ids: $ids) { id } }',
      variables: { ids: Array(15_000).fill(id) },
    });
    expect(tooMany.data).toBeNull();
    expect(tooMany.errors?.[0]?.message).toContain('at most 100 ids');
    const hundred = await t.raw({
      query: 'query($ids: [ID!]!) { nodes(ids: $ids) { id } }',
      variables: { ids: Array(100).fill(own) },
    });
    expect(hundred.errors, JSON.stringify(hundred.errors?.slice(0, 1))).toBeUndefined();
    expect((hundred.data as { nodes: unknown[] }).nodes).toHaveLength(100);
  });

  test('introspection is refused without a token when the instance says so, and answered with one', async () => {
    const anonymous = await t.raw({ query: INTROSPECTION }, null);
    expect(anonymous.data).toBeNull();
    expect(anonymous.errors?.[0]?.extensions?.code).toBe('UNAUTHENTICATED');
    const authenticated = await t.raw({ query: INTROSPECTION });
    expect(authenticated.data).toEqual({ __schema: { queryType: { name: 'Query' } } });
  });

  test('a malformed Host is a 400 without a stack trace or a path', async () => {
    const url = new URL(t.graphqlUrl);
    const { status, body } = await new Promise<{ status: number; body: string }>((resolve, reject) => {
      const req = httpRequest(
        {
          host: url.hostname,
          port: url.port,
          path: '/graphql',
          method: 'POST',
          headers: { host: 'x.1', 'content-type': 'application/json' },
        },
        (res) => {
          let text = '';
          res.on('data', (chunk) => {
            text += chunk;
          });
          res.on('end', () => resolve({ status: res.statusCode ?? 0, body: text }));
        },
      );
      req.on('error', reject);
      req.end(JSON.stringify({ query: '{ __typename }' }));
    });
    expect(status).toBe(400);
    expect(body).not.toMatch(/\bat \w|node_modules|\/work\/|\.ts:\d/);
  });
});
