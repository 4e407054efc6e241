// The dashboard's sessions list at volume and its account switcher, in Chromium against a real
// server (no sandboxes needed): a thousand stored sessions scroll to the last one by keyboard with
// only the rows in view in the DOM; a second account signs in beside the first, the header switches
// between them, and signing out of one keeps the other.
import { randomUUID } from 'node:crypto';
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { CreateAccountDocument, CreateProjectDocument } from '../generated/graphql';
import { type TestApp, startTestApp } from '../support/app';
import { type TestRepo, createTestRepo } from '../support/git';
import { waitFor } from '../support/wait';
import { type WatchedPage, launchBrowser, openPage, seriousA11yViolations } from './helpers';

const SESSIONS = 1_000;
/** Rows the DOM may hold at once: the view's (about 15) plus the overscan either side. */
const MAX_DOM_ROWS = 60;

describe('the sessions list and the account switcher in a real browser', () => {
  let t: TestApp;
  let repo: TestRepo;
  let browser: Browser;
  let projectId: string;
  /** Oldest first, as seeded. */
  const seeded: string[] = [];

  beforeAll(async () => {
    t = await startTestApp();
    repo = createTestRepo();
    const created = await t.request(CreateProjectDocument, {
      input: { name: 'many-sessions', repositoryUrl: repo.url },
    });
    if (created.data?.createProject.__typename !== 'CreateProjectSuccess')
      throw new Error(JSON.stringify(created));
    projectId = created.data.createProject.project.projectId;
    const project = await t.app.services.db.project.findUniqueOrThrow({ where: { id: projectId } });
    // Volume straight into the database: a thousand provisioned sandboxes would test nothing more.
    const start = Date.now() - SESSIONS * 60_000;
    const rows = Array.from({ length: SESSIONS }, (_, i) => {
      const id = randomUUID();
      seeded.push(id);
      return {
        id,
        branchName: id,
        accountId: project.accountId,
        projectId,
        baseRef: 'main',
        status: 'STOPPED' as const,
        stopReason: 'USER' as const,
        createdAt: new Date(start + i * 60_000),
      };
    });
    await t.app.services.db.session.createMany({ data: rows });
    browser = await launchBrowser();
  });
  afterAll(async () => {
    await browser?.close();
    await t?.stop();
    repo?.remove();
  });

  async function signIn(w: WatchedPage, token: string): Promise<void> {
    await w.page.goto(`${t.url}/`);
    await w.page.getByLabel('Personal access token').fill(token);
    await w.page.getByRole('button', { name: 'Sign in' }).click();
    await w.page.getByRole('heading', { name: 'Sessions' }).waitFor();
  }

  test('a thousand sessions scroll to the last one by keyboard with only the rows in view in the DOM', async () => {
    const w = await openPage(browser);
    try {
      const { page } = w;
      await signIn(w, t.adminToken);
      const rows = page.locator('tbody tr[data-session]');
      // Newest first: the last seeded session leads the list.
      await page.locator(`tr[data-session="${seeded.at(-1)}"]`).waitFor();
      const region = page.getByRole('region', { name: 'Sessions table' });
      expect(await region.locator('table').getAttribute('aria-rowcount')).toBe('101');

      const domRows: number[] = [];
      await region.focus();
      const last = page.locator(`tr[data-session="${seeded[0]}"]`);
      await waitFor(
        async () => {
          domRows.push(await rows.count());
          if ((await last.count()) > 0) return true;
          await page.keyboard.press('End');
          return false;
        },
        { timeoutMs: 60_000, what: 'the oldest session to be scrolled into the DOM' },
      );
      expect(await last.isVisible()).toBe(true);
      expect(await last.getAttribute('aria-rowindex')).toBe(String(SESSIONS + 1));
      expect(await page.getByTestId('session-count').getAttribute('data-loaded')).toBe(String(SESSIONS));
      expect(await region.locator('table').getAttribute('aria-rowcount')).toBe(String(SESSIONS + 1));
      // Every page of 100 arrived, yet the DOM never held more than the rows around the view.
      expect(Math.max(...domRows, await rows.count())).toBeLessThanOrEqual(MAX_DOM_ROWS);
      expect(await rows.count()).toBeGreaterThan(5);
      // Back to the top by keyboard: the newest session is rendered again, the oldest is gone.
      // Home is pressed again until the newest row is in view (one clean-clone run under load
      // waited 30 s after a single press); each miss records where the region stood and whether it
      // had the focus, so a failure says which of the two went wrong.
      const newest = page.locator(`tr[data-session="${seeded.at(-1)}"]`);
      await waitFor(
        async () => {
          if (await newest.isVisible()) return true;
          const state = await region.evaluate((el) => ({
            scrollTop: el.scrollTop,
            focused: document.activeElement === el,
            active: document.activeElement?.tagName,
          }));
          await page.keyboard.press('Home');
          throw new Error(`the newest row is not in view: ${JSON.stringify(state)}`);
        },
        { timeoutMs: 30_000, what: 'the newest session to be scrolled back into view' },
      );
      expect(await last.count()).toBe(0);

      // Scrolling through the middle frame by frame: at no frame does the DOM hold more than the
      // rows around the view (no render of a thousand rows), and once scrolling stops the rows it
      // holds are the ones in view.
      const rowsPerFrame = (await region.evaluate(
        (el) =>
          new Promise<number[]>((resolve) => {
            const seen: number[] = [];
            const step = () => {
              seen.push(el.querySelectorAll('tbody tr[data-session]').length);
              el.scrollTop += 400;
              if (seen.length < 60) requestAnimationFrame(step);
              else resolve(seen);
            };
            requestAnimationFrame(step);
          }),
      )) as number[];
      expect(rowsPerFrame).toHaveLength(60);
      expect(Math.max(...rowsPerFrame)).toBeLessThanOrEqual(MAX_DOM_ROWS);
      const rowInView = () =>
        region.evaluate((el) => {
          const box = el.getBoundingClientRect();
          const middle = box.top + box.height / 2;
          const row = [...el.querySelectorAll('tbody tr[data-session]')].find((r) => {
            const b = r.getBoundingClientRect();
            return b.top <= middle && b.bottom >= middle;
          });
          return row ? Number(row.getAttribute('aria-rowindex')) : null;
        });
      const middleRow = await waitFor(rowInView, {
        timeoutMs: 10_000,
        what: 'a rendered row in the middle of the scrolled view',
      });
      // 60 steps of 400 px from the top land well inside the list, not at either end.
      expect(middleRow).toBeGreaterThan(2);
      expect(middleRow).toBeLessThan(SESSIONS + 1);
      expect(await rows.count()).toBeLessThanOrEqual(MAX_DOM_ROWS);
      expect(await seriousA11yViolations(page)).toEqual([]);
      expect(w.problems).toEqual([]);
    } finally {
      await w.context.close();
    }
  });

  test('a second account signs in beside the first; the header switches between them and signs out of one', async () => {
    const second = await t.request(CreateAccountDocument, {
      input: {
        name: 'Second Co',
        tier: 'PRO',
        admin: { name: 'Second Admin', email: 'second-admin@example.com' },
      },
    });
    if (second.data?.createAccount.__typename !== 'CreateAccountSuccess')
      throw new Error(JSON.stringify(second));
    const secondToken = second.data.createAccount.secret;
    const secondAccountId = second.data.createAccount.account.id;
    const admin = await t.raw({ query: '{ viewer { account { id name } } }' });
    const first = (admin.data as { viewer: { account: { id: string; name: string } } }).viewer.account;

    const w = await openPage(browser, { width: 375, height: 800 });
    try {
      const { page } = w;
      await signIn(w, t.adminToken);
      const who = page.getByTestId('account');
      await waitFor(async () => (await who.textContent())?.includes(first.name), 30_000);
      expect(await page.getByTestId('account-switcher').count()).toBe(0);

      await page.getByRole('button', { name: 'Add account' }).click();
      await page.getByRole('heading', { name: 'Add an account' }).waitFor();
      await page.getByLabel('Personal access token').fill(secondToken);
      await page.getByRole('button', { name: 'Sign in' }).click();
      await waitFor(async () => (await who.textContent())?.includes('Second Co'), 30_000);
      await page.getByText('No sessions yet.').waitFor();
      const switcher = page.getByLabel('Switch account');
      expect(await switcher.locator('option').allTextContents()).toEqual([
        `${first.name} · TEAM`,
        'Second Co · PRO',
      ]);
      const stored = async () => ({
        active: await page.evaluate('sessionStorage.getItem("singulacomp.token")'),
        accounts: JSON.parse(
          (await page.evaluate('sessionStorage.getItem("singulacomp.accounts")')) as string,
        ) as { accountId: string; token: string }[],
      });
      expect(await stored()).toEqual({
        active: secondToken,
        accounts: [
          expect.objectContaining({ accountId: first.id, token: t.adminToken }),
          expect.objectContaining({ accountId: secondAccountId, token: secondToken }),
        ],
      });
      // The page holds account ids only, never a token.
      expect(await page.content()).not.toContain(secondToken);
      expect(await page.evaluate('document.documentElement.scrollWidth')).toBeLessThanOrEqual(375);
      expect(await seriousA11yViolations(page)).toEqual([]);

      // Switch back by keyboard: the first account's sessions, and its token is the one in use.
      await switcher.focus();
      await switcher.selectOption({ label: `${first.name} · TEAM` });
      await waitFor(async () => (await who.textContent())?.includes(first.name), 30_000);
      await page.locator(`tr[data-session="${seeded.at(-1)}"]`).waitFor();
      const active = (await stored()).active as string;
      const viewer = await t.raw({ query: '{ viewer { account { id } } }' }, active);
      expect(viewer.data).toEqual({ viewer: { account: { id: first.id } } });

      // Sign out of the second account only: the first stays signed in.
      await page.getByLabel('Switch account').selectOption({ label: 'Second Co · PRO' });
      await waitFor(async () => (await who.textContent())?.includes('Second Co'), 30_000);
      await page.getByRole('button', { name: 'Sign out of Second Co' }).click();
      await waitFor(async () => (await who.textContent())?.includes(first.name), 30_000);
      expect(await stored()).toEqual({
        active: t.adminToken,
        accounts: [expect.objectContaining({ accountId: first.id, token: t.adminToken })],
      });
      expect(await page.getByLabel('Switch account').count()).toBe(0);
      // The second token itself still works: signing out of a tab revokes nothing.
      const still = await t.raw({ query: '{ viewer { account { id } } }' }, secondToken);
      expect(still.data).toEqual({ viewer: { account: { id: secondAccountId } } });

      await page.getByRole('button', { name: 'Sign out', exact: true }).click();
      await page.getByLabel('Personal access token').waitFor();
      expect(await stored()).toEqual({ active: null, accounts: [] });
      expect(w.problems).toEqual([]);
    } finally {
      await w.context.close();
    }
  });
});
