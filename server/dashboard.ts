// The dashboard (web/, built by scripts/generate.mjs into dist/web): content-hashed files under
// /assets/ are cached for a year; every other GET that wants HTML (a client route such as
// /sessions/<id>) gets index.html, never cached, so a new build is picked up on the next load.
// Nothing here knows the API: the app talks to /graphql like any other client.
import { readFile } from 'node:fs/promises';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { extname, join } from 'node:path';

const DIST = new URL('../dist/web/', import.meta.url).pathname;
const ASSETS = '/assets/';
const TYPES: Record<string, string> = {
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
  '.woff2': 'font/woff2',
};
/**
 * Vite names assets <name>-<hash>.<ext> (a name may hold dots: uPlot.esm-<hash>.js); nothing with a
 * slash, a leading dot or two dots in a row is looked up on disk.
 */
const ASSET_NAME = /^[A-Za-z0-9_-]+(?:\.[A-Za-z0-9_-]+)*\.[a-z0-9]+$/;
// The app's own origin only; the preview iframe shows a sandbox's app from this API (or its preview
// subdomains), and connect-src allows the graphql-ws WebSocket.
const CSP = [
  "default-src 'self'",
  "connect-src 'self' ws: wss:",
  "img-src 'self' data: blob:",
  "style-src 'self' 'unsafe-inline'",
  'frame-src http: https:',
  "frame-ancestors 'none'",
  "base-uri 'none'",
  "object-src 'none'",
  "form-action 'self'",
].join('; ');

/** Read per request (a few hundred bytes): a rebuild replaces the hashed files it names. */
function loadIndex(): Promise<Buffer | null> {
  return readFile(join(DIST, 'index.html')).catch(() => null);
}

/** Paths the dashboard never answers: the API and the server's own endpoints keep their 404s. */
function reserved(path: string): boolean {
  return (
    path === '/graphql' ||
    path.startsWith('/graphql/') ||
    path.startsWith('/graphiql/') ||
    path.startsWith('/v1/') ||
    path === '/healthz' ||
    path === '/readyz' ||
    path === '/metrics'
  );
}

/** Answers the dashboard's GET/HEAD requests; false when the request is not the dashboard's. */
export async function serveDashboard(
  req: IncomingMessage,
  res: ServerResponse,
  path: string,
): Promise<boolean> {
  if ((req.method !== 'GET' && req.method !== 'HEAD') || reserved(path)) return false;
  if (path.startsWith(ASSETS)) {
    const name = path.slice(ASSETS.length);
    const type = TYPES[extname(name)];
    const body =
      ASSET_NAME.test(name) && type ? await readFile(join(DIST, 'assets', name)).catch(() => null) : null;
    if (!body || !type) {
      res.writeHead(404, { 'content-type': 'text/plain' }).end('Not found');
      return true;
    }
    res.writeHead(200, {
      'content-type': type,
      'content-length': body.length,
      'cache-control': 'public, max-age=31536000, immutable',
      'x-content-type-options': 'nosniff',
    });
    res.end(req.method === 'HEAD' ? undefined : body);
    return true;
  }
  // Client routes are pages: a request for anything else (a script, JSON) keeps the API's 404.
  if (!(req.headers.accept ?? '').includes('text/html')) return false;
  const html = await loadIndex();
  if (!html) {
    res
      .writeHead(503, { 'content-type': 'text/plain; charset=utf-8', 'cache-control': 'no-store' })
      .end('The dashboard is not built: run `npm run generate`.\n');
    return true;
  }
  res.writeHead(200, {
    'content-type': 'text/html; charset=utf-8',
    'content-length': html.length,
    'cache-control': 'no-cache',
    'content-security-policy': CSP,
    'x-content-type-options': 'nosniff',
    'referrer-policy': 'no-referrer',
  });
  res.end(req.method === 'HEAD' ? undefined : html);
  return true;
}
