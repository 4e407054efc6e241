// Attack 4: `node(id:)` / `nodes(ids:)` reach any row by its global id. Every type that implements
// Node — enumerated from the schema at run time, so types added later are covered — must refuse a
// principal of another account and a sandbox token of another session, with an error and no data.
import { type GraphQLInterfaceType, getNamedType } from 'graphql';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { createNodeAccess, joinedProjects } from '../../resolvers/auth/node-access';
import { parseId } from '../../resolvers/ids';
import { schema } from '../../schema/index';
import { CreateProjectDocument } from '../generated/graphql';
import { startSession } from '../leases/helpers';
import { type TestApp, startTestApp } from '../support/app';
import { createTestRepo } from '../support/git';

const globalId = (typename: string, id: string) => Buffer.from(`${typename}:${id}`).toString('base64');

const NODE_QUERY = 'query($id: ID!) { node(id: $id) { __typename id } }';
const NODES_QUERY = 'query($ids: [ID!]!) { nodes(ids: $ids) { __typename id } }';

describe('every Node type checks read capability', () => {
  let t: TestApp;
  const repo = createTestRepo({ 'README.md': '# nodes\n' });
  /** One row of every Node type, owned by the admin's account, project one, session one. */
  const rows = new Map<string, string>();
  let ownSandboxToken: string;
  let otherSessionSandboxToken: string;
  let otherAccountToken: string;

  async function session(projectId: string, prompt: string) {
    const live = await startSession(t, projectId, { prompt });
    const sandbox = await t.app.services.db.sandbox.findUniqueOrThrow({ where: { id: live.sandboxId } });
    return { ...live, sandbox };
  }

  async function project(name: string) {
    const created = await t.request(CreateProjectDocument, { input: { name, repositoryUrl: repo.url } });
    if (created.data?.createProject.__typename !== 'CreateProjectSuccess')
      throw new Error(JSON.stringify(created));
    return parseId(created.data.createProject.project.id, 'Project', ['id']);
  }

  beforeAll(async () => {
    t = await startTestApp();
    const db = t.app.services.db;
    const p1 = await project('one');
    const p2 = await project('two');
    const s1 = await session(globalId('Project', p1), 'first');
    const s2 = await session(globalId('Project', p2), 'second');
    ownSandboxToken = s1.token;
    otherSessionSandboxToken = s2.token;
    otherAccountToken = (await t.seedAccount()).token;
    const snapshot = await db.snapshot.create({
      data: {
        provider: 'LOCAL',
        key: `k-${Date.now()}`,
        cpu: 1,
        memoryGiB: 1,
        diskGiB: 1,
        runtimeVersion: '0.1.0',
      },
    });
    const template = await db.template.create({
      data: { projectId: p1, slug: 'default', name: 'Default', snapshotId: snapshot.id },
    });
    const reload = await db.reload.create({ data: { sessionId: s1.sessionId } });
    const accountId = s1.sandbox.accountId;
    const changeRequest = await db.changeRequest.create({
      data: {
        accountId,
        projectId: p1,
        sessionId: s1.sessionId,
        title: 'seed',
        headRef: s1.sessionId,
        baseRef: 'main',
        headCommit: '0'.repeat(40),
        baseCommit: '0'.repeat(40),
      },
    });
    const trigger = await db.trigger.create({
      data: { accountId, projectId: p1, name: 'seed', kind: 'SCHEDULE', schedule: '0 * * * *' },
    });
    const shareLink = await db.shareLink.create({
      data: {
        accountId,
        sandboxId: s1.sandbox.id,
        port: 3000,
        mode: 'VIEW_ONLY',
        secretHash: `seed-${Date.now()}`,
        expiresAt: new Date(Date.now() + 3_600_000),
      },
    });
    // Seeds for every Node type. A type added to the schema without a seed here fails the suite:
    // add its seed and give the type a read check.
    rows.set('Project', p1);
    rows.set('Session', s1.sessionId);
    rows.set('Sandbox', s1.sandbox.id);
    rows.set('Template', template.id);
    rows.set('Snapshot', snapshot.id);
    rows.set('Reload', reload.id);
    rows.set('ChangeRequest', changeRequest.id);
    rows.set('Trigger', trigger.id);
    rows.set('ShareLink', shareLink.id);
    const admin = await t.app.services.tokens.authenticate(`Bearer ${t.adminToken}`);
    rows.set('Token', admin!.tokenId);
  });
  afterAll(async () => t?.stop());

  const nodeTypes = () =>
    schema
      .getPossibleTypes(getNamedType(schema.getType('Node')) as GraphQLInterfaceType)
      .map((type) => type.name);

  test('the schema’s Node types are exactly the seeded ones', () => {
    expect(nodeTypes().sort()).toEqual([...rows.keys()].sort());
  });

  for (const typename of ['Project', 'Session', 'Sandbox', 'Template', 'Snapshot', 'Reload', 'Token']) {
    test(`${typename}: the owner and its own sandbox read it; another account and another session’s sandbox get an error and no data`, async () => {
      const id = globalId(typename, rows.get(typename)!);
      const owner = await t.raw({ query: NODE_QUERY, variables: { id } });
      expect(owner.data).toEqual({ node: { __typename: typename, id } });
      const ownSandbox = await t.raw({ query: NODE_QUERY, variables: { id } }, ownSandboxToken);
      // Tokens are no sandbox's business, not even its own session's owner's.
      expect(ownSandbox.data).toEqual({ node: typename === 'Token' ? null : { __typename: typename, id } });
      for (const token of [otherAccountToken, otherSessionSandboxToken]) {
        const single = await t.raw({ query: NODE_QUERY, variables: { id } }, token);
        expect(single.data).toEqual({ node: null });
        expect(single.errors?.[0]?.extensions?.code).toBe('FORBIDDEN');
        expect(JSON.stringify(single)).not.toContain(rows.get(typename)!);
        const many = await t.raw({ query: NODES_QUERY, variables: { ids: [id] } }, token);
        expect(many.data).toEqual({ nodes: [null] });
        expect(many.errors?.[0]?.extensions?.code).toBe('FORBIDDEN');
      }
      const anonymous = await t.raw({ query: NODE_QUERY, variables: { id } }, null);
      expect(anonymous.data?.valueOf()).not.toEqual({ node: { __typename: typename, id } });
      expect(anonymous.errors?.length).toBeGreaterThan(0);
    });
  }

  test('every Node type in the schema refuses a principal of another account', async () => {
    // Enumerated at run time: a Node type added later (by any change) is probed here too.
    for (const typename of nodeTypes()) {
      const row = rows.get(typename);
      expect(row, `no seed for Node type ${typename}: seed one above and give it a read check`).toBeDefined();
      const res = await t.raw(
        { query: NODE_QUERY, variables: { id: globalId(typename, row!) } },
        otherAccountToken,
      );
      expect(res.data, typename).toEqual({ node: null });
      expect(res.errors?.[0]?.extensions?.code, typename).toBe('FORBIDDEN');
      const sandbox = await t.raw(
        { query: NODE_QUERY, variables: { id: globalId(typename, row!) } },
        otherSessionSandboxToken,
      );
      expect(sandbox.data, typename).toEqual({ node: null });
    }
  });

  test('a template owner is looked up once per request, known ones answer at once, and another account is refused either way', async () => {
    const db = t.app.services.db;
    const template = await db.template.findUniqueOrThrow({ where: { id: rows.get('Template')! } });
    const project = await db.project.findUniqueOrThrow({ where: { id: template.projectId } });
    const owner = (await t.app.services.tokens.authenticate(`Bearer ${t.adminToken}`))!;
    const other = (await t.app.services.tokens.authenticate(`Bearer ${otherAccountToken}`))!;
    // The real database, with its project lookups counted.
    let lookups = 0;
    const counted = {
      project: {
        findUnique: (args: Parameters<typeof db.project.findUnique>[0]) => {
          lookups++;
          return db.project.findUnique(args);
        },
      },
    } as unknown as typeof db;

    const access = createNodeAccess(counted, owner);
    const first = access.template(template);
    expect(first).toBeInstanceOf(Promise); // looked up
    await first;
    expect(lookups).toBe(1);
    expect(access.template(template)).toBeUndefined(); // known: no Promise, no lookup
    expect(lookups).toBe(1);

    const foreign = createNodeAccess(counted, other);
    await expect(foreign.template(template)).rejects.toMatchObject({ extensions: { code: 'FORBIDDEN' } });
    expect(() => foreign.template(template)).toThrow(/another account/);
    expect(lookups).toBe(2);

    // Projects a page joined answer without a lookup, for their owner only.
    const primed = createNodeAccess(counted, owner);
    primed.knownProjects(joinedProjects([{ project }, { project: null }, {}]));
    const foreignPrimed = createNodeAccess(counted, other);
    foreignPrimed.knownProjects(joinedProjects([{ project }]));
    expect(primed.template(template)).toBeUndefined();
    expect(() => foreignPrimed.template(template)).toThrow(/another account/);
    expect(lookups).toBe(2);
  });
});
