// Accounts and members through the API only (R-ACC-1): the instance admin creates accounts, account
// admins add, list and remove members, and a second account created this way sees nothing of the
// first (tenancy), with the listings viewer.projects, project.sessions/templates/secrets and
// account.members.
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import {
  AccountOverviewDocument,
  AddMemberDocument,
  CreateAccountDocument,
  CreateProjectDocument,
  RemoveMemberDocument,
  SetSecretDocument,
  ViewerDocument,
} from '../generated/graphql';
import { startSession } from '../leases/helpers';
import { type TestApp, startTestApp } from '../support/app';
import { createTestRepo } from '../support/git';

describe('accounts and members', () => {
  let t: TestApp;
  const repo = createTestRepo({ 'README.md': '# members\n' });

  beforeAll(async () => {
    t = await startTestApp();
  });
  afterAll(async () => t?.stop());

  async function createAccount(name: string, email: string) {
    const res = await t.request(CreateAccountDocument, {
      input: { name, tier: 'PRO', admin: { email, name: 'Second Admin' } },
    });
    if (res.data?.createAccount.__typename !== 'CreateAccountSuccess') throw new Error(JSON.stringify(res));
    return res.data.createAccount;
  }

  test('the instance admin creates an account whose first admin holds a working token; nobody else can', async () => {
    const created = await createAccount('Second', 'second-admin@example.com');
    expect(created.account).toMatchObject({ name: 'Second', tier: 'PRO' });
    expect(created.admin).toMatchObject({
      email: 'second-admin@example.com',
      role: 'ADMIN',
      isInstanceAdmin: false,
    });
    expect(created.secret).toMatch(/^singulacomp_pat_/);

    const overview = await t.request(AccountOverviewDocument, {}, created.secret);
    expect(overview.data?.viewer.account).toMatchObject({
      id: created.account.id,
      members: [{ email: 'second-admin@example.com', role: 'ADMIN' }],
    });
    const mine = await t.request(AccountOverviewDocument, {});
    expect(mine.data?.viewer.user).toMatchObject({ email: 'admin@localhost', isInstanceAdmin: true });

    // An account admin is not the instance admin.
    const denied = await t.request(
      CreateAccountDocument,
      { input: { name: 'Third', admin: { email: 'third@example.com', name: 'T' } } },
      created.secret,
    );
    expect(denied.errors?.[0]?.extensions?.code).toBe('FORBIDDEN');
    const stored = await t.app.services.db.account.count({ where: { name: 'Third' } });
    expect(stored).toBe(0);

    // A taken email is a typed conflict and leaves no half-made account behind.
    const taken = await t.request(CreateAccountDocument, {
      input: { name: 'Duplicate', admin: { email: 'second-admin@example.com', name: 'D' } },
    });
    expect(taken.data?.createAccount).toMatchObject({ code: 'CONFLICT' });
    expect(await t.app.services.db.account.count({ where: { name: 'Duplicate' } })).toBe(0);
  });

  test('an account admin adds, lists and removes members; a member cannot manage members', async () => {
    const { secret: admin } = await createAccount('Team', 'team-admin@example.com');
    const added = await t.request(
      AddMemberDocument,
      { input: { email: 'Member@Example.com', name: 'Member' } },
      admin,
    );
    if (added.data?.addMember.__typename !== 'AddMemberSuccess') throw new Error(JSON.stringify(added));
    expect(added.data.addMember.member).toMatchObject({ email: 'member@example.com', role: 'MEMBER' });
    const member = added.data.addMember;

    // The member's first token works and holds no account:admin.
    const viewer = await t.request(ViewerDocument, {}, member.secret);
    expect(viewer.data?.viewer.scopes).not.toContain('account:admin');
    expect(viewer.data?.viewer.scopes).toContain('sessions:write');
    const byMember = await t.request(
      AddMemberDocument,
      { input: { email: 'other@example.com', name: 'Other' } },
      member.secret,
    );
    expect(byMember.errors?.[0]?.extensions?.code).toBe('FORBIDDEN');

    const bad = await t.request(AddMemberDocument, { input: { email: 'not-an-email', name: 'X' } }, admin);
    expect(bad.data?.addMember).toMatchObject({ code: 'VALIDATION_FAILED' });
    const listed = await t.request(AccountOverviewDocument, {}, admin);
    expect(listed.data?.viewer.account.members.map((m) => [m.email, m.role])).toEqual([
      ['team-admin@example.com', 'ADMIN'],
      ['member@example.com', 'MEMBER'],
    ]);

    // Removing: never yourself, never someone of another account; a removed member's token is dead.
    const self = listed.data!.viewer.account.members[0]!.id;
    const selfRemoval = await t.request(RemoveMemberDocument, { input: { userId: self } }, admin);
    expect(selfRemoval.data?.removeMember).toMatchObject({ code: 'CONFLICT' });
    const foreign = await t.request(RemoveMemberDocument, { input: { userId: member.member.id } });
    expect(foreign.data?.removeMember).toMatchObject({ code: 'NOT_FOUND' });
    const removed = await t.request(RemoveMemberDocument, { input: { userId: member.member.id } }, admin);
    expect(removed.data?.removeMember).toMatchObject({ member: { email: 'member@example.com' } });
    expect(await t.app.services.db.user.count({ where: { id: member.member.id } })).toBe(0);
    const dead = await t.request(ViewerDocument, {}, member.secret);
    expect(dead.errors?.[0]?.extensions?.code).toBe('UNAUTHENTICATED');
  });

  test('viewer.projects lists the account’s projects with sessions, templates and secret names, and nothing of another account', async () => {
    const project = await t.request(CreateProjectDocument, {
      input: { name: 'listed', repositoryUrl: repo.url },
    });
    if (project.data?.createProject.__typename !== 'CreateProjectSuccess')
      throw new Error(JSON.stringify(project));
    const projectId = project.data.createProject.project.id;
    await t.request(SetSecretDocument, {
      input: { projectId, name: 'API_KEY', value: 'v', runtimeDelivery: true },
    });
    const session = await startSession(t, projectId);

    const overview = await t.request(AccountOverviewDocument, {});
    const node = overview.data?.viewer.projects.edges.find((e) => e.node.id === projectId)?.node;
    expect(node).toMatchObject({
      name: 'listed',
      secrets: [{ name: 'API_KEY', runtimeDelivery: true }],
      sessions: { edges: [{ node: { sessionId: session.sessionId, status: 'RUNNING' } }] },
    });
    expect(Array.isArray(node?.templates)).toBe(true);

    const other = await createAccount('Elsewhere', 'elsewhere@example.com');
    const theirs = await t.request(AccountOverviewDocument, {}, other.secret);
    expect(theirs.data?.viewer.projects.edges).toEqual([]);
  });
});
