// The session page's preview and share link in Chromium, against a real LOCAL session: a page served
// on a sandbox port opens in the iframe through a signed preview URL on the preview site (an origin
// of its own), and a share link created in the dialog opens in a second browser context that holds
// no token.
import { type Server, createServer } from 'node:http';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { freePort } from '../../contract/ports';
import type { LiveSession } from '../leases/helpers';
import { E2E_SETUP_TIMEOUT_MS, type E2e, startE2e, appBesideDaemon, startReadySession } from '../e2e/helpers';
import { type WatchedPage, launchBrowser, openPage, seriousA11yViolations, summarisePng } from './helpers';

const APP_PAGE = '<!doctype html><html lang="en"><title>app</title><h1>Hello from the sandbox</h1></html>';

describe('preview and share link on the session page', () => {
  let e: E2e;
  let s: LiveSession;
  let app: Server;
  let appPort: number;
  let browser: Browser;
  let w: WatchedPage;

  beforeAll(async () => {
    // The app plays one the image starts beside the daemon: a host process the test controls, so the
    // sandbox runs unisolated on the host's loopback and the daemon is told the app's port.
    appPort = await freePort();
    e = await startE2e(appBesideDaemon(appPort));
    app = createServer((_req, res) => res.writeHead(200, { 'content-type': 'text/html' }).end(APP_PAGE));
    await new Promise<void>((resolve) => app.listen(appPort, '127.0.0.1', resolve));
    s = await startReadySession(e);
    browser = await launchBrowser();
    w = await openPage(browser);
    await w.context.addInitScript({
      // Top-level only: init scripts run in every frame, and the preview frame may not touch storage.
      content: `if (window === window.top) sessionStorage.setItem('singulacomp.token', ${JSON.stringify(e.t.adminToken)})`,
    });
  }, E2E_SETUP_TIMEOUT_MS);
  afterAll(async () => {
    await w?.context.close();
    await browser?.close();
    await new Promise((resolve) => app?.close(resolve));
    await e?.stop();
  });

  test('a sandbox port opens in the iframe, and a share link opens without a token', async () => {
    const { page } = w;
    await page.goto(`${e.t.url}/sessions/${s.sessionId}`);
    await page.getByRole('tab', { name: 'Preview' }).click();
    // The ports the daemon reported: none, since the app is a host process outside the sandbox's
    // process tree. The page says nothing listens on its port and offers to open it anyway.
    await page.getByTestId('ports').waitFor({ timeout: 60_000 });
    await page.getByLabel('Port', { exact: true }).fill(String(appPort));
    await page.getByRole('button', { name: 'Open preview' }).click();
    const silent = page.getByTestId('nothing-listens');
    expect(await silent.textContent()).toContain(`Nothing listens on port ${appPort}`);
    expect(await page.locator('iframe.preview').count()).toBe(0);
    await silent.getByRole('button', { name: `Open port ${appPort} anyway` }).click();
    const frame = page.frameLocator(`iframe[title="Preview of port ${appPort}"]`);
    await frame.getByRole('heading', { name: 'Hello from the sandbox' }).waitFor({ timeout: 60_000 });
    const src = await page.locator('iframe.preview').getAttribute('src');
    const origin = `http://p${appPort}-${s.sandboxId}.localhost:${new URL(e.t.url).port}`;
    expect(src?.startsWith(`${origin}/?singulacomp_preview=`)).toBe(true);
    // The sandbox's app runs on its own origin: its storage is its own, the dashboard's (the token)
    // and the dashboard's document are out of reach.
    const preview = page.frames().find((f) => f.url().startsWith(origin))!;
    // (A third-party frame may get no storage at all where the browser blocks third-party cookies.)
    expect([null, 'SecurityError']).toContain(
      await preview.evaluate(
        '(() => { try { return sessionStorage.getItem("singulacomp.token"); } catch (e) { return e.name; } })()',
      ),
    );
    expect(
      await preview.evaluate(
        '(() => { try { return parent.document.title; } catch (e) { return e.name; } })()',
      ),
    ).toBe('SecurityError');

    await page.getByRole('button', { name: 'Share…' }).click();
    const dialog = page.getByRole('dialog', { name: `Share port ${appPort}` });
    await dialog.getByRole('button', { name: 'Create link' }).click();
    const url = (await dialog.getByTestId('share-url').textContent()) ?? '';
    expect(url).toMatch(/^http:\/\/s-[0-9a-f-]{36}\.localhost:\d+\/\?singulacomp_share=/);
    mkdirSync('.tmp/web', { recursive: true });
    const shot = summarisePng(await page.screenshot({ path: join('.tmp/web', 'share-dialog.png') }));
    expect(shot.colours).toBeGreaterThan(16);
    expect(await seriousA11yViolations(page)).toEqual([]);
    await dialog.getByRole('button', { name: 'Close' }).click();

    // Someone without a token: a fresh context, nothing in its storage.
    const guest = await openPage(browser);
    try {
      const response = await guest.page.goto(url);
      expect(response?.status()).toBe(200);
      await guest.page.getByRole('heading', { name: 'Hello from the sandbox' }).waitFor();
      expect(guest.problems).toEqual([]);
    } finally {
      await guest.context.close();
    }
    expect(w.problems).toEqual([]);
  }, 180_000);
});
