// The dashboard in Debian's Chromium against a real server on LOCAL with the real daemon, real
// OpenCode and the stub model: sign in with a PAT, create a session and watch it become ready, chat
// and see the streamed answer, abort a turn, reload and see every phase in order, see a session another client
// created appear live, stop; telemetry drawn live with uPlot; Sync Branch & Reload; the session's
// change request against the real upstream; triggers; revoking a token. Each page is screenshotted (into .tmp/web/, for a person to look at)
// and its pixels checked for content, checked with axe-core, and no page logs a console error.
import { execFile } from 'node:child_process';
import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { CreateProjectDocument, CreateSessionDocument, StopSessionDocument } from '../generated/graphql';
import { createProject } from '../leases/helpers';
import { waitFor } from '../support/wait';
import { E2E_SETUP_TIMEOUT_MS, type E2e, startE2e } from '../e2e/helpers';
import { type WatchedPage, launchBrowser, openPage, seriousA11yViolations, summarisePng } from './helpers';

const SHOTS = '.tmp/web';
const run = promisify(execFile);
const PHASES = [
  'CHECK_SESSION:STARTED',
  'CHECK_SESSION:SUCCEEDED',
  'REFRESH_REPOSITORY:STARTED',
  'REFRESH_REPOSITORY:SUCCEEDED',
  'COMPILE_AGENT_CONFIG:STARTED',
  'COMPILE_AGENT_CONFIG:SUCCEEDED',
  'APPLY_RUNTIME:STARTED',
  'APPLY_RUNTIME:SUCCEEDED',
  'VALIDATE_RUNTIME:STARTED',
  'VALIDATE_RUNTIME:SUCCEEDED',
  'CONFIRM_CONFIG:STARTED',
  'CONFIRM_CONFIG:SUCCEEDED',
];

/** Records, in the page, what appeared: streamed answers and the number of reload phases shown. */
const RECORDER = `(() => {
  const seen = { streaming: [], phases: [] };
  window.__seen = seen;
  new MutationObserver(() => {
    for (const el of document.querySelectorAll('[data-streaming="true"] p')) seen.streaming.push(el.textContent);
    const n = document.querySelectorAll('[data-phase]').length;
    if (seen.phases.at(-1) !== n) seen.phases.push(n);
  }).observe(document.body, { subtree: true, childList: true, characterData: true });
})()`;

async function screenshot(page: Page, name: string): Promise<void> {
  mkdirSync(SHOTS, { recursive: true });
  const png = await page.screenshot({ path: join(SHOTS, `${name}.png`), fullPage: true });
  const summary = summarisePng(png);
  expect(summary.width).toBe(page.viewportSize()!.width);
  // A blank or single-colour page has a handful of colours; text, badges and borders give many.
  expect(summary.colours, `${name}.png colours`).toBeGreaterThan(16);
}

async function expectAccessible(page: Page): Promise<void> {
  expect(await seriousA11yViolations(page)).toEqual([]);
}

/** Opens the command palette from the keyboard and types `filter` into it. */
async function openPalette(page: Page, filter: string) {
  await page.keyboard.press('Control+k');
  const palette = page.getByRole('dialog', { name: 'Commands' });
  await palette.waitFor();
  await page.keyboard.type(filter);
  return palette;
}

/** At 375 px wide the page does not scroll sideways; then back to the usual 1280 × 900. */
async function expectFitsNarrow(page: Page): Promise<void> {
  await page.setViewportSize({ width: 375, height: 800 });
  expect(await page.evaluate('document.documentElement.scrollWidth')).toBeLessThanOrEqual(375);
  await page.setViewportSize({ width: 1280, height: 900 });
}

describe('the dashboard in a real browser', () => {
  let e: E2e;
  let browser: Browser;
  let w: WatchedPage;
  let projectId: string;
  let sessionId: string;
  let readerSecret: string;
  let scratch: string;

  // Asynchronous: the server runs in this process, and a blocked event loop would stall it.
  const gitAsync = async (...args: string[]) =>
    (
      await run('git', args, {
        cwd: scratch,
        env: {
          ...process.env,
          GIT_CONFIG_GLOBAL: '/dev/null',
          GIT_AUTHOR_NAME: 'Pusher',
          GIT_AUTHOR_EMAIL: 'pusher@example.com',
          GIT_COMMITTER_NAME: 'Pusher',
          GIT_COMMITTER_EMAIL: 'pusher@example.com',
        },
      })
    ).stdout.trim();

  /** Commits `files` on top of `branch` upstream (as someone pushing to it) and returns the commit. */
  async function commitOn(branch: string, files: Record<string, string>, message: string): Promise<string> {
    await gitAsync('fetch', '-q', e.repo.url, `refs/heads/${branch}`);
    await gitAsync('checkout', '-q', '--detach', 'FETCH_HEAD');
    for (const [path, content] of Object.entries(files)) writeFileSync(join(scratch, path), content);
    await gitAsync('add', '-A');
    await gitAsync('commit', '-q', '-m', message);
    await gitAsync('push', '-q', e.repo.url, `HEAD:refs/heads/${branch}`);
    return gitAsync('rev-parse', 'HEAD');
  }
  const upstreamMain = async () =>
    (await gitAsync('ls-remote', e.repo.url, 'refs/heads/main')).split(/\s/)[0];

  beforeAll(async () => {
    e = await startE2e({
      gateway: true,
      // A sample every 2 s (the default is one a minute), so the chart has a line to draw.
      daemonEnv: { SINGULACOMP_ATTACHMENT_OFFLOAD: '0', SINGULACOMP_TELEMETRY_INTERVAL_MS: '2000' },
    });
    projectId = await createProject(e.t, e.repo.url);
    browser = await launchBrowser();
    w = await openPage(browser);
    scratch = mkdtempSync(join(tmpdir(), 'sc-web-cr-'));
    await gitAsync('init', '-q');
  }, E2E_SETUP_TIMEOUT_MS);
  afterAll(async () => {
    await w?.context.close();
    await browser?.close();
    await e?.stop();
  });

  test('signs in with the token from the start-up link, which leaves the address at once', async () => {
    const { page } = w;
    await page.goto(`${e.t.url}/?token=${e.t.adminToken}`);
    const field = page.getByLabel('Personal access token');
    await field.waitFor();
    expect(await field.inputValue()).toBe(e.t.adminToken);
    expect(page.url()).toBe(`${e.t.url}/`);
    await screenshot(page, 'sign-in');
    await expectAccessible(page);

    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('heading', { name: 'Sessions' }).waitFor();
    await waitFor(async () => (await page.getByTestId('account').textContent())?.includes('TEAM'), 30_000);
    expect(await page.evaluate('sessionStorage.getItem("singulacomp.token")')).toBe(e.t.adminToken);
    expect(w.problems).toEqual([]);
  });

  test('a wrong token is refused with the API’s message and code', async () => {
    const other = await openPage(browser);
    try {
      await other.page.goto(`${e.t.url}/`);
      await other.page.getByLabel('Personal access token').fill('singulacomp_pat_notavalidtoken');
      await other.page.getByRole('button', { name: 'Sign in' }).click();
      const alert = other.page.getByRole('alert');
      await alert.waitFor();
      expect(await alert.getAttribute('data-code')).toBe('UNAUTHENTICATED');
      expect(await alert.textContent()).toContain('UNAUTHENTICATED');
      // The browser logs the 401 itself; nothing else may fail.
      expect(other.problems.filter((p) => !p.includes('401'))).toEqual([]);
    } finally {
      await other.context.close();
    }
  });

  test('creates a session from the form and watches it become ready', async () => {
    const { page } = w;
    await screenshot(page, 'sessions');
    await expectAccessible(page);
    await page.getByLabel('Prompt').fill('');
    await page.getByRole('button', { name: 'Create session' }).click();
    await page.waitForURL(/\/sessions\/[0-9a-f-]{36}$/);
    sessionId = page.url().split('/').at(-1)!;
    await page.evaluate(RECORDER);
    await waitFor(async () => (await page.getByTestId('agent-state').getAttribute('data-ready')) === 'true', {
      timeoutMs: 120_000,
      what: 'the header to show the agent ready',
    });
    expect(await page.getByTestId('session-status').textContent()).toContain('RUNNING');
    const api = await e.t.raw({ query: `{ session(id: "${sessionId}") { status agentReady } }` });
    expect(api.data).toEqual({ session: { status: 'RUNNING', agentReady: true } });
    expect(w.problems).toEqual([]);
  }, 300_000);

  test('a message streams the stub model’s answer into the conversation', async ({ onTestFailed }) => {
    onTestFailed(async () => {
      console.error(`stub requests: ${e.stub.requests.length}\n${await e.describeSession(sessionId)}`);
    });
    const { page } = w;
    e.stub.setReply('alpha beta gamma delta epsilon');
    await page.getByLabel('Message').fill('Say five words.');
    await page.getByRole('button', { name: 'Send' }).click();
    const answer = page.locator('li[data-role="assistant"]:not([data-streaming]) p');
    await waitFor(
      async () => (await answer.last().textContent({ timeout: 1_000 })) === 'alpha beta gamma delta epsilon',
      { timeoutMs: 50_000, what: 'the stored answer' },
    );
    const user = page.locator('li[data-role="user"]:not([data-pending]) p');
    expect(await user.allTextContents()).toEqual(['Say five words.']);
    // The answer was on screen while it streamed, before the turn ended and it was read back.
    const streamed = (await page.evaluate('window.__seen.streaming')) as string[];
    expect(streamed.length).toBeGreaterThan(0);
    expect('alpha beta gamma delta epsilon'.startsWith(streamed[0]!)).toBe(true);
    expect(await page.getByTestId('turn-state').getAttribute('data-state')).toBe('IDLE');
    expect(w.problems).toEqual([]);
  });

  test('Abort turn ends a running turn and its upstream call', async () => {
    const { page } = w;
    e.stub.setDelayMs(120_000);
    try {
      await page.getByLabel('Message').fill('Take your time.');
      await page.getByRole('button', { name: 'Send' }).click();
      const turn = page.getByTestId('turn-state');
      await waitFor(async () => (await turn.getAttribute('data-state')) === 'BUSY', {
        timeoutMs: 60_000,
        what: 'the turn to show BUSY',
      });
      await waitFor(async () => e.stub.openResponses() > 0, { timeoutMs: 60_000, what: 'the upstream call' });
      await page.getByRole('button', { name: 'Abort turn' }).click();
      await waitFor(async () => (await turn.getAttribute('data-state')) !== 'BUSY', {
        timeoutMs: 60_000,
        what: 'the turn to end',
      });
      await waitFor(async () => e.stub.openResponses() === 0, {
        timeoutMs: 30_000,
        what: 'the call to close',
      });
    } finally {
      e.stub.setDelayMs(0);
    }
    expect(w.problems).toEqual([]);
  });

  test('telemetry is drawn with uPlot and grows live', async () => {
    const { page } = w;
    await page.getByRole('tab', { name: 'Telemetry' }).click();
    const panel = page.getByTestId('telemetry');
    const samples = async () => Number(await panel.getAttribute('data-samples', { timeout: 1_000 }));
    const first = await waitFor(async () => ((await samples()) >= 2 ? samples() : 0), {
      timeoutMs: 60_000,
      what: 'two telemetry samples',
    });
    await waitFor(async () => (await samples()) > first, { timeoutMs: 60_000, what: 'a live sample' });
    await panel.locator('canvas').first().waitFor();
    expect(await panel.textContent()).toMatch(/Memory\d+ MiB of \d+ MiB/);
    const chart = summarisePng(await panel.locator('.chart').screenshot());
    expect(chart.colours).toBeGreaterThan(16);
    expect(w.problems).toEqual([]);
  });

  test('a reload shows each phase as the server confirms it, in order', async () => {
    const { page } = w;
    await page.getByRole('button', { name: 'Reload', exact: true }).click();
    const status = page.getByTestId('reload-status');
    await waitFor(async () => (await status.getAttribute('data-status', { timeout: 1_000 })) !== 'RUNNING', {
      timeoutMs: 90_000,
      what: 'the reload to end',
    });
    expect(await status.getAttribute('data-status')).toBe('SUCCEEDED');
    const phases = await page
      .locator('[data-phase]')
      .evaluateAll((els) => els.map((el) => el.getAttribute('data-phase')));
    expect(phases).toEqual(PHASES);
    // The list grew phase by phase (never shrank), starting before the reload was done.
    const counts = (await page.evaluate('window.__seen.phases')) as number[];
    expect(counts.at(-1)).toBe(PHASES.length);
    expect(counts).toEqual([...counts].sort((a, b) => a - b));
    expect(counts.filter((n) => n > 0 && n < PHASES.length).length).toBeGreaterThan(0);
    await screenshot(page, 'session');
    await expectAccessible(page);
    expect(w.problems).toEqual([]);
  });

  test('the command palette runs Reload from the keyboard', async () => {
    const { page } = w;
    const status = page.getByTestId('reload-status');
    const previous = await status.getAttribute('data-reload');
    const palette = await openPalette(page, 'rel');
    expect(await palette.getByRole('option').allTextContents()).toEqual(['Reload', 'Sync Branch & Reload']);
    await expectAccessible(page);
    await page.keyboard.press('Enter');
    await waitFor(
      async () => {
        const id = await status.getAttribute('data-reload', { timeout: 1_000 });
        return id !== previous && (await status.getAttribute('data-status')) === 'SUCCEEDED';
      },
      { timeoutMs: 90_000, what: 'a second reload to succeed' },
    );
    expect(await palette.isVisible()).toBe(false);
    expect(w.problems).toEqual([]);
  });

  test('Sync Branch & Reload asks the agent to reconcile the branch, then reloads once its turn ends', async () => {
    const { page } = w;
    e.stub.setReply('Reconciled with main; tests pass; committed.');
    const status = page.getByTestId('reload-status');
    const previous = await status.getAttribute('data-reload');
    const palette = await openPalette(page, 'sync');
    expect(await palette.getByRole('option').allTextContents()).toEqual(['Sync Branch & Reload']);
    await page.keyboard.press('Enter');
    const sync = page.getByTestId('sync-state');
    await waitFor(async () => (await sync.getAttribute('data-state', { timeout: 1_000 })) === 'RELOADING', {
      timeoutMs: 90_000,
      what: 'the sync turn to end',
    });
    await waitFor(
      async () => {
        const id = await status.getAttribute('data-reload', { timeout: 1_000 });
        return id !== previous && (await status.getAttribute('data-status')) === 'SUCCEEDED';
      },
      { timeoutMs: 90_000, what: 'the sync’s reload to succeed' },
    );
    // What the agent was sent is the reconcile instruction, stored in the transcript.
    const api = (await e.t.raw({
      query: `{ session(id: "${sessionId}") { messages(last: 20) { edges { node { role text } } } reloads(last: 1) { edges { node { status } } } } }`,
    })) as {
      data: {
        session: { messages: { edges: { node: { role: string; text: string } }[] }; reloads: unknown };
      };
    };
    const sent = api.data.session.messages.edges.map((edge) => edge.node).filter((m) => m.role === 'user');
    expect(sent.at(-1)?.text).toContain(
      'Inspect the session branch, preserve local work, fetch the latest main, resolve conflicts, run the relevant tests, and commit the reconciliation.',
    );
    const answer = page.locator('li[data-role="assistant"]:not([data-streaming]) p');
    await waitFor(
      async () =>
        (await answer.last().textContent({ timeout: 1_000 })) ===
        'Reconciled with main; tests pass; committed.',
      { timeoutMs: 60_000, what: 'the stored answer' },
    );
    expect(api.data.session.reloads).toEqual({ edges: [{ node: { status: 'SUCCEEDED' } }] });
    expect(w.problems).toEqual([]);
  }, 240_000);

  test('the change-request panel opens one, shows refused merges with their codes, merges, and closes a conflicting one', async () => {
    const { page } = w;
    await page.getByRole('tab', { name: 'Changes' }).click();
    const panel = page.getByTestId('change-request');
    const head = await commitOn(sessionId, { 'dashboard.txt': 'one\ntwo\n' }, 'Session work');
    await panel.getByLabel('Title').fill('Dashboard work');
    await panel.getByLabel('Description').fill('Opened from the browser.');
    await panel.getByRole('button', { name: 'Open change request' }).click();
    await panel.locator('[data-status="OPEN"]').waitFor();
    expect(await panel.getByTestId('diff-stats').textContent()).toContain('1 file(s) changed, +2 −0');
    expect(await panel.getByTestId('mergeable').textContent()).toBe('Merges cleanly as of the last check.');
    const stored = async () =>
      (
        (await e.t.raw({
          query: `{ project(id: "${projectId}") { changeRequests(first: 10) { edges { node { title status headCommit mergeCommit } } } } }`,
        })) as { data: { project: { changeRequests: { edges: { node: Record<string, string | null> }[] } } } }
      ).data.project.changeRequests.edges.map((edge) => edge.node);
    expect(await stored()).toEqual([
      { title: 'Dashboard work', status: 'OPEN', headCommit: head, mergeCommit: null },
    ]);

    // The default branch moves: a fast-forward is refused with its message and code.
    await commitOn('main', { 'main-only.txt': 'main moved\n' }, 'Main moves');
    await panel.getByLabel('Merge method').selectOption('FAST_FORWARD');
    await panel.getByRole('button', { name: 'Merge', exact: true }).click();
    const alert = panel.getByRole('alert');
    await waitFor(
      async () => (await alert.getAttribute('data-code', { timeout: 1_000 })) === 'NOT_FAST_FORWARD',
      {
        what: 'the NOT_FAST_FORWARD error',
      },
    );
    expect(await alert.textContent()).toContain(
      'main has commits the session branch lacks, so it cannot fast-forward',
    );
    await expectAccessible(page);

    // A merge commit lands on the default branch upstream.
    await panel.getByLabel('Merge method').selectOption('MERGE');
    await panel.getByRole('button', { name: 'Merge', exact: true }).click();
    await panel.locator('[data-status="MERGED"]').waitFor();
    const mergeCommit = await panel.getByTestId('merge-commit').textContent();
    expect(mergeCommit).toBe(await upstreamMain());
    expect(await stored()).toEqual([
      { title: 'Dashboard work', status: 'MERGED', headCommit: head, mergeCommit },
    ]);
    expect(await alert.count()).toBe(0);

    // Both sides edit README.md: the new change request conflicts, a merge is refused with its
    // paths, nothing changes upstream, and it is closed.
    await commitOn(sessionId, { 'README.md': '# session edit\n' }, 'Session edits the readme');
    await commitOn('main', { 'README.md': '# main edit\n' }, 'Main edits the readme');
    const mainBefore = await upstreamMain();
    await panel.getByLabel('Title').fill('Conflicting work');
    await panel.getByRole('button', { name: 'Open change request' }).click();
    await panel.locator('[data-status="OPEN"]').waitFor();
    expect(await panel.getByTestId('mergeable').textContent()).toBe(
      'Conflicts as of the last check: README.md',
    );
    await panel.getByRole('button', { name: 'Merge', exact: true }).click();
    await waitFor(
      async () => (await alert.getAttribute('data-code', { timeout: 1_000 })) === 'MERGE_CONFLICT',
      {
        what: 'the MERGE_CONFLICT error',
      },
    );
    expect(await alert.textContent()).toContain('MERGE_CONFLICT');
    expect(await panel.getByTestId('conflicts').locator('li').allTextContents()).toEqual(['README.md']);
    expect(await upstreamMain()).toBe(mainBefore);
    await screenshot(page, 'session-change-request');
    await expectAccessible(page);
    // 375 px wide: the panel and its conflict list fit.
    await expectFitsNarrow(page);
    await panel.getByRole('button', { name: 'Close change request' }).click();
    await panel.locator('[data-status="CLOSED"]').waitFor();
    expect((await stored()).map((cr) => [cr.title, cr.status]).sort()).toEqual([
      ['Conflicting work', 'CLOSED'],
      ['Dashboard work', 'MERGED'],
    ]);
    expect(await upstreamMain()).toBe(mainBefore);
    expect(w.problems).toEqual([]);
  });

  test('a session another client creates appears in the list without a page load', async () => {
    const { page } = w;
    await page.getByRole('link', { name: 'Sessions' }).click();
    await page.getByRole('heading', { name: 'Sessions' }).waitFor();
    await page.locator(`tr[data-session="${sessionId}"]`).waitFor();
    await page.evaluate('window.__samePage = true');
    const created = await e.t.request(CreateSessionDocument, { input: { projectId } });
    if (created.data?.createSession.__typename !== 'CreateSessionSuccess')
      throw new Error(JSON.stringify(created));
    const otherId = created.data.createSession.session.sessionId;
    try {
      await page.locator(`tr[data-session="${otherId}"]`).waitFor({ timeout: 60_000 });
      expect(await page.evaluate('window.__samePage')).toBe(true);
    } finally {
      await e.t.request(StopSessionDocument, { input: { sessionId: otherId } });
    }
    await waitFor(
      async () =>
        (await page.locator(`tr[data-session="${otherId}"]`).getAttribute('data-status')) === 'STOPPED',
      { timeoutMs: 60_000, what: 'the stop to show in the list' },
    );
    expect(w.problems).toEqual([]);
  });

  test('the account page lists members and usage, and a new token’s secret is shown once and works', async () => {
    const { page } = w;
    await page.getByRole('link', { name: 'Account' }).click();
    await page.getByRole('heading', { name: 'Tokens' }).waitFor();
    expect(await page.getByTestId('members').textContent()).toContain('admin');
    expect(await page.getByTestId('usage').textContent()).toMatch(/Billed: \$\d/);
    await page.getByLabel('Token name').fill('dashboard-reader');
    await page.getByRole('button', { name: 'Create token' }).click();
    const secret = (await page.getByTestId('new-secret').textContent()) ?? '';
    expect(secret).toMatch(/^singulacomp_pat_/);
    readerSecret = secret;
    await page.locator('tr[data-token="dashboard-reader"]').waitFor();
    const viewer = await e.t.raw({ query: '{ viewer { scopes } }' }, secret);
    expect(viewer.data).toEqual({
      viewer: { scopes: ['projects:read', 'sessions:read', 'tokens:read'] },
    });
    await screenshot(page, 'account');
    await expectAccessible(page);
    expect(w.problems).toEqual([]);
  });

  test('revoking a token asks first; then the token is marked revoked and refused', async () => {
    const { page } = w;
    const row = page.locator('tr[data-token="dashboard-reader"]');
    await row.getByRole('button', { name: 'Revoke dashboard-reader' }).click();
    expect(await row.textContent()).toContain(
      'Revoke dashboard-reader? Anything using it is refused from now on.',
    );
    // Focus waits on Cancel: Enter does not confirm by accident.
    await page.keyboard.press('Enter');
    await row.getByRole('button', { name: 'Revoke dashboard-reader' }).waitFor();
    expect(await row.getAttribute('data-revoked')).toBe('false');
    expect((await e.t.raw({ query: '{ viewer { scopes } }' }, readerSecret)).status).toBe(200);

    await row.getByRole('button', { name: 'Revoke dashboard-reader' }).click();
    await expectAccessible(page);
    await row.getByRole('button', { name: 'Revoke token' }).click();
    await waitFor(async () => (await row.getAttribute('data-revoked', { timeout: 1_000 })) === 'true', {
      what: 'the row to show the token revoked',
    });
    expect(await row.textContent()).toContain('(revoked)');
    const refused = await e.t.raw({ query: '{ viewer { scopes } }' }, readerSecret);
    expect(refused.errors?.[0]?.extensions?.code).toBe('UNAUTHENTICATED');
    const tokens = (await e.t.raw({
      query: '{ viewer { tokens(first: 100, includeRevoked: true) { edges { node { name revokedAt } } } } }',
    })) as {
      data: { viewer: { tokens: { edges: { node: { name: string; revokedAt: string | null } }[] } } };
    };
    expect(
      tokens.data.viewer.tokens.edges.find((edge) => edge.node.name === 'dashboard-reader')?.node.revokedAt,
    ).toMatch(/^\d{4}-/);
    expect(w.problems).toEqual([]);
  });

  test('the project page shows templates and secrets; a secret is set and never shown', async () => {
    const { page } = w;
    await page.getByRole('link', { name: 'Projects' }).click();
    await page.getByTestId('projects').getByRole('link').first().click();
    await page.getByRole('heading', { name: 'Templates' }).waitFor();
    await page.getByLabel('Secret name').fill('DASHBOARD_SECRET');
    await page.getByLabel('Value (write-only)').fill('s3cret-value');
    await page.getByLabel('Deliver into sandboxes').check();
    await page.getByRole('button', { name: 'Set secret' }).click();
    const row = page.locator('[data-secret="DASHBOARD_SECRET"]');
    await row.waitFor();
    expect(await row.textContent()).toContain('delivered into sandboxes');
    expect(await page.getByLabel('Value (write-only)').inputValue()).toBe('');
    expect(await page.content()).not.toContain('s3cret-value');
    const api = await e.t.raw({
      query: `{ project(id: "${projectId}") { secrets { name runtimeDelivery } } }`,
    });
    expect(api.data).toEqual({ project: { secrets: [{ name: 'DASHBOARD_SECRET', runtimeDelivery: true }] } });
    await screenshot(page, 'project');
    await expectAccessible(page);
    expect(w.problems).toEqual([]);
  });

  test('a trigger is created, paused and resumed, shows its runs, and is deleted after a confirmation', async () => {
    const { page } = w;
    // A cron that never parses: the API's message and code.
    await page.getByLabel('Trigger name').fill('broken');
    await page.getByLabel('Schedule (cron, UTC)').fill('every day');
    await page.getByRole('button', { name: 'Create trigger' }).click();
    const section = page.getByRole('region', { name: 'Triggers' });
    const alert = section.getByRole('alert');
    await alert.waitFor();
    expect(await alert.getAttribute('data-code')).toBe('VALIDATION_FAILED');
    expect(await alert.textContent()).toContain('schedule is not a valid cron expression');

    await page.getByLabel('Trigger name').fill('nightly');
    await page.getByLabel('Schedule (cron, UTC)').fill('0 3 * * *');
    await page.getByLabel('Trigger prompt').fill('Tidy the repository.');
    await page.getByRole('button', { name: 'Create trigger' }).click();
    const row = page.locator('[data-trigger="nightly"]');
    await row.waitFor();
    expect(await row.textContent()).toContain('0 3 * * * UTC');
    expect(await row.getByTestId('trigger-state').textContent()).toMatch(/^ · next /);
    expect(await alert.count()).toBe(0);
    const stored = async () =>
      (
        (await e.t.raw({
          query: `{ project(id: "${projectId}") { triggers(first: 10) { edges { node { triggerId name schedule paused prompt } } } } }`,
        })) as {
          data: {
            project: {
              triggers: { edges: { node: { triggerId: string; name: string; paused: boolean } }[] };
            };
          };
        }
      ).data.project.triggers.edges.map((edge) => edge.node);
    const [created] = await stored();
    expect(created).toEqual({
      triggerId: expect.any(String),
      name: 'nightly',
      schedule: '0 3 * * *',
      paused: false,
      prompt: 'Tidy the repository.',
    });

    await row.getByRole('button', { name: 'Pause nightly' }).click();
    await waitFor(async () => (await row.getAttribute('data-paused', { timeout: 1_000 })) === 'true', {
      what: 'the trigger to show paused',
    });
    expect(await row.getByTestId('trigger-state').textContent()).toBe(' · paused');
    expect((await stored())[0]?.paused).toBe(true);
    await row.getByRole('button', { name: 'Resume nightly' }).click();
    await waitFor(async () => (await row.getAttribute('data-paused', { timeout: 1_000 })) === 'false', {
      what: 'the trigger to show resumed',
    });
    expect((await stored())[0]?.paused).toBe(false);

    // A run as the scheduler records one when the account is at its limit (a real one would start
    // a session at 03:00 UTC): the page lists it under its trigger.
    await e.t.app.services.db.triggerRun.create({
      data: {
        triggerId: created!.triggerId,
        status: 'SKIPPED_LIMIT',
        reason: 'Concurrent session limit reached.',
        scheduledFor: new Date(),
      },
    });
    await page.reload();
    await row.getByRole('list', { name: 'Runs of nightly' }).waitFor();
    expect(await row.locator('[data-run]').allTextContents()).toEqual([
      expect.stringMatching(/ · skipped limit · Concurrent session limit reached\.$/),
    ]);
    await screenshot(page, 'project-triggers');
    await expectAccessible(page);
    // 375 px wide: the triggers and their buttons fit.
    await expectFitsNarrow(page);

    await row.getByRole('button', { name: 'Delete nightly' }).click();
    expect(await row.textContent()).toContain('Delete nightly and its run history?');
    await row.getByRole('button', { name: 'Cancel' }).click();
    expect(await stored()).toHaveLength(1);
    await row.getByRole('button', { name: 'Delete nightly' }).click();
    await row.getByRole('button', { name: 'Delete trigger' }).click();
    await row.waitFor({ state: 'detached' });
    expect(await stored()).toEqual([]);
    expect(w.problems).toEqual([]);
  });

  test('stops the session from its page', async () => {
    const { page } = w;
    await page.getByRole('link', { name: 'Sessions' }).click();
    await page.locator(`tr[data-session="${sessionId}"] a.mono`).click();
    await page.getByTestId('agent-state').waitFor();
    await page.getByRole('button', { name: 'Stop' }).click();
    await waitFor(async () => (await page.getByTestId('session-status').textContent())?.includes('STOPPED'), {
      timeoutMs: 60_000,
      what: 'the header to show STOPPED',
    });
    expect(await page.getByTestId('stop-reason').textContent()).toBe('USER');
    const api = await e.t.raw({ query: `{ session(id: "${sessionId}") { status stopReason } }` });
    expect(api.data).toEqual({ session: { status: 'STOPPED', stopReason: 'USER' } });
    expect(w.problems).toEqual([]);
  });

  test('the 429 limit shows its message, code and retry time', async () => {
    const seeded = await e.t.seedAccount({ tier: 'FREE' });
    const limited = await e.t.raw(
      { query: 'mutation { updateAccount(input: { concurrentSessionLimit: 0 }) { __typename } }' },
      seeded.token,
    );
    expect(limited.errors).toBeUndefined();
    const project = await e.t.request(
      CreateProjectDocument,
      { input: { name: 'limited', repositoryUrl: e.repo.url } },
      seeded.token,
    );
    expect(project.data?.createProject.__typename).toBe('CreateProjectSuccess');
    const other = await openPage(browser, { width: 375, height: 800 });
    try {
      await other.page.goto(`${e.t.url}/`);
      await other.page.getByLabel('Personal access token').fill(seeded.token);
      await other.page.getByRole('button', { name: 'Sign in' }).click();
      await other.page.getByRole('button', { name: 'Create session' }).click();
      const alert = other.page.getByRole('alert');
      await alert.waitFor();
      expect(await alert.getAttribute('data-code')).toBe('CONCURRENT_SESSION_LIMIT');
      const text = (await alert.textContent()) ?? '';
      expect(text).toContain('Concurrent session limit reached: 0 of 0 sessions are live.');
      expect(text).toMatch(/Retry after \d+ s \(at .+\)\./);
      // 375 px wide: nothing but the table scrolls sideways.
      expect(await other.page.evaluate('document.documentElement.scrollWidth')).toBeLessThanOrEqual(375);
      await screenshot(other.page, 'sessions-375px-limit');
      await expectAccessible(other.page);
      expect(other.problems.filter((p) => !p.includes('429'))).toEqual([]);
    } finally {
      await other.context.close();
    }
  });
});
