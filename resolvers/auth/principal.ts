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

export function hasScope(principal: Principal, scope: Scope): boolean {
  return principal.kind !== 'SANDBOX' && principal.scopes.has(scope);
}
