// GraphiQL in headless Chromium with no network beyond loopback: the page loads its assets from
// this server (no CDN), `?token=` fills the Authorization header, and a query runs and shows data.
// The screenshot lands in .tmp/graphiql.png for a person to look at.
import { mkdirSync } from 'node:fs';
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { type TestApp, startTestApp } from '../support/app';
import { launchBrowser } from '../web/helpers';

describe('GraphiQL served from the package', () => {
  let t: TestApp;
  let browser: Browser;

  beforeAll(async () => {
    t = await startTestApp();
    browser = await launchBrowser();
  });
  afterAll(async () => {
    await browser?.close();
    await t?.stop();
  });

  test('the page renders offline and runs a query with the token from ?token=', async () => {
    const context = await browser.newContext();
    const outside: string[] = [];
    const local: string[] = [];
    // Offline: anything not on loopback is refused and recorded.
    await context.route('**/*', async (route) => {
      const url = new URL(route.request().url());
      if (url.protocol === 'blob:' || url.protocol === 'data:' || url.hostname === '127.0.0.1') {
        local.push(url.pathname);
        await route.continue();
      } else {
        outside.push(url.href);
        await route.abort('internetdisconnected');
      }
    });
    const page = await context.newPage();
    try {
      await page.goto(`${t.url}/graphql?token=${t.adminToken}`, { waitUntil: 'load', timeout: 120_000 });
      await page.locator('.graphiql-execute-button').waitFor({ timeout: 120_000 });
      expect(await page.title()).toBe('SingulaComp');

      const editor = page.locator('.graphiql-query-editor .monaco-editor').first();
      await editor.click();
      await page.keyboard.press('ControlOrMeta+A');
      await page.keyboard.press('Delete');
      await page.keyboard.type('{ viewer { kind account { tier } } }');
      await page.locator('.graphiql-execute-button').click();

      const response = page.locator('.graphiql-response');
      await expect
        .poll(async () => (await response.textContent()) ?? '', { timeout: 60_000 })
        .toContain('PERSONAL_ACCESS');
      expect(await response.textContent()).toContain('TEAM');

      mkdirSync('.tmp', { recursive: true });
      await page.screenshot({ path: '.tmp/graphiql.png', fullPage: true });
      expect(outside).toEqual([]);
      expect(local.some((p) => p.endsWith('/graphiql.js'))).toBe(true);
    } finally {
      await context.close();
    }
  });

  test('the assets are cached by version, and a value that is not a token is not echoed into the page', async () => {
    const page = await fetch(
      `${t.url}/graphql?token=${encodeURIComponent('</script><script>alert(1)</script>')}`,
      {
        headers: { accept: 'text/html' },
      },
    );
    const html = await page.text();
    expect(page.status).toBe(200);
    expect(html).not.toContain('alert(1)');
    const src = /<script src="([^"]+graphiql\.js)"/.exec(html)?.[1];
    expect(src).toMatch(/^\/graphiql\/\d+\.\d+\.\d+\/graphiql\.js$/);
    const asset = await fetch(`${t.url}${src}`);
    expect(asset.headers.get('cache-control')).toContain('immutable');
    expect((await asset.text()).length).toBeGreaterThan(1_000_000);
    expect((await fetch(`${t.url}${src!.replace('graphiql.js', 'nope.js')}`)).status).toBe(404);
  });
});
