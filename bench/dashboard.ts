// The dashboard's weight and start-up on loopback, each next to GraphiQL served by the same server:
//  1. gzip size of what the first load fetches (dist/web's index.html, script and stylesheet) vs
//     GraphiQL's page, script and stylesheet (its Monaco workers, fetched later, not counted);
//  2. time to interactive in headless Chromium, cold cache: from navigation to the signed-in
//     sessions list rendered from the API vs GraphiQL's execute button (median of ROUNDS).
import { performance } from 'node:perf_hooks';
import { gzipSync } from 'node:zlib';
import type { Browser } from 'playwright-core';
import { startTestApp } from '../test/support/app';
import { launchBrowser } from '../test/web/helpers';
import { type BenchResult, percentile, round, runIfMain } from './support/harness';

const ROUNDS = 5;

/** The page and the scripts and stylesheets it names, gzipped (level 6, what a proxy would send). */
async function firstLoadGzipBytes(base: string, path: string): Promise<number> {
  const page = await (await fetch(`${base}${path}`, { headers: { accept: 'text/html' } })).text();
  const urls = [...page.matchAll(/(?:src|href)="(\/[^"]+\.(?:js|css))"/g)].map((m) => m[1]!);
  if (urls.length === 0) throw new Error(`no assets named by ${path}`);
  let total = gzipSync(page).length;
  for (const url of urls)
    total += gzipSync(Buffer.from(await (await fetch(`${base}${url}`)).arrayBuffer())).length;
  return total;
}

async function timeToInteractive(
  browser: Browser,
  url: string,
  ready: string,
  token: string,
): Promise<number> {
  const context = await browser.newContext();
  try {
    await context.addInitScript({
      content: `sessionStorage.setItem('singulacomp.token', ${JSON.stringify(token)})`,
    });
    const page = await context.newPage();
    const started = performance.now();
    await page.goto(url, { waitUntil: 'commit' });
    await page.locator(ready).first().waitFor({ timeout: 60_000 });
    return performance.now() - started;
  } finally {
    await context.close();
  }
}

export async function run(): Promise<BenchResult[]> {
  const t = await startTestApp();
  const browser = await launchBrowser();
  try {
    const dashboardBytes = await firstLoadGzipBytes(t.url, '/');
    const graphiqlBytes = await firstLoadGzipBytes(t.url, `/graphql?token=${t.adminToken}`);
    const dashboard: number[] = [];
    const graphiql: number[] = [];
    for (let i = 0; i < ROUNDS; i++) {
      // The sessions table body with the "no sessions" line: the app ran its queries and rendered.
      dashboard.push(
        await timeToInteractive(browser, `${t.url}/`, 'p.empty, tr[data-session]', t.adminToken),
      );
      graphiql.push(
        await timeToInteractive(
          browser,
          `${t.url}/graphql?token=${t.adminToken}`,
          '.graphiql-execute-button',
          t.adminToken,
        ),
      );
    }
    return [
      {
        name: 'first load, gzip',
        value: round(dashboardBytes / 1024, 1),
        unit: 'KiB',
        baseline: round(graphiqlBytes / 1024, 1),
        note: 'baseline: GraphiQL page + script + stylesheet from the same server',
      },
      {
        name: `time to interactive p50 (cold cache, ${ROUNDS} loads)`,
        value: round(percentile(dashboard, 50)),
        unit: 'ms',
        baseline: round(percentile(graphiql, 50)),
        note: 'signed-in sessions list rendered vs GraphiQL execute button, headless Chromium on loopback',
      },
    ];
  } finally {
    await browser.close();
    await t.stop();
  }
}

runIfMain(import.meta.url, run);
