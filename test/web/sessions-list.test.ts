// The dashboard's sessions list at volume, in Chromium against a real server (no sandboxes needed):
// a thousand stored sessions scroll to the last one by keyboard with only the rows in view in the DOM.
import { randomUUID } from 'node:crypto';
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { CreateProjectDocument } from '../generated/graphql';
import { type TestApp, startTestApp } from '../support/app';
import { type TestRepo, createTestRepo } from '../support/git';
import { waitFor } from '../support/wait';
import { type WatchedPage, launchBrowser, openPage, seriousA11yViolations } from './helpers';

const SESSIONS = 1_000;
/** Rows the DOM may hold at once: the view's (about 15) plus the overscan either side. */
const MAX_DOM_ROWS = 60;

describe('the sessions list in a real browser', () => {
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
      await page.keyboard.press('Home');
      await page.locator(`tr[data-session="${seeded.at(-1)}"]`).waitFor();
      expect(await last.count()).toBe(0);

      // A frame budget while scrolling through the middle: each scroll step renders within a frame
      // or two (no re-render of a thousand rows).
      const worstFrameMs = (await region.evaluate(
        (el) =>
          new Promise<number>((resolve) => {
            let worst = 0;
            let previous = performance.now();
            let steps = 0;
            const step = (now: number) => {
              worst = Math.max(worst, now - previous);
              previous = now;
              el.scrollTop += 400;
              if (++steps < 60) requestAnimationFrame(step);
              else resolve(worst);
            };
            requestAnimationFrame(step);
          }),
      )) as number;
      expect(worstFrameMs).toBeLessThan(250);
      expect(await rows.count()).toBeLessThanOrEqual(MAX_DOM_ROWS);
      expect(await seriousA11yViolations(page)).toEqual([]);
      expect(w.problems).toEqual([]);
    } finally {
      await w.context.close();
    }
  });
});
