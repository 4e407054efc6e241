// Per-resource capability checks (R-AUTH-4), as thin wrappers over the policy (./policy.ts), which
// alone decides. Scope checks on fields say what a credential may do in general; these say whether it
// may do it to this particular resource.
import type { HumanPrincipal, Principal, Scope } from './principal';
import { authorize } from './policy';

export function assertHuman(principal: Principal): asserts principal is HumanPrincipal {
  authorize(principal, 'api.human');
}

export function assertScope(principal: Principal, scope: Scope): asserts principal is HumanPrincipal {
  authorize(principal, 'api.scope', { scope });
}

export function assertAccountAdmin(principal: Principal): asserts principal is HumanPrincipal {
  authorize(principal, 'account.manageMembers');
}

/** Reading a session: a sandbox token reaches only its own session; others need sessions:read in the account. */
export function assertCanReadSession(principal: Principal, session: { id: string; accountId: string }): void {
  authorize(principal, 'session.read', session);
}

export function assertCanWriteSession(principal: Principal, session: { accountId: string }): void {
  authorize(principal, 'session.write', session);
}

export function assertCanReadProject(principal: Principal, project: { id: string; accountId: string }): void {
  authorize(principal, 'project.read', project);
}

export function assertCanWriteProject(
  principal: Principal,
  project: { accountId: string },
  scope: Scope,
): void {
  authorize(principal, 'project.write', { accountId: project.accountId, scope });
}

/** Reading a sandbox: a sandbox token reaches only its own; others need sessions:read in the account. */
export function assertCanReadSandbox(
  principal: Principal,
  sandbox: { sessionId: string; accountId: string },
): void {
  authorize(principal, 'sandbox.read', sandbox);
}

/** Reading a change request: whoever may read its project. */
export function assertCanReadChangeRequest(
  principal: Principal,
  changeRequest: { projectId: string; accountId: string },
): void {
  authorize(principal, 'project.read', { id: changeRequest.projectId, accountId: changeRequest.accountId });
}

/** Reading a trigger (and its runs): whoever may read its project. */
export function assertCanReadTrigger(
  principal: Principal,
  trigger: { projectId: string; accountId: string },
): void {
  authorize(principal, 'project.read', { id: trigger.projectId, accountId: trigger.accountId });
}

/** Reading a share link: people of its account with sessions:read; never a sandbox token. */
export function assertCanReadShareLink(principal: Principal, link: { accountId: string }): void {
  authorize(principal, 'shareLink.read', link);
}

/** Listing or reading tokens: tokens:read (tokens:write implies it: tokens issued before it existed). */
export function assertCanReadTokens(principal: Principal): asserts principal is HumanPrincipal {
  authorize(principal, 'token.list');
}

/** Reading one token: tokens:read in its account; a member sees only their own user's tokens. */
export function assertCanReadToken(
  principal: Principal,
  token: { id: string; accountId: string; userId: string | null },
): void {
  authorize(principal, 'token.read', token);
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
  authorize(principal, 'token.revoke', token);
}
