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
