// Per-resource capability checks (R-AUTH-4). Scope checks on fields say what a credential may do in
// general; these say whether it may do it to this particular resource.
import { forbidden } from '../errors';
import type { HumanPrincipal, Principal, Scope } from './principal';

export function assertHuman(principal: Principal): asserts principal is HumanPrincipal {
  if (principal.kind === 'SANDBOX') throw forbidden('A sandbox token cannot do this.');
}

export function assertScope(principal: Principal, scope: Scope): asserts principal is HumanPrincipal {
  assertHuman(principal);
  if (!principal.scopes.has(scope)) throw forbidden(`This token lacks the ${scope} scope.`);
}

export function assertAccountAdmin(principal: Principal): asserts principal is HumanPrincipal {
  assertScope(principal, 'account:admin');
  if (principal.kind === 'USER' && !principal.isAdmin) throw forbidden('Only account admins can do this.');
}

/** Reading a session: a sandbox token reaches only its own session; others need sessions:read in the account. */
export function assertCanReadSession(principal: Principal, session: { id: string; accountId: string }): void {
  if (principal.kind === 'SANDBOX') {
    if (principal.sessionId !== session.id)
      throw forbidden('A sandbox token can only reach its own session.');
    return;
  }
  if (principal.accountId !== session.accountId) throw forbidden('That session belongs to another account.');
  assertScope(principal, 'sessions:read');
}

export function assertCanWriteSession(principal: Principal, session: { accountId: string }): void {
  assertScope(principal, 'sessions:write');
  if (principal.accountId !== session.accountId) throw forbidden('That session belongs to another account.');
}

export function assertCanReadProject(principal: Principal, project: { id: string; accountId: string }): void {
  if (principal.kind === 'SANDBOX') {
    if (principal.projectId !== project.id)
      throw forbidden('A sandbox token can only reach its own project.');
    return;
  }
  if (principal.accountId !== project.accountId) throw forbidden('That project belongs to another account.');
  assertScope(principal, 'projects:read');
}

export function assertCanWriteProject(
  principal: Principal,
  project: { accountId: string },
  scope: Scope,
): void {
  assertScope(principal, scope);
  if (principal.accountId !== project.accountId) throw forbidden('That project belongs to another account.');
}

/** Reading a sandbox: a sandbox token reaches only its own; others need sessions:read in the account. */
export function assertCanReadSandbox(
  principal: Principal,
  sandbox: { sessionId: string; accountId: string },
): void {
  if (principal.kind === 'SANDBOX') {
    if (principal.sessionId !== sandbox.sessionId)
      throw forbidden('A sandbox token can only reach its own sandbox.');
    return;
  }
  if (principal.accountId !== sandbox.accountId) throw forbidden('That sandbox belongs to another account.');
  assertScope(principal, 'sessions:read');
}

/** Reading a change request: whoever may read its project. */
export function assertCanReadChangeRequest(
  principal: Principal,
  changeRequest: { projectId: string; accountId: string },
): void {
  assertCanReadProject(principal, { id: changeRequest.projectId, accountId: changeRequest.accountId });
}

/** Reading a trigger (and its runs): whoever may read its project. */
export function assertCanReadTrigger(
  principal: Principal,
  trigger: { projectId: string; accountId: string },
): void {
  assertCanReadProject(principal, { id: trigger.projectId, accountId: trigger.accountId });
}

/** Reading a share link: people of its account with sessions:read; never a sandbox token. */
export function assertCanReadShareLink(principal: Principal, link: { accountId: string }): void {
  if (principal.kind === 'SANDBOX') throw forbidden('A sandbox token cannot read share links.');
  if (principal.accountId !== link.accountId) throw forbidden('That share link belongs to another account.');
  assertScope(principal, 'sessions:read');
}

/** Listing or reading tokens: tokens:read (tokens:write implies it: tokens issued before it existed). */
export function assertCanReadTokens(principal: Principal): asserts principal is HumanPrincipal {
  assertHuman(principal);
  if (!principal.scopes.has('tokens:read') && !principal.scopes.has('tokens:write'))
    throw forbidden('This token lacks the tokens:read scope.');
}

/** Reading one token: tokens:read in its account; a member sees only their own user's tokens. */
export function assertCanReadToken(
  principal: Principal,
  token: { id: string; accountId: string; userId: string | null },
): void {
  assertCanReadTokens(principal);
  if (principal.accountId !== token.accountId) throw forbidden('That token belongs to another account.');
  if (
    principal.kind === 'USER' &&
    !principal.isAdmin &&
    token.userId !== principal.userId &&
    token.id !== principal.tokenId
  )
    throw forbidden('Only account admins read other users’ tokens.');
}

/**
 * Revoking a token: tokens:write, in the same account; another user's token only as an account
 * admin; and never a token holding scopes the caller lacks unless the caller's user is an admin
 * (a narrow token must not take down a stronger one).
 */
export function assertCanRevokeToken(
  principal: Principal,
  token: { id: string; accountId: string; userId: string | null; scopes: string[] },
): void {
  assertScope(principal, 'tokens:write');
  if (principal.accountId !== token.accountId) throw forbidden('That token belongs to another account.');
  const admin = principal.kind === 'USER' && principal.isAdmin;
  const own = principal.kind === 'USER' ? token.userId === principal.userId : token.id === principal.tokenId;
  if (!own && !admin) throw forbidden('Only account admins revoke other users’ tokens.');
  const stronger = token.scopes.filter((s) => !principal.scopes.has(s));
  if (stronger.length > 0 && !admin)
    throw forbidden(
      `That token holds scopes this token lacks (${stronger.join(', ')}); only an account admin can revoke it.`,
    );
}
