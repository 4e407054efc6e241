// The one place that decides who may do what (R-POL-1). Every check (the builder's scope-auth
// scopes, the type-level read checks, the per-resource `assertCan*`, the git proxy, the session
// gateway's agent route, previews, share links and LLM gateway, the daemon's report calls) asks
// `decide`/`can`/`authorize` with a named action and the resource it touches. Nothing else compares a
// caller's kind, scopes or admin flag: test/core/layout.test.ts fails on a check that does.
//
// A decision is a value: allowed, or refused with the error code, the HTTP status for the proxies
// and the message the caller sees. `authorize` throws the GraphQL error (UNAUTHENTICATED or
// FORBIDDEN) with that message; HTTP callers turn the decision into their own status.
import { forbidden, unauthenticated } from '../errors';
import type { HumanPrincipal, Principal, SandboxPrincipal, Scope } from './principal';

/** An anonymous visitor holding a share link's secret (on the link's own origin). */
export interface ShareLinkActor {
  kind: 'SHARE_LINK';
  linkId: string;
  mode: 'VIEW_ONLY' | 'INTERACTIVE';
}

/** A browser holding a signed preview token (URL or cookie) for one sandbox port. */
export interface PreviewTokenActor {
  kind: 'PREVIEW_TOKEN';
  sandboxId: string;
  port: number;
  userId: string;
}

/** Whoever asks: an API credential, a share-link visitor, a preview-token holder, or nobody. */
export type Actor = Principal | ShareLinkActor | PreviewTokenActor | null;

type Owned = { accountId: string };
type SessionRef = { id: string; accountId: string };
type ProjectRef = { id: string; accountId: string };
type TokenRef = { id: string; accountId: string; userId: string | null };

/** Each action and the resource it is asked about (`undefined`: the action has none). */
export interface Resources {
  /** Any API credential (scope-auth `authenticated`). */
  'api.call': undefined;
  /** A user or service-account credential, not a sandbox token (scope-auth `human`). */
  'api.human': undefined;
  /** A credential holding one scope (scope-auth `scope`; `assertScope`). */
  'api.scope': { scope: Scope };
  /** The daemon's own calls (telemetry, agent events, reload phases, bootstrap claim): the sandbox token. */
  'daemon.report': undefined;
  /** Lease calls: the sandbox token of exactly this session. */
  'daemon.lease': { sessionId: string };
  'session.read': SessionRef;
  'session.write': Owned;
  /** The agent route `/v1/sessions/<id>/agent/*`: its own sandbox, or writers of the session. */
  'session.sendMessage': SessionRef;
  /** deleteSession (an ended session's record): its creator or an account admin, with sessions:write. */
  'session.delete': { userId: string | null };
  /** requestReload: its own sandbox, or writers of the session. */
  'session.reload': SessionRef;
  /** Watching every session of the account (accountSessions). */
  'account.watch': undefined;
  'project.read': ProjectRef;
  /** openChangeRequest: readers of the session; other than its own sandbox, with sessions:write. */
  'changeRequest.open': SessionRef;
  /** closeChangeRequest: its session's own sandbox token, or writers of the project. */
  'changeRequest.close': { sessionId: string; accountId: string };
  /** Writing to a project (or what lives in it) with the scope that part needs. */
  'project.write': Owned & { scope: Scope };
  'sandbox.read': { sessionId: string; accountId: string };
  /** A snapshot already known to be used by something this caller reaches. */
  'snapshot.read': undefined;
  'shareLink.read': Owned;
  'share.create': Owned;
  'share.revoke': Owned;
  /** A request through a share link: view-only links allow GET/HEAD without WebSocket. */
  'share.open': { linkId: string; method: string; upgrade: boolean };
  /** A request on a sandbox port's preview origin. */
  'preview.open': { sandboxId: string; sessionId: string; accountId: string; port: number };
  'token.list': undefined;
  'token.read': TokenRef;
  /** Seeing every token of the account (not only one's own user's). */
  'token.readAll': undefined;
  'token.revoke': TokenRef & { scopes: string[] };
  /** Minting a service-account token. */
  'token.mint': undefined;
  /** Minting a personal access token: users only. */
  'token.mintPersonal': undefined;
  /** Account administration: settings, members, invitations. */
  'account.manageMembers': undefined;
  /** Instance administration (the user row's instanceAdmin flag, read by the caller). */
  'instance.admin': { instanceAdmin: boolean };
  /** Owning a trigger (its firings act as that user). */
  'trigger.own': undefined;
  'git.fetch': ProjectRef;
  'git.push': ProjectRef;
  /** One ref update of a push already authorised by git.push. */
  'git.updateRef': { ref: string; newSha: string; defaultBranch: string };
  /** The LLM gateway: sandbox tokens only. */
  'llm.call': undefined;
}

export type Action = keyof Resources;
export const ACTIONS = [
  'api.call',
  'api.human',
  'api.scope',
  'daemon.report',
  'daemon.lease',
  'session.read',
  'session.write',
  'session.sendMessage',
  'session.delete',
  'session.reload',
  'account.watch',
  'project.read',
  'changeRequest.open',
  'changeRequest.close',
  'project.write',
  'sandbox.read',
  'snapshot.read',
  'shareLink.read',
  'share.create',
  'share.revoke',
  'share.open',
  'preview.open',
  'token.list',
  'token.read',
  'token.readAll',
  'token.revoke',
  'token.mint',
  'token.mintPersonal',
  'account.manageMembers',
  'instance.admin',
  'trigger.own',
  'git.fetch',
  'git.push',
  'git.updateRef',
  'llm.call',
] as const satisfies readonly Action[];

export type Decision =
  | { allowed: true }
  | {
      allowed: false;
      code: 'UNAUTHENTICATED' | 'FORBIDDEN';
      /** What the HTTP proxies answer (the GraphQL API answers FORBIDDEN/UNAUTHENTICATED). */
      status: number;
      message: string;
    };

type ResourceArg<A extends Action> = Resources[A] extends undefined
  ? [resource?: undefined]
  : [resource: Resources[A]];

const UNAUTHENTICATED_MESSAGE = 'Authentication required: send Authorization: Bearer <token>.';
const ALLOW: Decision = { allowed: true };
const deny = (message: string, status = 403): Decision => ({
  allowed: false,
  code: 'FORBIDDEN',
  status,
  message,
});
const ZERO_SHA = '0000000000000000000000000000000000000000';

/** The zero object id git sends for a deleted ref. */
export const GIT_ZERO_SHA = ZERO_SHA;

function isPrincipal(actor: Actor): actor is Principal {
  return (
    actor !== null && (actor.kind === 'USER' || actor.kind === 'SERVICE_ACCOUNT' || actor.kind === 'SANDBOX')
  );
}

function human(p: Principal): p is HumanPrincipal {
  return p.kind !== 'SANDBOX';
}

function scope(p: Principal, s: Scope): Decision {
  if (!human(p)) return deny('A sandbox token cannot do this.');
  return p.scopes.has(s) ? ALLOW : deny(`This token lacks the ${s} scope.`);
}

function sameAccount(p: Principal, owned: Owned, what: string): Decision {
  return p.accountId === owned.accountId ? ALLOW : deny(`That ${what} belongs to another account.`);
}

function all(...steps: Array<() => Decision>): Decision {
  for (const step of steps) {
    const decision = step();
    if (!decision.allowed) return decision;
  }
  return ALLOW;
}

function sessionRead(p: Principal, session: SessionRef): Decision {
  if (p.kind === 'SANDBOX')
    return p.sessionId === session.id ? ALLOW : deny('A sandbox token can only reach its own session.');
  return all(
    () => sameAccount(p, session, 'session'),
    () => scope(p, 'sessions:read'),
  );
}

function sessionWrite(p: Principal, session: Owned): Decision {
  return all(
    () => scope(p, 'sessions:write'),
    () => sameAccount(p, session, 'session'),
  );
}

function projectRead(p: Principal, project: ProjectRef): Decision {
  if (p.kind === 'SANDBOX')
    return p.projectId === project.id ? ALLOW : deny('A sandbox token can only reach its own project.');
  return all(
    () => sameAccount(p, project, 'project'),
    () => scope(p, 'projects:read'),
  );
}

function tokenList(p: Principal): Decision {
  if (!human(p)) return deny('A sandbox token cannot do this.');
  return p.scopes.has('tokens:read') || p.scopes.has('tokens:write')
    ? ALLOW
    : deny('This token lacks the tokens:read scope.');
}

function accountAdmin(p: Principal): Decision {
  return all(
    () => scope(p, 'account:admin'),
    () => (p.kind === 'USER' && !p.isAdmin ? deny('Only account admins can do this.') : ALLOW),
  );
}

function gitProject(p: Principal, project: ProjectRef, s: Scope): Decision {
  const notFound = deny('No such project repository for this credential.', 404);
  if (project.accountId !== p.accountId) return notFound;
  if (p.kind === 'SANDBOX') return p.projectId === project.id ? ALLOW : notFound;
  return p.scopes.has(s) ? ALLOW : deny(`This token lacks the ${s} scope.`);
}

function gitUpdateRef(p: Principal, update: Resources['git.updateRef']): Decision {
  const allowed = p.kind === 'SANDBOX' ? `refs/heads/${p.sessionId}` : null;
  const hint = allowed ? ` This session may push only ${allowed} (git push origin HEAD).` : '';
  if (update.ref === `refs/heads/${update.defaultBranch}`) {
    return deny(
      `the default branch ${update.defaultBranch} is written only by merging a change request.${hint}`,
    );
  }
  if (update.newSha === ZERO_SHA) return deny(`deleting refs is not allowed through the git proxy.${hint}`);
  if (allowed)
    return update.ref === allowed ? ALLOW : deny(`${update.ref} is not this session's branch.${hint}`);
  if (!update.ref.startsWith('refs/heads/')) {
    return deny(`only branches (refs/heads/*) can be pushed through the git proxy, not ${update.ref}.`);
  }
  return ALLOW;
}

/** The decisions of actors that are no API credential: share-link visitors and preview tokens. */
function decideAnonymous(
  actor: ShareLinkActor | PreviewTokenActor,
  action: Action,
  resource: unknown,
): Decision {
  if (action === 'share.open' && actor.kind === 'SHARE_LINK') {
    const r = resource as Resources['share.open'];
    if (r.linkId !== actor.linkId) return deny('No such share link.', 404);
    if (actor.mode === 'VIEW_ONLY') {
      if (r.upgrade) return deny('A view-only share link does not allow WebSocket connections.');
      if (r.method !== 'GET' && r.method !== 'HEAD')
        return deny('A view-only share link allows only GET and HEAD.', 405);
    }
    return ALLOW;
  }
  if (action === 'preview.open' && actor.kind === 'PREVIEW_TOKEN') {
    const r = resource as Resources['preview.open'];
    return r.sandboxId === actor.sandboxId && r.port === actor.port
      ? ALLOW
      : deny('The preview link expired or is for another preview; ask for a new previewUrl.', 401);
  }
  return deny(
    actor.kind === 'SHARE_LINK'
      ? 'A share link opens only its own port.'
      : 'A preview token opens only its own preview.',
  );
}

/** The decision for `actor` doing `action` to `resource`. */
export function decide<A extends Action>(actor: Actor, action: A, ...[resource]: ResourceArg<A>): Decision {
  if (actor === null) {
    return { allowed: false, code: 'UNAUTHENTICATED', status: 401, message: UNAUTHENTICATED_MESSAGE };
  }
  if (!isPrincipal(actor)) return decideAnonymous(actor, action, resource);
  const p = actor;
  const r = resource as never;
  switch (action as Action) {
    case 'api.call':
      return ALLOW;
    case 'api.human':
      return human(p) ? ALLOW : deny('A sandbox token cannot do this.');
    case 'api.scope':
      return scope(p, (r as Resources['api.scope']).scope);
    case 'daemon.report':
      return p.kind === 'SANDBOX' ? ALLOW : deny('Only the sandbox token can do this.');
    case 'daemon.lease':
      if (p.kind !== 'SANDBOX') return deny('Only the sandbox token of this session can do this.');
      return p.sessionId === (r as Resources['daemon.lease']).sessionId
        ? ALLOW
        : deny('A sandbox token can only reach its own session.');
    case 'session.read':
      return sessionRead(p, r);
    case 'session.write':
    case 'share.create':
    case 'share.revoke':
      return sessionWrite(p, r);
    case 'session.sendMessage':
      return p.kind === 'SANDBOX' ? sessionRead(p, r) : sessionWrite(p, r);
    case 'session.delete': {
      const creator = (r as Resources['session.delete']).userId;
      return all(
        () => scope(p, 'sessions:write'),
        () =>
          p.kind === 'USER' && (p.userId === creator || p.isAdmin)
            ? ALLOW
            : deny('Only the user who created the session or an account admin can delete it.'),
      );
    }
    case 'session.reload':
      if (p.kind === 'SANDBOX')
        return p.sessionId === (r as SessionRef).id
          ? ALLOW
          : deny('A sandbox token can only reload its own session.');
      return sessionWrite(p, r);
    case 'account.watch':
      return human(p) ? scope(p, 'sessions:read') : deny('A sandbox token cannot watch the account.');
    case 'project.read':
      return projectRead(p, r);
    case 'changeRequest.open':
      return all(
        () => sessionRead(p, r),
        () =>
          human(p)
            ? decide(p, 'project.write', { accountId: (r as SessionRef).accountId, scope: 'sessions:write' })
            : ALLOW,
      );
    case 'changeRequest.close': {
      const c = r as Resources['changeRequest.close'];
      if (p.kind === 'SANDBOX')
        return p.sessionId === c.sessionId ? ALLOW : deny('No change request with that id.', 404);
      return decide(p, 'project.write', { accountId: c.accountId, scope: 'sessions:write' });
    }
    case 'project.write': {
      const w = r as Resources['project.write'];
      return all(
        () => scope(p, w.scope),
        () => sameAccount(p, w, 'project'),
      );
    }
    case 'sandbox.read': {
      const s = r as Resources['sandbox.read'];
      if (p.kind === 'SANDBOX')
        return p.sessionId === s.sessionId ? ALLOW : deny('A sandbox token can only reach its own sandbox.');
      return all(
        () => sameAccount(p, s, 'sandbox'),
        () => scope(p, 'sessions:read'),
      );
    }
    case 'snapshot.read':
      return human(p) && !p.scopes.has('projects:read')
        ? deny('This token lacks the projects:read scope.')
        : ALLOW;
    case 'shareLink.read':
      if (p.kind === 'SANDBOX') return deny('A sandbox token cannot read share links.');
      return all(
        () => sameAccount(p, r, 'share link'),
        () => scope(p, 'sessions:read'),
      );
    case 'share.open':
      return deny('A share link opens only with its own secret.');
    case 'preview.open': {
      const v = r as Resources['preview.open'];
      if (p.kind === 'SANDBOX')
        return p.sessionId === v.sessionId ? ALLOW : deny('A sandbox token can only reach its own sandbox.');
      return sessionRead(p, { id: v.sessionId, accountId: v.accountId });
    }
    case 'token.list':
      return tokenList(p);
    case 'token.read': {
      const t = r as TokenRef;
      return all(
        () => tokenList(p),
        () => sameAccount(p, t, 'token'),
        () =>
          p.kind === 'USER' && !p.isAdmin && t.userId !== p.userId && t.id !== p.tokenId
            ? deny('Only account admins read other users’ tokens.')
            : ALLOW,
      );
    }
    case 'token.readAll':
      return p.kind === 'SERVICE_ACCOUNT' || (p.kind === 'USER' && p.isAdmin)
        ? ALLOW
        : deny('Only account admins read other users’ tokens.');
    case 'token.revoke': {
      const t = r as Resources['token.revoke'];
      const admin = p.kind === 'USER' && p.isAdmin;
      return all(
        () => scope(p, 'tokens:write'),
        () => sameAccount(p, t, 'token'),
        () => {
          const own = p.kind === 'USER' ? t.userId === p.userId : t.id === p.tokenId;
          return own || admin ? ALLOW : deny('Only account admins revoke other users’ tokens.');
        },
        () => {
          const stronger = human(p) ? t.scopes.filter((s) => !p.scopes.has(s)) : [];
          return stronger.length > 0 && !admin
            ? deny(
                `That token holds scopes this token lacks (${stronger.join(', ')}); only an account admin can revoke it.`,
              )
            : ALLOW;
        },
      );
    }
    case 'token.mint':
      return all(
        () => scope(p, 'tokens:write'),
        () =>
          p.kind === 'USER' && !p.isAdmin
            ? deny('Only account admins create service-account tokens.')
            : ALLOW,
      );
    case 'token.mintPersonal':
      return p.kind === 'USER' ? ALLOW : deny('Only users hold personal access tokens.');
    case 'account.manageMembers':
      return accountAdmin(p);
    case 'instance.admin':
      return p.kind === 'USER' && (r as Resources['instance.admin']).instanceAdmin
        ? ALLOW
        : deny('Only instance admins can do this.');
    case 'trigger.own':
      return p.kind === 'USER' ? ALLOW : deny('Only users can own triggers.');
    case 'git.fetch':
      return gitProject(p, r, 'projects:read');
    case 'git.push':
      return gitProject(p, r, 'projects:write');
    case 'git.updateRef':
      return gitUpdateRef(p, r);
    case 'llm.call':
      return p.kind === 'SANDBOX'
        ? ALLOW
        : deny('The LLM gateway accepts only a sandbox token (SINGULACOMP_TOKEN).');
  }
  return deny('This credential is not allowed to do that.');
}

/** May `actor` do `action` to `resource`? */
export function can<A extends Action>(actor: Actor, action: A, ...resource: ResourceArg<A>): boolean {
  return decide(actor, action, ...resource).allowed;
}

/** The GraphQL error a refused decision answers with (`message` overrides the policy's wording). */
export function refusalError(decision: Decision & { allowed: false }, message?: string) {
  return decision.code === 'UNAUTHENTICATED'
    ? unauthenticated(message ?? decision.message)
    : forbidden(message ?? decision.message);
}

/** Throws FORBIDDEN (UNAUTHENTICATED without a caller) unless `actor` may do `action` to `resource`. */
export function authorize<A extends Action>(actor: Actor, action: A, ...resource: ResourceArg<A>): void {
  const decision = decide(actor, action, ...resource);
  if (!decision.allowed) throw refusalError(decision);
}

/** `authorize` with the caller's own wording of the refusal. */
export function authorizeWith<A extends Action>(
  message: string,
  actor: Actor,
  action: A,
  ...resource: ResourceArg<A>
): void {
  const decision = decide(actor, action, ...resource);
  if (!decision.allowed) throw refusalError(decision, message);
}

/** `authorize` for the daemon's calls: narrows to the sandbox token. */
export function assertDaemon(actor: Principal | null, message: string): asserts actor is SandboxPrincipal {
  if (!can(actor, 'daemon.report')) throw forbidden(message);
}

/**
 * What a caller reaches, for queries that filter rows to it: a sandbox token its own session and
 * project, anyone else their account. The decision on a row found this way is still `decide`'s.
 */
export function reachOf(
  p: Principal,
): { kind: 'session'; sessionId: string; projectId: string } | { kind: 'account'; accountId: string } {
  return p.kind === 'SANDBOX'
    ? { kind: 'session', sessionId: p.sessionId, projectId: p.projectId }
    : { kind: 'account', accountId: p.accountId };
}
