// Invitations and service accounts through the API only (R-ACC-1): an account admin invites by
// email; the one-time token is shown once, stored hashed, redeemed once before it expires by a new
// user (no credential), who gets the invited role and a first token. Reuse, expiry and a caller of
// another account are typed errors; nobody sees, accepts or lists another account's invitations or
// service accounts.
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { hashToken } from '../../resolvers/auth/tokens';
import {
  AcceptInvitationDocument,
  AccountInvitationsDocument,
  AccountOverviewDocument,
  AccountServiceAccountsDocument,
  CreateAccountDocument,
  CreateInvitationDocument,
  CreateServiceAccountTokenDocument,
  RevokeTokenDocument,
  ViewerDocument,
} from '../generated/graphql';
import { type TestApp, startTestApp } from '../support/app';
import { type TestClock, createTestClock } from '../support/clock';

describe('invitations and service accounts', () => {
  let t: TestApp;
  let clock: TestClock;
  /** Admin tokens of two accounts made through createAccount. */
  let a: string;
  let b: string;

  beforeAll(async () => {
    clock = createTestClock();
    t = await startTestApp({ now: clock.now });
    a = await createAccount('Alpha', 'alpha-admin@example.com');
    b = await createAccount('Beta', 'beta-admin@example.com');
  });
  afterAll(async () => t?.stop());

  async function createAccount(name: string, email: string): Promise<string> {
    const res = await t.request(CreateAccountDocument, { input: { name, admin: { email, name } } });
    if (res.data?.createAccount.__typename !== 'CreateAccountSuccess') throw new Error(JSON.stringify(res));
    return res.data.createAccount.secret;
  }

  async function invite(
    token: string,
    input: { email: string; role?: 'ADMIN' | 'MEMBER'; expiresInHours?: number },
  ) {
    const res = await t.request(CreateInvitationDocument, { input }, token);
    if (res.data?.createInvitation.__typename !== 'CreateInvitationSuccess')
      throw new Error(JSON.stringify(res));
    return res.data.createInvitation;
  }

  function accept(secret: string, name: string, token: string | null = null) {
    return t.request(AcceptInvitationDocument, { input: { secret, name } }, token);
  }

  test('an invited new user accepts once, without a credential, and gets the invited role and a first token', async () => {
    const before = clock.now();
    const invited = await invite(a, { email: 'New.Admin@Example.com', role: 'ADMIN' });
    expect(invited.secret).toMatch(/^singulacomp_inv_[0-9A-Za-z]+$/);
    expect(invited.invitation).toMatchObject({
      email: 'new.admin@example.com',
      role: 'ADMIN',
      acceptedAt: null,
    });
    // Default lifetime: three days.
    const lifetime = Date.parse(invited.invitation.expiresAt) - Date.parse(invited.invitation.createdAt);
    expect(lifetime).toBe(72 * 3_600_000);
    expect(Date.parse(invited.invitation.createdAt)).toBeGreaterThanOrEqual(before - 1_000);

    // Only the hash is stored.
    const stored = await t.app.services.db.invitation.findUniqueOrThrow({
      where: { id: invited.invitation.id },
    });
    expect(stored.hash).toBe(hashToken(invited.secret));
    expect(JSON.stringify(stored)).not.toContain(invited.secret);

    const accepted = await accept(invited.secret, 'New Admin');
    if (accepted.data?.acceptInvitation.__typename !== 'AcceptInvitationSuccess')
      throw new Error(JSON.stringify(accepted));
    const { member, account, secret } = accepted.data.acceptInvitation;
    expect(member).toMatchObject({ email: 'new.admin@example.com', name: 'New Admin', role: 'ADMIN' });
    expect(secret).toMatch(/^singulacomp_pat_/);

    // The first token works in the inviting account, with the admin's scopes.
    const viewer = await t.request(ViewerDocument, {}, secret);
    expect(viewer.data?.viewer.scopes).toContain('account:admin');
    const overview = await t.request(AccountOverviewDocument, {}, secret);
    expect(overview.data?.viewer.account.id).toBe(account.id);
    expect(overview.data?.viewer.account.members.map((m) => [m.email, m.role])).toEqual([
      ['alpha-admin@example.com', 'ADMIN'],
      ['new.admin@example.com', 'ADMIN'],
    ]);
    const listed = await t.request(AccountInvitationsDocument, {}, a);
    expect(listed.data?.viewer.account.invitations).toEqual([
      expect.objectContaining({ id: invited.invitation.id, acceptedAt: expect.any(String) }),
    ]);
    expect(
      (await t.app.services.db.invitation.findUniqueOrThrow({ where: { id: invited.invitation.id } }))
        .acceptedUserId,
    ).toBe(member.id);

    // Single use: a second redemption is a typed error and makes no user.
    const again = await accept(invited.secret, 'Someone Else');
    expect(again.data?.acceptInvitation).toMatchObject({
      code: 'INVITATION_USED',
      field: ['input', 'secret'],
    });
    expect(await t.app.services.db.user.count({ where: { email: 'new.admin@example.com' } })).toBe(1);
  });

  test('a member invitation gives a member token; expired, unknown and malformed tokens are refused', async () => {
    const member = await invite(a, { email: 'member@example.com' });
    expect(member.invitation.role).toBe('MEMBER');
    const short = await invite(a, { email: 'late@example.com', expiresInHours: 1 });

    const accepted = await accept(member.secret, 'Member');
    if (accepted.data?.acceptInvitation.__typename !== 'AcceptInvitationSuccess')
      throw new Error(JSON.stringify(accepted));
    expect(accepted.data.acceptInvitation.member.role).toBe('MEMBER');
    const scopes = (await t.request(ViewerDocument, {}, accepted.data.acceptInvitation.secret)).data?.viewer
      .scopes;
    expect(scopes).toContain('sessions:write');
    expect(scopes).not.toContain('account:admin');

    // A member cannot invite.
    const byMember = await t.request(
      CreateInvitationDocument,
      { input: { email: 'x@example.com' } },
      accepted.data.acceptInvitation.secret,
    );
    expect(byMember.errors?.[0]?.extensions?.code).toBe('FORBIDDEN');

    clock.advance(61 * 60_000);
    const late = await accept(short.secret, 'Late');
    expect(late.data?.acceptInvitation).toMatchObject({
      code: 'INVITATION_EXPIRED',
      field: ['input', 'secret'],
    });
    expect(await t.app.services.db.user.count({ where: { email: 'late@example.com' } })).toBe(0);

    // A well-formed token nobody issued, and a mangled one, name no invitation.
    const mangled = `${short.secret.slice(0, -1)}${short.secret.endsWith('a') ? 'b' : 'a'}`;
    expect((await accept(mangled, 'X')).data?.acceptInvitation).toMatchObject({ code: 'NOT_FOUND' });
    expect((await accept('singulacomp_pat_nope', 'X')).data?.acceptInvitation).toMatchObject({
      code: 'NOT_FOUND',
    });
  });

  test('invitations are checked: email, lifetime, an existing user', async () => {
    const bad = await t.request(CreateInvitationDocument, { input: { email: 'nope' } }, a);
    expect(bad.data?.createInvitation).toMatchObject({
      code: 'VALIDATION_FAILED',
      field: ['input', 'email'],
    });
    const long = await t.request(
      CreateInvitationDocument,
      { input: { email: 'l@example.com', expiresInHours: 721 } },
      a,
    );
    expect(long.data?.createInvitation).toMatchObject({
      code: 'VALIDATION_FAILED',
      field: ['input', 'expiresInHours'],
    });
    const taken = await t.request(
      CreateInvitationDocument,
      { input: { email: 'beta-admin@example.com' } },
      a,
    );
    expect(taken.data?.createInvitation).toMatchObject({ code: 'CONFLICT', field: ['input', 'email'] });
    // Accepting needs a name.
    const pending = await invite(a, { email: 'nameless@example.com' });
    const nameless = await accept(pending.secret, '  ');
    expect(nameless.data?.acceptInvitation).toMatchObject({ code: 'VALIDATION_FAILED' });
    // The refusal did not use the invitation up.
    const later = await accept(pending.secret, 'Named');
    expect(later.data?.acceptInvitation.__typename).toBe('AcceptInvitationSuccess');
  });

  test('tenancy: a member of another account cannot accept, see or list the invitations and service accounts', async () => {
    const forB = await invite(b, { email: 'for-beta@example.com' });
    // Signed in as an account-A admin: wrong account, typed; the invitation stays open.
    const wrong = await accept(forB.secret, 'Alpha Person', a);
    expect(wrong.data?.acceptInvitation).toMatchObject({
      code: 'INVITATION_WRONG_ACCOUNT',
      field: ['input', 'secret'],
    });
    const stillOpen = await t.app.services.db.invitation.findUniqueOrThrow({
      where: { id: forB.invitation.id },
    });
    expect(stillOpen.acceptedAt).toBeNull();
    // Signed in as B itself: already a member.
    const own = await accept(forB.secret, 'Beta Admin', b);
    expect(own.data?.acceptInvitation).toMatchObject({ code: 'CONFLICT' });

    const aInvites =
      (await t.request(AccountInvitationsDocument, {}, a)).data?.viewer.account.invitations ?? [];
    expect(aInvites.map((i) => i.email)).not.toContain('for-beta@example.com');
    expect(aInvites.length).toBeGreaterThan(0);
    const bInvites = (await t.request(AccountInvitationsDocument, {}, b)).data?.viewer.account.invitations;
    expect(bInvites?.map((i) => i.email)).toEqual(['for-beta@example.com']);

    // Service accounts: named principals of one account, listed by name for that account only.
    for (const name of ['deploy-bot', 'ci']) {
      const made = await t.request(
        CreateServiceAccountTokenDocument,
        { input: { name, scopes: ['projects:read'] } },
        b,
      );
      expect(made.data?.createServiceAccountToken).toMatchObject({
        secret: expect.stringMatching(/^singulacomp_sa_/),
      });
    }
    const second = await t.request(
      CreateServiceAccountTokenDocument,
      { input: { name: 'ci', scopes: ['projects:read'] } },
      b,
    );
    if (second.data?.createServiceAccountToken.__typename !== 'CreateTokenSuccess')
      throw new Error(JSON.stringify(second));
    const listedB = (await t.request(AccountServiceAccountsDocument, {}, b)).data?.viewer.account
      .serviceAccounts;
    expect(listedB?.map((sa) => [sa.name, sa.activeTokenCount])).toEqual([
      ['ci', 2],
      ['deploy-bot', 1],
    ]);
    await t.request(
      RevokeTokenDocument,
      { input: { tokenId: second.data.createServiceAccountToken.token.id } },
      b,
    );
    const afterRevoke = (await t.request(AccountServiceAccountsDocument, {}, b)).data?.viewer.account
      .serviceAccounts;
    expect(afterRevoke?.find((sa) => sa.name === 'ci')?.activeTokenCount).toBe(1);
    const listedA = (await t.request(AccountServiceAccountsDocument, {}, a)).data?.viewer.account
      .serviceAccounts;
    expect(listedA).toEqual([]);

    // A member (not an admin) of B sees the service accounts but not the invitations.
    const memberInvite = await invite(b, { email: 'beta-member@example.com' });
    const joined = await accept(memberInvite.secret, 'Beta Member');
    if (joined.data?.acceptInvitation.__typename !== 'AcceptInvitationSuccess')
      throw new Error(JSON.stringify(joined));
    const memberToken = joined.data.acceptInvitation.secret;
    const seen = await t.request(AccountServiceAccountsDocument, {}, memberToken);
    expect(seen.data?.viewer.account.serviceAccounts.map((sa) => sa.name)).toEqual(['ci', 'deploy-bot']);
    const hidden = await t.request(AccountInvitationsDocument, {}, memberToken);
    expect(hidden.errors?.[0]?.extensions?.code).toBe('FORBIDDEN');
  });
});
