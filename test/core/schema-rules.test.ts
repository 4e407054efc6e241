// The rules behind two GraphQL fields, now in services on the server's one clock (issue 43):
// ShareLink.active is the gateway's own test (not revoked, not past expiresAt) and flips at the
// expiry instant on that clock; ServiceAccount.activeTokenCount counts each service account's tokens
// that still authenticate (revoked and expired ones left out), for a whole list in statements that
// do not grow with the number of service accounts.
import { createHash, randomUUID } from 'node:crypto';
import { print } from 'graphql';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import {
  AccountServiceAccountsDocument,
  type AccountServiceAccountsQuery,
  CreateServiceAccountTokenDocument,
  RevokeTokenDocument,
  SandboxShareLinksDocument,
} from '../generated/graphql';
import { type SeededAccount, type TestApp, startTestApp } from '../support/app';
import { type TestClock, createTestClock } from '../support/clock';

describe('schema field rules on the injected clock', () => {
  let t: TestApp;
  let clock: TestClock;
  let owner: SeededAccount;

  beforeAll(async () => {
    clock = createTestClock();
    // Frozen: "one millisecond before" and "at" the expiry are exact however slow the machine.
    clock.freeze();
    t = await startTestApp({ now: clock.now });
    owner = await t.seedAccount();
  });
  afterAll(async () => t?.stop());

  describe('ShareLink.active', () => {
    const secret = `share-${randomUUID()}`;
    let sandboxId: string;
    let expiring: { id: string; expiresAt: Date };
    let revokedId: string;
    let lastingId: string;

    beforeAll(async () => {
      const db = t.app.services.db;
      const project = await db.project.create({
        data: { accountId: owner.accountId, name: 'links', repositoryUrl: 'file:///nowhere' },
      });
      const session = await db.session.create({
        data: {
          accountId: owner.accountId,
          projectId: project.id,
          status: 'RUNNING',
          branchName: randomUUID(),
          baseRef: 'main',
        },
      });
      const sandbox = await db.sandbox.create({
        data: {
          sessionId: session.id,
          accountId: owner.accountId,
          provider: 'LOCAL',
          status: 'STARTED',
          cpu: 1,
          memoryGiB: 1,
          diskGiB: 1,
        },
      });
      sandboxId = sandbox.id;
      const link = (expiresAt: Date, revokedAt: Date | null, hash: string = randomUUID()) =>
        db.shareLink.create({
          data: {
            sandboxId,
            accountId: owner.accountId,
            port: 3000,
            mode: 'VIEW_ONLY',
            secretHash: hash,
            expiresAt,
            revokedAt,
          },
        });
      const now = clock.now();
      const made = await link(
        new Date(now + 3_600_000),
        null,
        createHash('sha256').update(secret).digest('hex'),
      );
      expiring = { id: made.id, expiresAt: made.expiresAt };
      revokedId = (await link(new Date(now + 7_200_000), new Date(now))).id;
      lastingId = (await link(new Date(now + 7_200_000), null)).id;
    });

    async function activeById(): Promise<Map<string, boolean>> {
      const res = await t.request(SandboxShareLinksDocument, { id: sandboxId }, owner.token);
      expect(res.errors).toBeUndefined();
      const links = res.data?.sandbox?.shareLinks ?? [];
      expect(links).toHaveLength(3);
      return new Map(links.map((l) => [Buffer.from(l.id, 'base64').toString().split(':')[1]!, l.active]));
    }

    /** The gateway's answer for the expiring link now: its refusal message, or null when it lets it through. */
    async function gatewayRefusal(): Promise<string | null> {
      try {
        await t.app.services.access.share({ secret, linkId: expiring.id, method: 'GET', upgrade: false });
        return null;
      } catch (error) {
        return (error as Error).message;
      }
    }

    test('flips at the expiry instant of the server clock, as the gateway does; revoked stays inactive', async () => {
      const before = await activeById();
      expect(before.get(expiring.id)).toBe(true);
      expect(before.get(revokedId)).toBe(false);
      expect(before.get(lastingId)).toBe(true);

      // One millisecond before the expiry (on the server clock, not the wall clock): still active.
      clock.advance(expiring.expiresAt.getTime() - clock.now() - 1);
      expect((await activeById()).get(expiring.id)).toBe(true);
      expect(await gatewayRefusal()).not.toBe('This share link expired.');

      // At the expiry instant: inactive, and the gateway refuses it as expired at the same instant.
      clock.advance(1);
      const after = await activeById();
      expect(after.get(expiring.id)).toBe(false);
      expect(after.get(revokedId)).toBe(false);
      expect(after.get(lastingId)).toBe(true);
      expect(await gatewayRefusal()).toBe('This share link expired.');
      // The wall clock is far behind the server clock here: a field on Date.now() would still say true.
      expect(Date.now()).toBeLessThan(expiring.expiresAt.getTime());
    });
  });

  describe('ServiceAccount.activeTokenCount', () => {
    let admin: SeededAccount;
    let other: SeededAccount;

    beforeAll(async () => {
      admin = await t.seedAccount();
      other = await t.seedAccount();
    });

    async function mint(account: SeededAccount, name: string, expiresAt: Date | null = null) {
      const res = await t.request(
        CreateServiceAccountTokenDocument,
        {
          input: {
            name,
            scopes: ['projects:read'],
            ...(expiresAt ? { expiresAt: expiresAt.toISOString() } : {}),
          },
        },
        account.token,
      );
      if (res.data?.createServiceAccountToken.__typename !== 'CreateTokenSuccess')
        throw new Error(JSON.stringify(res));
      return res.data.createServiceAccountToken.token.id;
    }

    /** [name, activeTokenCount] of the account's service accounts, and the statements the request sent. */
    async function counts(account: SeededAccount) {
      await t.request(AccountServiceAccountsDocument, {}, account.token); // caches the token
      const stats = t.app.services.database.stats;
      const requestId = randomUUID();
      stats.log = [];
      const res = await t.raw({ query: print(AccountServiceAccountsDocument) }, account.token, {
        'x-request-id': requestId,
      });
      const statements = stats.log.filter((s) => s.requestId === requestId).length;
      stats.log = null;
      expect(res.errors).toBeUndefined();
      const listed = (res.data as AccountServiceAccountsQuery).viewer.account.serviceAccounts;
      return { counts: listed.map((sa) => [sa.name, sa.activeTokenCount]), statements };
    }

    test('counts tokens that still authenticate, per service account, leaving out revoked and expired ones', async () => {
      const expiresAt = new Date(clock.now() + 10 * 60_000);
      await mint(admin, 'builder');
      await mint(admin, 'builder', expiresAt);
      const revoked = await mint(admin, 'builder');
      await mint(admin, 'deployer');
      await mint(admin, 'deployer');
      await mint(admin, 'short-lived', expiresAt);
      await mint(admin, 'unused-soon');
      // Another account's service account of the same name counts apart.
      await mint(other, 'builder');
      await mint(other, 'builder');

      const revokedRes = await t.request(RevokeTokenDocument, { input: { tokenId: revoked } }, admin.token);
      expect(revokedRes.errors).toBeUndefined();
      const revokedRow = await t.app.services.db.token.findUniqueOrThrow({
        where: { id: Buffer.from(revoked, 'base64').toString().split(':')[1]! },
      });
      expect(revokedRow.revokedAt).not.toBeNull();

      expect((await counts(admin)).counts).toEqual([
        ['builder', 2],
        ['deployer', 2],
        ['short-lived', 1],
        ['unused-soon', 1],
      ]);
      expect((await counts(other)).counts).toEqual([['builder', 2]]);

      // Past the expiry on the server clock: the expiring tokens no longer count (nor authenticate).
      clock.advance(expiresAt.getTime() - clock.now());
      expect((await counts(admin)).counts).toEqual([
        ['builder', 1],
        ['deployer', 2],
        ['short-lived', 0],
        ['unused-soon', 1],
      ]);
      expect(Date.now()).toBeLessThan(expiresAt.getTime());
    });

    test('a list costs the same statements whatever the number of service accounts', async () => {
      const account = await t.seedAccount();
      await mint(account, 'one');
      await mint(account, 'two');
      const small = await counts(account);
      expect(small.counts).toEqual([
        ['one', 1],
        ['two', 1],
      ]);
      for (const name of ['three', 'four', 'five', 'six', 'seven', 'eight']) await mint(account, name);
      const large = await counts(account);
      expect(large.counts).toHaveLength(8);
      expect(large.counts.every(([, count]) => count === 1)).toBe(true);
      expect(small.statements).toBeGreaterThan(0);
      expect(large.statements).toBe(small.statements);
    });
  });
});
