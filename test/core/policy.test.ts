// The authorisation policy (R-POL-1): every action against every kind of caller. The policy is a
// pure function of the caller and the resource, so the table asks it directly; the tests of the API,
// the git proxy and the gateways (test/security, test/git, test/gateway) show the callers use it.
import { GraphQLError } from 'graphql';
import { describe, expect, it } from 'vitest';
import { assertCanReadSession, assertCanRevokeToken, assertScope } from '../../resolvers/auth/authz';
import {
  ACTIONS,
  type Action,
  type Actor,
  type Resources,
  authorize,
  can,
  decide,
} from '../../resolvers/auth/policy';
import { SCOPES, type Principal } from '../../resolvers/auth/principal';

const ACCOUNT = 'acct-a';
const SESSION = 'sess-own';
const PROJECT = 'proj-own';
const SANDBOX = 'sbx-own';
const LINK = 'link-1';
const PORT = 3000;

const base = { accountId: ACCOUNT, expiresAt: null };
const user = (name: string, isAdmin: boolean, scopes: readonly string[]): Principal => ({
  ...base,
  kind: 'USER',
  tokenId: `tok-${name}`,
  userId: `user-${name}`,
  isAdmin,
  scopes: new Set(scopes),
});
const sandboxToken = (session: string, project: string): Principal => ({
  ...base,
  kind: 'SANDBOX',
  tokenId: `tok-${session}`,
  userId: 'user-member',
  projectId: project,
  sessionId: session,
  sandboxId: `sbx-${session}`,
  agent: 'build',
});

/** Every kind of caller. The instance admin is the account admin whose user row has instanceAdmin. */
const ACTORS = {
  instanceAdmin: user('root', true, SCOPES),
  accountAdmin: user('admin', true, SCOPES),
  member: user('member', false, [
    'projects:read',
    'projects:write',
    'sessions:read',
    'sessions:write',
    'tokens:read',
    'tokens:write',
  ]),
  serviceAccount: {
    ...base,
    kind: 'SERVICE_ACCOUNT',
    tokenId: 'tok-ci',
    serviceAccountId: 'sa-ci',
    scopes: new Set(['projects:read', 'sessions:read', 'sessions:write', 'tokens:write']),
  },
  narrowPat: user('narrow', false, ['sessions:read']),
  sandboxOwn: sandboxToken(SESSION, PROJECT),
  sandboxOther: sandboxToken('sess-other', 'proj-other'),
  shareViewOnly: { kind: 'SHARE_LINK', linkId: LINK, mode: 'VIEW_ONLY' },
  shareInteractive: { kind: 'SHARE_LINK', linkId: LINK, mode: 'INTERACTIVE' },
  previewToken: { kind: 'PREVIEW_TOKEN', sandboxId: SANDBOX, port: PORT, userId: 'user-member' },
  anonymous: null,
} satisfies Record<string, Actor>;
type Who = keyof typeof ACTORS;

const HUMANS: Who[] = ['instanceAdmin', 'accountAdmin', 'member', 'serviceAccount', 'narrowPat'];
const WRITERS: Who[] = ['instanceAdmin', 'accountAdmin', 'member', 'serviceAccount'];
const ADMINS: Who[] = ['instanceAdmin', 'accountAdmin'];

const session = { id: SESSION, accountId: ACCOUNT };
const project = { id: PROJECT, accountId: ACCOUNT };
/** Another user's token holding a scope the service account lacks. */
const otherToken = { id: 'tok-x', accountId: ACCOUNT, userId: 'user-x', scopes: ['projects:write'] };

type Row = {
  [A in Action]: [label: string, action: A, resource: (who: Who) => Resources[A], allowed: Who[]];
}[Action];
const row = <A extends Action>(
  label: string,
  action: A,
  resource: Resources[A] | ((who: Who) => Resources[A]),
  allowed: Who[],
): Row =>
  [label, action, typeof resource === 'function' ? resource : () => resource, allowed] as unknown as Row;

const TABLE: Row[] = [
  row('any API credential', 'api.call', undefined, [...HUMANS, 'sandboxOwn', 'sandboxOther']),
  row('a user or service account', 'api.human', undefined, HUMANS),
  row('a credential with sessions:write', 'api.scope', { scope: 'sessions:write' }, WRITERS),
  row('the daemon reporting', 'daemon.report', undefined, ['sandboxOwn', 'sandboxOther']),
  row('a lease of this session', 'daemon.lease', { sessionId: SESSION }, ['sandboxOwn']),
  row('reading the session', 'session.read', session, [...HUMANS, 'sandboxOwn']),
  row('writing the session', 'session.write', session, WRITERS),
  row('driving its agent', 'session.sendMessage', session, [...WRITERS, 'sandboxOwn']),
  row('reloading it', 'session.reload', session, [...WRITERS, 'sandboxOwn']),
  row('deleting the member’s ended session', 'session.delete', { userId: 'user-member' }, [
    ...ADMINS,
    'member',
  ]),
  row('deleting someone else’s ended session', 'session.delete', { userId: 'user-x' }, ADMINS),
  row('watching the account', 'account.watch', undefined, HUMANS),
  row('reading the project', 'project.read', project, [...ADMINS, 'member', 'serviceAccount', 'sandboxOwn']),
  row('opening a change request', 'changeRequest.open', session, [...WRITERS, 'sandboxOwn']),
  row('closing a change request', 'changeRequest.close', { sessionId: SESSION, accountId: ACCOUNT }, [
    ...WRITERS,
    'sandboxOwn',
  ]),
  row('writing the project', 'project.write', { accountId: ACCOUNT, scope: 'projects:write' }, [
    ...ADMINS,
    'member',
  ]),
  row('reading the sandbox', 'sandbox.read', { sessionId: SESSION, accountId: ACCOUNT }, [
    ...HUMANS,
    'sandboxOwn',
  ]),
  row('reading a snapshot it uses', 'snapshot.read', undefined, [
    ...ADMINS,
    'member',
    'serviceAccount',
    'sandboxOwn',
    'sandboxOther',
  ]),
  row('reading a share link', 'shareLink.read', { accountId: ACCOUNT }, HUMANS),
  row('creating a share link', 'share.create', { accountId: ACCOUNT }, WRITERS),
  row('revoking a share link', 'share.revoke', { accountId: ACCOUNT }, WRITERS),
  row('GET through the share link', 'share.open', { linkId: LINK, method: 'GET', upgrade: false }, [
    'shareViewOnly',
    'shareInteractive',
  ]),
  row('POST through the share link', 'share.open', { linkId: LINK, method: 'POST', upgrade: false }, [
    'shareInteractive',
  ]),
  row('a WebSocket through the share link', 'share.open', { linkId: LINK, method: 'GET', upgrade: true }, [
    'shareInteractive',
  ]),
  row('another link’s origin', 'share.open', { linkId: 'link-2', method: 'GET', upgrade: false }, []),
  row(
    'opening the preview',
    'preview.open',
    { sandboxId: SANDBOX, sessionId: SESSION, accountId: ACCOUNT, port: PORT },
    [...HUMANS, 'sandboxOwn', 'previewToken'],
  ),
  row(
    'opening another port’s preview',
    'preview.open',
    { sandboxId: SANDBOX, sessionId: SESSION, accountId: ACCOUNT, port: PORT + 1 },
    [...HUMANS, 'sandboxOwn'],
  ),
  row('listing tokens', 'token.list', undefined, WRITERS),
  row('reading another user’s token', 'token.read', otherToken, [...ADMINS, 'serviceAccount']),
  row('reading every token', 'token.readAll', undefined, [...ADMINS, 'serviceAccount']),
  row('revoking another user’s token', 'token.revoke', otherToken, ADMINS),
  row('minting a service-account token', 'token.mint', undefined, [...ADMINS, 'serviceAccount']),
  row('minting a personal access token', 'token.mintPersonal', undefined, [...ADMINS, 'member', 'narrowPat']),
  row('managing members', 'account.manageMembers', undefined, ADMINS),
  row('instance administration', 'instance.admin', (who) => ({ instanceAdmin: who === 'instanceAdmin' }), [
    'instanceAdmin',
  ]),
  row('owning a trigger', 'trigger.own', undefined, [...ADMINS, 'member', 'narrowPat']),
  row('git fetch', 'git.fetch', project, [...ADMINS, 'member', 'serviceAccount', 'sandboxOwn']),
  row('git push', 'git.push', project, [...ADMINS, 'member', 'sandboxOwn']),
  row(
    'pushing the session branch',
    'git.updateRef',
    { ref: `refs/heads/${SESSION}`, newSha: 'a'.repeat(40), defaultBranch: 'main' },
    [...HUMANS, 'sandboxOwn'],
  ),
  row(
    'pushing the default branch',
    'git.updateRef',
    { ref: 'refs/heads/main', newSha: 'a'.repeat(40), defaultBranch: 'main' },
    [],
  ),
  row('calling the LLM gateway', 'llm.call', undefined, ['sandboxOwn', 'sandboxOther']),
];

describe('the authorisation policy', () => {
  it('has a row for every action', () => {
    expect(new Set(TABLE.map(([, action]) => action))).toEqual(new Set(ACTIONS));
  });

  describe.each(TABLE)('%s (%s)', (_label, action, resource, allowed) => {
    it.each(Object.keys(ACTORS) as Who[])('%s', (who) => {
      const args = [resource(who)] as [never];
      const decision = decide(ACTORS[who], action, ...args);
      expect(decision.allowed).toBe(allowed.includes(who));
      expect(can(ACTORS[who], action, ...args)).toBe(allowed.includes(who));
      if (!decision.allowed) {
        expect(decision.message.length).toBeGreaterThan(0);
        expect(decision.code).toBe(who === 'anonymous' ? 'UNAUTHENTICATED' : 'FORBIDDEN');
      }
    });
  });

  it('refuses with the GraphQL errors the API has always answered', () => {
    const refusal = (fn: () => void) => {
      try {
        fn();
      } catch (error) {
        expect(error).toBeInstanceOf(GraphQLError);
        const e = error as GraphQLError;
        return { code: e.extensions.code, message: e.message };
      }
      throw new Error('no refusal');
    };
    expect(refusal(() => authorize(null, 'session.read', session))).toEqual({
      code: 'UNAUTHENTICATED',
      message: 'Authentication required: send Authorization: Bearer <token>.',
    });
    expect(refusal(() => assertScope(ACTORS.narrowPat, 'sessions:write'))).toEqual({
      code: 'FORBIDDEN',
      message: 'This token lacks the sessions:write scope.',
    });
    expect(refusal(() => assertScope(ACTORS.sandboxOwn, 'sessions:read'))).toEqual({
      code: 'FORBIDDEN',
      message: 'A sandbox token cannot do this.',
    });
    expect(refusal(() => assertCanReadSession(ACTORS.sandboxOther, session))).toEqual({
      code: 'FORBIDDEN',
      message: 'A sandbox token can only reach its own session.',
    });
    expect(refusal(() => assertCanReadSession(ACTORS.member, { id: SESSION, accountId: 'acct-b' }))).toEqual({
      code: 'FORBIDDEN',
      message: 'That session belongs to another account.',
    });
    expect(
      refusal(() => assertCanRevokeToken(ACTORS.serviceAccount, { ...otherToken, id: 'tok-ci' })),
    ).toEqual({
      code: 'FORBIDDEN',
      message:
        'That token holds scopes this token lacks (projects:write); only an account admin can revoke it.',
    });
  });

  it('words the git proxy’s ref refusals as the push output shows them', () => {
    const refusal = (actor: Actor, ref: string, newSha = 'a'.repeat(40)) => {
      const decision = decide(actor, 'git.updateRef', { ref, newSha, defaultBranch: 'main' });
      return decision.allowed ? null : decision.message;
    };
    const hint = ` This session may push only refs/heads/${SESSION} (git push origin HEAD).`;
    expect(refusal(ACTORS.sandboxOwn, 'refs/heads/main')).toBe(
      `the default branch main is written only by merging a change request.${hint}`,
    );
    expect(refusal(ACTORS.sandboxOwn, `refs/heads/${SESSION}`, '0'.repeat(40))).toBe(
      `deleting refs is not allowed through the git proxy.${hint}`,
    );
    expect(refusal(ACTORS.sandboxOwn, 'refs/tags/v1')).toBe(
      `refs/tags/v1 is not this session's branch.${hint}`,
    );
    expect(refusal(ACTORS.member, 'refs/tags/v1')).toBe(
      'only branches (refs/heads/*) can be pushed through the git proxy, not refs/tags/v1.',
    );
    expect(refusal(ACTORS.member, 'refs/heads/feature')).toBeNull();
  });

  it('gives the proxies their HTTP status', () => {
    const status = (actor: Actor, action: Action, resource: unknown) => {
      const decision = decide(actor, action, resource as never);
      return decision.allowed ? 200 : decision.status;
    };
    // The git proxy answers a project of another account or project as missing.
    expect(status(ACTORS.member, 'git.fetch', { id: PROJECT, accountId: 'acct-b' })).toBe(404);
    expect(status(ACTORS.sandboxOther, 'git.push', project)).toBe(404);
    expect(status(ACTORS.narrowPat, 'git.fetch', project)).toBe(403);
    // A view-only link refuses a write method with 405 and a WebSocket with 403.
    const post = { linkId: LINK, method: 'POST', upgrade: false };
    expect(status(ACTORS.shareViewOnly, 'share.open', post)).toBe(405);
    expect(status(ACTORS.shareViewOnly, 'share.open', { ...post, method: 'GET', upgrade: true })).toBe(403);
    expect(status(ACTORS.anonymous, 'preview.open', {})).toBe(401);
  });
});
