// Accounts and their members (R-ACC-1): the instance admin (the bootstrap user) creates accounts,
// each with a first admin; an account admin adds members (a user with a first personal access token,
// shown once, or an invitation whose one-time token a new user redeems), lists and removes them.
// Service accounts stay named principals of an account holding `singulacomp_sa_` tokens (tokens.ts);
// the account's members list them here.
import type { AccountTier, UserRole } from '../../prisma/generated/client/enums';
import type { Invitation, User } from '../../prisma/generated/client/client';
import type { Db } from '../platform';
import { assertAccountAdmin, assertHuman } from '../auth/authz';
import { SCOPES, type Principal, type Scope, type UserPrincipal, userOf } from '../auth/principal';
import { can } from '../auth/policy';
import {
  INV_PREFIX,
  type TokenService,
  generateOpaqueToken,
  hashToken,
  isWellFormedInvitationToken,
} from '../auth/tokens';
import {
  ConflictError,
  InvitationExpiredError,
  InvitationUsedError,
  InvitationWrongAccountError,
  NotFoundError,
  ValidationError,
  forbidden,
} from '../errors';
import { parseId } from '../ids';
import { LIVE_SESSION_STATUSES } from './limits';

/** Scopes of a new member's first token: a MEMBER works in the account, an ADMIN also runs it. */
export function firstTokenScopes(role: UserRole): Scope[] {
  return role === 'ADMIN' ? [...SCOPES] : SCOPES.filter((s) => s !== 'account:admin');
}

export interface NewMemberInput {
  email: string;
  name: string;
  /** @default 'MEMBER' */
  role?: UserRole | null;
}

export interface CreateAccountInput {
  name: string;
  /** @default 'FREE' */
  tier?: AccountTier | null;
  admin: NewMemberInput;
}

type CleanMember = { email: string; name: string; role: UserRole };

const EMAIL = /^[^\s@]+@[^\s@]+$/;

function cleanMember(input: NewMemberInput, path: string[]): CleanMember {
  const email = input.email.trim().toLowerCase();
  const name = input.name.trim();
  if (!EMAIL.test(email) || email.length > 254) {
    throw new ValidationError('email must look like name@host (at most 254 characters).', [...path, 'email']);
  }
  if (name.length < 1 || name.length > 100 || name.includes('\0')) {
    throw new ValidationError('name must be 1 to 100 characters, without NUL.', [...path, 'name']);
  }
  return { email, name, role: input.role ?? 'MEMBER' };
}

export interface InviteInput {
  email: string;
  /** @default 'MEMBER' */
  role?: UserRole | null;
  /** @default 72 (3 days); 1 to 720 (30 days). */
  expiresInHours?: number | null;
}

export const INVITATION_DEFAULT_HOURS = 72;
export const INVITATION_MAX_HOURS = 720;

export type MemberService = ReturnType<typeof createMemberService>;

export interface MemberServiceOptions {
  db: Db;
  tokens: TokenService;
  /** Stops a live session (its sandbox token is revoked with it); for a removed member's sessions. */
  stopSession?: (sessionId: string) => Promise<unknown>;
  now?: () => number;
}

export function createMemberService(options: MemberServiceOptions) {
  const { db, tokens } = options;
  const now = options.now ?? Date.now;

  /** Creates the user (emails are unique across the instance) and its first token. */
  async function createUser(
    accountId: string,
    member: CleanMember,
    path: string[],
  ): Promise<{ user: User; secret: string }> {
    if (await db.user.findUnique({ where: { email: member.email }, select: { id: true } })) {
      throw new ConflictError(`A user with email ${member.email} already exists.`, [...path, 'email']);
    }
    const user = await db.user.create({ data: { accountId, ...member } });
    const principal: UserPrincipal = {
      kind: 'USER',
      userId: user.id,
      accountId,
      isAdmin: member.role === 'ADMIN',
      scopes: new Set(SCOPES),
      tokenId: '',
      expiresAt: null,
    };
    const { secret } = await tokens.createPersonalAccessToken(principal, {
      name: 'first token',
      scopes: firstTokenScopes(member.role),
    });
    return { user, secret };
  }

  async function isInstanceAdmin(principal: Principal): Promise<boolean> {
    const userId = userOf(principal);
    if (!userId) return false;
    const user = await db.user.findUnique({ where: { id: userId }, select: { instanceAdmin: true } });
    return can(principal, 'instance.admin', { instanceAdmin: user?.instanceAdmin === true });
  }

  return {
    isInstanceAdmin,

    /** createAccount: instance admin only; the new account's first admin gets a token (shown once). */
    async createAccount(principal: Principal, input: CreateAccountInput) {
      assertHuman(principal);
      if (!(await isInstanceAdmin(principal))) throw forbidden('Only the instance admin creates accounts.');
      const name = input.name.trim();
      if (name.length < 1 || name.length > 100 || name.includes('\0')) {
        throw new ValidationError('name must be 1 to 100 characters, without NUL.', ['input', 'name']);
      }
      const admin = cleanMember({ ...input.admin, role: 'ADMIN' }, ['input', 'admin']);
      const account = await db.account.create({ data: { name, tier: input.tier ?? 'FREE' } });
      try {
        const { user, secret } = await createUser(account.id, admin, ['input', 'admin']);
        return { account, admin: user, secret };
      } catch (error) {
        // No account without its admin (a taken email is the usual cause).
        await db.account.delete({ where: { id: account.id } }).catch(() => {});
        throw error;
      }
    },

    /** addMember: account admins; the member's first token is returned once. */
    async add(principal: Principal, input: NewMemberInput) {
      assertAccountAdmin(principal);
      const member = cleanMember(input, ['input']);
      const { user, secret } = await createUser(principal.accountId, member, ['input']);
      return { member: user, secret };
    },

    /**
     * removeMember: account admins. Like an organisation removing a member on GitHub, the member's
     * access to the account ends at once, including what they minted (docs/security.md): their
     * personal access tokens are revoked (open connections close) and deleted with the user; the
     * share links they created are revoked; the invitations they issued and nobody accepted yet
     * expire; their live sessions stop (each sandbox token is revoked with its session; the branch
     * and record stay); their triggers are paused and lose their owner, so they fire again only when
     * an admin resumes them, as that admin. Service-account tokens belong to the account and stay.
     */
    async remove(principal: Principal, input: { userId: string }) {
      assertAccountAdmin(principal);
      const userId = parseId(String(input.userId), 'User', ['input', 'userId']);
      const user = await db.user.findUnique({ where: { id: userId } });
      if (!user || user.accountId !== principal.accountId) {
        throw new NotFoundError('No member with that id in your account.', ['input', 'userId']);
      }
      if (userOf(principal) === user.id) {
        throw new ConflictError('You cannot remove yourself; ask another admin.', ['input', 'userId']);
      }
      if (user.role === 'ADMIN') {
        const admins = await db.user.count({ where: { accountId: user.accountId, role: 'ADMIN' } });
        if (admins <= 1) throw new ConflictError('An account keeps at least one admin.', ['input', 'userId']);
      }
      // Revoke first so open connections close (the token service's listeners), then delete.
      const live = await db.token.findMany({
        where: { userId: user.id, revokedAt: null },
        select: { id: true },
      });
      for (const token of live) await tokens.revoke(token.id);
      const at = new Date(now());
      await db.$transaction([
        db.shareLink.updateMany({
          where: { accountId: user.accountId, createdById: user.id, revokedAt: null },
          data: { revokedAt: at },
        }),
        db.invitation.updateMany({
          where: { accountId: user.accountId, invitedById: user.id, acceptedAt: null, expiresAt: { gt: at } },
          data: { expiresAt: at },
        }),
        db.trigger.updateMany({
          where: { accountId: user.accountId, userId: user.id },
          data: { paused: true, userId: null },
        }),
      ]);
      const sessions = await db.session.findMany({
        where: { userId: user.id, status: { in: [...LIVE_SESSION_STATUSES] } },
        select: { id: true },
      });
      await db.user.delete({ where: { id: user.id } });
      if (options.stopSession) {
        for (const session of sessions) await options.stopSession(session.id);
      }
      return user;
    },

    /**
     * createInvitation: account admins. The token is returned once; only its hash is stored. The
     * email must not belong to a user yet (emails are unique across the instance).
     */
    async invite(
      principal: Principal,
      input: InviteInput,
    ): Promise<{ invitation: Invitation; secret: string }> {
      assertAccountAdmin(principal);
      const email = input.email.trim().toLowerCase();
      if (!EMAIL.test(email) || email.length > 254) {
        throw new ValidationError('email must look like name@host (at most 254 characters).', [
          'input',
          'email',
        ]);
      }
      const hours = input.expiresInHours ?? INVITATION_DEFAULT_HOURS;
      if (!Number.isInteger(hours) || hours < 1 || hours > INVITATION_MAX_HOURS) {
        throw new ValidationError(`expiresInHours must be 1 to ${INVITATION_MAX_HOURS}.`, [
          'input',
          'expiresInHours',
        ]);
      }
      if (await db.user.findUnique({ where: { email }, select: { id: true } })) {
        throw new ConflictError(`A user with email ${email} already exists.`, ['input', 'email']);
      }
      const secret = generateOpaqueToken(INV_PREFIX);
      // One reading of the clock: the lifetime is exactly `hours`, however long the call takes.
      const createdAt = now();
      const invitation = await db.invitation.create({
        data: {
          accountId: principal.accountId,
          email,
          role: input.role ?? 'MEMBER',
          hash: hashToken(secret),
          invitedById: userOf(principal),
          createdAt: new Date(createdAt),
          expiresAt: new Date(createdAt + hours * 3_600_000),
        },
      });
      return { invitation, secret };
    },

    /**
     * acceptInvitation: needs no credential (the token is one). Redeems the token once, before it
     * expires, for a new user of the invitation's account with the invited role and a first token.
     * A caller who already belongs to an account cannot accept (users belong to one account).
     */
    async accept(principal: Principal | null, input: { secret: string; name: string }) {
      const path = ['input', 'secret'];
      const secret = input.secret.trim();
      const unknown = () => new NotFoundError('No such invitation.', path);
      if (!isWellFormedInvitationToken(secret)) throw unknown();
      const invitation = await db.invitation.findUnique({ where: { hash: hashToken(secret) } });
      if (!invitation) throw unknown();
      if (principal && principal.accountId !== invitation.accountId) {
        throw new InvitationWrongAccountError(
          'This invitation is for another account than the one you belong to; accept it without a credential as a new user.',
          path,
        );
      }
      if (invitation.acceptedAt) throw new InvitationUsedError('This invitation was already accepted.', path);
      const at = new Date(now());
      if (invitation.expiresAt <= at) throw new InvitationExpiredError('This invitation has expired.', path);
      if (principal) throw new ConflictError('You already belong to this account.', path);
      const member = cleanMember({ email: invitation.email, name: input.name, role: invitation.role }, [
        'input',
      ]);
      // Single use under concurrency: only one caller moves acceptedAt from null.
      const claimed = await db.invitation.updateMany({
        where: { id: invitation.id, acceptedAt: null, expiresAt: { gt: at } },
        data: { acceptedAt: at },
      });
      if (claimed.count !== 1) throw new InvitationUsedError('This invitation was already accepted.', path);
      try {
        const { user, secret: token } = await createUser(invitation.accountId, member, ['input']);
        await db.invitation.update({ where: { id: invitation.id }, data: { acceptedUserId: user.id } });
        const account = await db.account.findUniqueOrThrow({ where: { id: invitation.accountId } });
        return { member: user, account, secret: token };
      } catch (error) {
        // The user could not be made (an email taken since): the invitation stays redeemable.
        await db.invitation
          .update({ where: { id: invitation.id }, data: { acceptedAt: null } })
          .catch(() => {});
        throw error;
      }
    },

    /** account.invitations: account admins see the account's invitations, newest first. */
    listInvitations<Q extends object>(principal: Principal, accountId: string, query?: Q) {
      assertAccountAdmin(principal);
      if (principal.accountId !== accountId) throw forbidden('That account is not yours.');
      return db.invitation.findMany({
        ...(query ?? {}),
        where: { accountId },
        orderBy: [{ createdAt: 'desc' }, { id: 'desc' }],
      });
    },

    /** account.serviceAccounts: any human of the account sees its service accounts, by name. */
    listServiceAccounts<Q extends object>(principal: Principal, accountId: string, query?: Q) {
      assertHuman(principal);
      if (principal.accountId !== accountId) throw forbidden('That account is not yours.');
      return db.serviceAccount.findMany({
        ...(query ?? {}),
        where: { accountId },
        orderBy: [{ name: 'asc' }, { id: 'asc' }],
      });
    },

    /** account.members: any human of the account sees who else is in it. */
    list<Q extends object>(principal: Principal, accountId: string, query?: Q) {
      assertHuman(principal);
      if (principal.accountId !== accountId) throw forbidden('That account is not yours.');
      return db.user.findMany({
        ...(query ?? {}),
        where: { accountId },
        orderBy: [{ createdAt: 'asc' }, { id: 'asc' }],
      });
    },
  };
}
