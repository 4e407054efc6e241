// Who is calling. Built once per request / WebSocket connection by resolvers/tokens.ts.

export const SCOPES = [
  'projects:read',
  'projects:write',
  'sessions:read',
  'sessions:write',
  'secrets:write',
  'tokens:read',
  'tokens:write',
  'account:admin',
] as const;
export type Scope = (typeof SCOPES)[number];

interface PrincipalBase {
  accountId: string;
  tokenId: string;
  /** When the credential stops being valid (null: no expiry). */
  expiresAt: Date | null;
}

export interface UserPrincipal extends PrincipalBase {
  kind: 'USER';
  userId: string;
  isAdmin: boolean;
  scopes: ReadonlySet<string>;
}

export interface ServiceAccountPrincipal extends PrincipalBase {
  kind: 'SERVICE_ACCOUNT';
  serviceAccountId: string;
  scopes: ReadonlySet<string>;
}

/** The in-sandbox credential (R-AUTH-3): bound to one user, project, session and agent grant. */
export interface SandboxPrincipal extends PrincipalBase {
  kind: 'SANDBOX';
  userId: string | null;
  projectId: string;
  sessionId: string;
  sandboxId: string;
  agent: string;
}

export type Principal = UserPrincipal | ServiceAccountPrincipal | SandboxPrincipal;
export type HumanPrincipal = UserPrincipal | ServiceAccountPrincipal;

/** What the API shows of a credential (Viewer): its token kind, scopes and bound session. */
export function describePrincipal(principal: Principal): {
  tokenKind: 'PERSONAL_ACCESS' | 'SERVICE_ACCOUNT' | 'SANDBOX';
  scopes: string[];
  sessionId: string | null;
} {
  if (principal.kind === 'SANDBOX')
    return { tokenKind: 'SANDBOX', scopes: ['sandbox'], sessionId: principal.sessionId };
  return {
    tokenKind: principal.kind === 'USER' ? 'PERSONAL_ACCESS' : 'SERVICE_ACCOUNT',
    scopes: [...principal.scopes].sort(),
    sessionId: null,
  };
}

/** The user id a daemon sees in the user context. */
export function contextUserOf(principal: Principal): string {
  if (principal.kind === 'USER') return principal.userId;
  if (principal.kind === 'SERVICE_ACCOUNT') return `service-account:${principal.serviceAccountId}`;
  return principal.userId ?? `session:${principal.sessionId}`;
}

/** The user a credential acts as, for attribution (createdBy…): a user's own id; null for others. */
export function userOf(principal: Principal): string | null {
  return principal.kind === 'USER' ? principal.userId : null;
}

/** The user on whose behalf a credential acts: a user, or the user a sandbox token is bound to. */
export function onBehalfOf(principal: Principal): string | null {
  return principal.kind === 'SERVICE_ACCOUNT' ? null : principal.userId;
}
