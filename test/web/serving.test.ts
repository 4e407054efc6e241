// The dashboard's files on the server: index.html for every client route (never cached), the hashed
// assets cached for a year, and the API's own paths untouched.
import { readdirSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { type TestApp, startTestApp } from '../support/app';

const html = { accept: 'text/html,application/xhtml+xml' };

describe('the dashboard served at /', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await startTestApp();
  });
  afterAll(async () => t?.stop());

  test('client routes answer index.html, not cached, with a same-origin content security policy', async () => {
    for (const path of ['/', '/sessions', '/sessions/8f0c2c1e-0000-4000-8000-000000000000', '/nowhere']) {
      const res = await fetch(`${t.url}${path}`, { headers: html });
      expect(res.status, path).toBe(200);
      expect(res.headers.get('content-type')).toBe('text/html; charset=utf-8');
      expect(res.headers.get('cache-control')).toBe('no-cache');
      expect(res.headers.get('content-security-policy')).toContain("default-src 'self'");
      const body = await res.text();
      expect(body).toContain('<div id="root"></div>');
      expect(body).toMatch(/<script type="module" crossorigin src="\/assets\/index-[\w-]+\.js"><\/script>/);
    }
  });

  test('hashed assets are cached for a year; unknown or odd names are 404', async () => {
    const index = await (await fetch(`${t.url}/`, { headers: html })).text();
    const script = /src="(\/assets\/[^"]+\.js)"/.exec(index)![1]!;
    const style = /href="(\/assets\/[^"]+\.css)"/.exec(index)![1]!;
    const js = await fetch(`${t.url}${script}`);
    expect(js.status).toBe(200);
    expect(js.headers.get('content-type')).toBe('text/javascript; charset=utf-8');
    expect(js.headers.get('cache-control')).toBe('public, max-age=31536000, immutable');
    expect((await js.text()).length).toBeGreaterThan(10_000);
    const css = await fetch(`${t.url}${style}`);
    expect(css.headers.get('content-type')).toBe('text/css; charset=utf-8');
    // Every file of the build is served, the lazily loaded chunks (dotted names such as uPlot's) too.
    const files = readdirSync(new URL('../../dist/web/assets/', import.meta.url));
    expect(files.some((f) => /^uPlot\.esm-[\w-]+\.js$/.test(f))).toBe(true);
    for (const file of files) expect((await fetch(`${t.url}/assets/${file}`)).status, file).toBe(200);
    for (const path of [
      '/assets/index-nope.js',
      '/assets/..index.js',
      '/assets/.hidden.js',
      '/assets/..%2f..%2fpackage.json',
      '/assets/index.html',
    ]) {
      expect((await fetch(`${t.url}${path}`)).status, path).toBe(404);
    }
  });

  test('the API, GraphiQL, health and metrics keep their own answers', async () => {
    const graphiql = await fetch(`${t.url}/graphql`, { headers: html });
    expect(await graphiql.text()).toContain('YogaGraphiQL');
    const health = await fetch(`${t.url}/healthz`, { headers: html });
    expect(health.status).toBe(200);
    expect(health.headers.get('content-type')).toContain('application/json');
    const metrics = await fetch(`${t.url}/metrics`, { headers: html });
    expect(await metrics.text()).toContain('# HELP');
    const api = await fetch(`${t.url}/v1/nothing-here`, { headers: html });
    expect(await api.text()).not.toContain('<div id="root">');
    // Not a page: a script or JSON request for an unknown path keeps the 404.
    const json = await fetch(`${t.url}/nothing.json`, { headers: { accept: 'application/json' } });
    expect(json.status).toBe(404);
    const post = await fetch(`${t.url}/`, { method: 'POST', headers: html, body: '' });
    expect(await post.text()).not.toContain('<div id="root">');
  });
});
