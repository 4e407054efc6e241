// A member removed from an account loses it at once, including what they minted, as an organisation
// member removed on GitHub does (docs/security.md, "Removing a member"): their personal access
// tokens stop on the next request, their share links are revoked, their pending invitations expire,
// their live sessions stop with their sandbox tokens, and their triggers pause until an admin
// resumes them (then firing as that admin). Service-account tokens belong to the account and stay.
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { decrypt } from '../../resolvers/auth/crypto';
import { signWebhook } from '../../resolvers/triggers/triggers';
import {
  AcceptInvitationDocument,
  AddMemberDocument,
  CreateInvitationDocument,
  CreatePersonalAccessTokenDocument,
  CreateProjectDocument,
  CreateServiceAccountTokenDocument,
  CreateSessionDocument,
  CreateShareLinkDocument,
  CreateTriggerDocument,
  PauseTriggerDocument,
  RemoveMemberDocument,
  SandboxShareLinksDocument,
  StopSessionDocument,
  ViewerDocument,
} from '../generated/graphql';
import { type SeededAccount, type TestApp, startTestApp } from '../support/app';
import { createTestRepo } from '../support/git';
import { waitFor } from '../support/wait';

describe('removing a member', () => {
  let t: TestApp;
  let admin: SeededAccount;
  let projectId: string;

  beforeAll(async () => {
    t = await startTestApp();
    admin = await t.seedAccount({ tier: 'TEAM' });
    const repo = createTestRepo({ 'README.md': '# members\n' });
    const res = await t.request(
      CreateProjectDocument,
      { input: { name: 'shared', repositoryUrl: repo.url } },
      admin.token,
    );
    if (res.data?.createProject.__typename !== 'CreateProjectSuccess') throw new Error(JSON.stringify(res));
    projectId = res.data.createProject.project.id;
  });
  afterAll(async () => t?.stop());

  async function runningSession(
    token: string,
  ): Promise<{ id: string; sessionId: string; sandboxId: string; sandboxToken: string }> {
    const res = await t.request(CreateSessionDocument, { input: { projectId } }, token);
    if (res.data?.createSession.__typename !== 'CreateSessionSuccess') throw new Error(JSON.stringify(res));
    const { id, sessionId } = res.data.createSession.session;
    const sandbox = await waitFor(async () => {
      const row = await t.app.services.db.session.findUnique({
        where: { id: sessionId },
        include: { sandbox: true },
      });
      return row?.status === 'RUNNING' && row.sandbox?.sandboxTokenEnc ? row.sandbox : null;
    }, 60_000);
    const sandboxToken = decrypt(t.app.services.keys.encryption, sandbox.sandboxTokenEnc!);
    return { id, sessionId, sandboxId: sandbox.id, sandboxToken };
  }

  test('ends their tokens, links, invitations, sessions and triggers at once; the account keeps its own', async () => {
    const db = t.app.services.db;
    const added = await t.request(
      AddMemberDocument,
      { input: { email: 'leaving@example.com', name: 'Leaving', role: 'ADMIN' } },
      admin.token,
    );
    if (added.data?.addMember.__typename !== 'AddMemberSuccess') throw new Error(JSON.stringify(added));
    const member = added.data.addMember;
    const firstPat = member.secret;
    const second = await t.request(
      CreatePersonalAccessTokenDocument,
      { input: { name: 'laptop', scopes: ['projects:read', 'sessions:read', 'sessions:write'] } },
      firstPat,
    );
    if (second.data?.createPersonalAccessToken.__typename !== 'CreateTokenSuccess')
      throw new Error(JSON.stringify(second));
    const secondPat = second.data.createPersonalAccessToken.secret;
    const serviceAccount = await t.request(
      CreateServiceAccountTokenDocument,
      { input: { name: 'ci', scopes: ['projects:read'] } },
      firstPat,
    );
    if (serviceAccount.data?.createServiceAccountToken.__typename !== 'CreateTokenSuccess')
      throw new Error(JSON.stringify(serviceAccount));
    const serviceToken = serviceAccount.data.createServiceAccountToken.secret;

    const theirs = await runningSession(firstPat);
    const ours = await runningSession(admin.token);
    const link = await t.request(
      CreateShareLinkDocument,
      {
        input: {
          sandboxId: theirs.sandboxId,
          port: 3000,
          mode: 'INTERACTIVE',
          expiresAt: new Date(Date.now() + 3_600_000).toISOString(),
        },
      },
      firstPat,
    );
    if (link.data?.createShareLink.__typename !== 'CreateShareLinkSuccess')
      throw new Error(JSON.stringify(link));
    const invitation = await t.request(
      CreateInvitationDocument,
      { input: { email: 'alt-account@example.com', role: 'ADMIN' } },
      firstPat,
    );
    if (invitation.data?.createInvitation.__typename !== 'CreateInvitationSuccess')
      throw new Error(JSON.stringify(invitation));
    const trigger = await t.request(
      CreateTriggerDocument,
      { input: { projectId, name: 'their-hook', kind: 'WEBHOOK', prompt: 'Go' } },
      firstPat,
    );
    if (trigger.data?.createTrigger.__typename !== 'CreateTriggerSuccess')
      throw new Error(JSON.stringify(trigger));
    const hook = trigger.data.createTrigger;

    expect((await t.request(ViewerDocument, {}, theirs.sandboxToken)).data?.viewer.kind).toBe('SANDBOX');
    // Both tokens work, and were just verified (a verified token is remembered for a few seconds).
    for (const token of [firstPat, secondPat]) {
      expect((await t.request(ViewerDocument, {}, token)).data?.viewer.kind).toBe('PERSONAL_ACCESS');
    }

    const removed = await t.request(
      RemoveMemberDocument,
      { input: { userId: member.member.id } },
      admin.token,
    );
    expect(removed.data?.removeMember.__typename).toBe('RemoveMemberSuccess');

    // Personal access tokens: dead on the very next request.
    for (const token of [firstPat, secondPat]) {
      const dead = await t.request(ViewerDocument, {}, token);
      expect(dead.errors?.[0]?.extensions?.code).toBe('UNAUTHENTICATED');
    }
    expect(await db.token.count({ where: { userId: member.member.id } })).toBe(0);

    // Their live session stopped, its sandbox token revoked; the branch's session row stays, ownerless.
    const stopped = await db.session.findUniqueOrThrow({ where: { id: theirs.sessionId } });
    expect(stopped).toMatchObject({ status: 'STOPPED', stopReason: 'USER', userId: null });
    const sandboxToken = await t.request(ViewerDocument, {}, theirs.sandboxToken);
    expect(sandboxToken.errors?.[0]?.extensions?.code).toBe('UNAUTHENTICATED');
    expect((await db.session.findUniqueOrThrow({ where: { id: ours.sessionId } })).status).toBe('RUNNING');

    // Their share link is revoked.
    const links = await t.request(SandboxShareLinksDocument, { id: theirs.sandboxId }, admin.token);
    expect(links.data?.sandbox?.shareLinks).toEqual([
      expect.objectContaining({ id: link.data.createShareLink.shareLink.id, active: false }),
    ]);

    // The invitation they issued can no longer be accepted.
    const accepted = await t.request(
      AcceptInvitationDocument,
      { input: { secret: invitation.data.createInvitation.secret, name: 'Back again' } },
      null,
    );
    expect(accepted.data?.acceptInvitation.__typename).toBe('InvitationExpiredError');
    expect(await db.user.count({ where: { email: 'alt-account@example.com' } })).toBe(0);

    // Their trigger is paused and ownerless: a signed delivery creates nothing.
    expect(await db.trigger.findUniqueOrThrow({ where: { id: hook.trigger.triggerId } })).toMatchObject({
      paused: true,
      userId: null,
    });
    const deliver = async () => {
      const body = JSON.stringify({ ref: 'main' });
      const timestamp = Math.floor(Date.now() / 1000);
      const response = await fetch(`${t.url}/v1/triggers/${hook.trigger.triggerId}/webhook`, {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          'x-singulacomp-timestamp': String(timestamp),
          'x-hub-signature-256': signWebhook(hook.webhookSecret!, timestamp, body),
        },
        body,
      });
      return {
        http: response.status,
        ...((await response.json()) as { code: string; sessionId: string | null }),
      };
    };
    expect(await deliver()).toMatchObject({ http: 409, code: 'TRIGGER_PAUSED' });

    // An admin resumes it and becomes its owner: its sessions are the admin's.
    const resumed = await t.request(
      PauseTriggerDocument,
      { input: { triggerId: hook.trigger.id, paused: false } },
      admin.token,
    );
    expect(resumed.data?.pauseTrigger.__typename).toBe('PauseTriggerSuccess');
    const fired = await deliver();
    expect(fired).toMatchObject({ http: 202, code: 'SESSION_CREATED' });
    expect((await db.session.findUniqueOrThrow({ where: { id: fired.sessionId! } })).userId).toBe(
      admin.userId,
    );

    // A service-account token belongs to the account, not to whoever minted it.
    expect((await t.request(ViewerDocument, {}, serviceToken)).data?.viewer.kind).toBe('SERVICE_ACCOUNT');

    for (const id of [ours.id, fired.sessionId!]) {
      await t.request(StopSessionDocument, { input: { sessionId: id } }, admin.token);
    }
  });
});
