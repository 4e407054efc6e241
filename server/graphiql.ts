// GraphiQL served from the installed package (@graphql-yoga/render-graphiql bundles GraphiQL, its
// CSS and Monaco's workers): no CDN, so the page works offline and behind a firewall. The ~9 MB of
// assets are served once under a versioned path and cached by the browser, instead of being inlined
// into every page as the package's own renderGraphiQL does.
import type { IncomingMessage, ServerResponse } from 'node:http';
import { createRequire } from 'node:module';
import type { GraphiQLOptions } from 'graphql-yoga';

const VERSION = (
  createRequire(import.meta.url)('@graphql-yoga/render-graphiql/package.json') as { version: string }
).version;
export const GRAPHIQL_ASSETS_PATH = `/graphiql/${VERSION}/`;

type Assets = Record<string, { type: string; body: Buffer }>;
let assets: Promise<Assets> | null = null;

/** Loaded on the first GraphiQL request only: the module is large and most processes never need it. */
function loadAssets(): Promise<Assets> {
  assets ??= import('@graphql-yoga/render-graphiql/graphiql').then((m) => {
    const js = (text: string) => ({ type: 'text/javascript; charset=utf-8', body: Buffer.from(text) });
    const icon = /^data:([^;]+);base64,(.*)$/.exec(m.favicon);
    return {
      'graphiql.js': js(m.js),
      'graphiql.css': { type: 'text/css; charset=utf-8', body: Buffer.from(m.css) },
      'editor.worker.js': js(m.editorWorkerService),
      'json.worker.js': js(m.jsonWorker),
      'graphql.worker.js': js(m.graphqlWorker),
      'favicon.ico': icon
        ? { type: icon[1]!, body: Buffer.from(icon[2]!, 'base64') }
        : { type: 'image/x-icon', body: Buffer.alloc(0) },
    };
  });
  return assets;
}

/** Answers GET <GRAPHIQL_ASSETS_PATH><name>; false when the path is not one of ours. */
export async function serveGraphiqlAsset(req: IncomingMessage, res: ServerResponse): Promise<boolean> {
  const path = (req.url ?? '/').split('?')[0]!;
  if (!path.startsWith(GRAPHIQL_ASSETS_PATH)) return false;
  const asset = (await loadAssets())[path.slice(GRAPHIQL_ASSETS_PATH.length)];
  if (!asset || (req.method !== 'GET' && req.method !== 'HEAD')) {
    res.writeHead(404, { 'content-type': 'text/plain' }).end('Not found');
    return true;
  }
  res.writeHead(200, {
    'content-type': asset.type,
    'content-length': asset.body.length,
    // The path carries the package version: a new version is a new URL.
    'cache-control': 'public, max-age=31536000, immutable',
  });
  res.end(req.method === 'HEAD' ? undefined : asset.body);
  return true;
}

/** Tokens are URL-safe by construction (PAT/SA: base62 + underscore; sandbox JWT: base64url + dots). */
const TOKEN = /^[A-Za-z0-9_.-]{1,4096}$/;

/**
 * GraphiQL options per request: `?token=<token>` prefills the Authorization header, so a link
 * printed at start-up opens a working page. Anything that is not token-shaped is ignored.
 */
export function graphiqlOptions(request: Request, title: string): GraphiQLOptions {
  const token = new URL(request.url).searchParams.get('token');
  return {
    title,
    subscriptionsProtocol: 'WS',
    ...(token && TOKEN.test(token) ? { headers: JSON.stringify({ authorization: `Bearer ${token}` }) } : {}),
  };
}

/** The page: GraphiQL's bundle and workers from GRAPHIQL_ASSETS_PATH, options inlined as JSON. */
export function renderGraphiql(options?: GraphiQLOptions): string {
  const base = GRAPHIQL_ASSETS_PATH;
  // JSON inside <script>: escape < so no value can close the element.
  const json = JSON.stringify(options ?? {}).replaceAll('<', '\\u003c');
  const title = (options?.title ?? 'GraphiQL').replace(/[<>&"]/g, (c) => `&#${c.charCodeAt(0)};`);
  return `<!doctype html>
<html lang="en">
  <head>
    <meta charset="utf-8" />
    <title>${title}</title>
    <link rel="icon" href="${base}favicon.ico" />
    <link rel="stylesheet" href="${base}graphiql.css" />
  </head>
  <body id="body" class="no-focus-outline">
    <noscript>You need to enable JavaScript to run this app.</noscript>
    <div id="root"></div>
    <script>
      const workers = {
        editorWorkerService: '${base}editor.worker.js',
        json: '${base}json.worker.js',
        graphql: '${base}graphql.worker.js',
      };
      self.MonacoEnvironment = { globalAPI: false, getWorkerUrl: (_id, label) => workers[label] };
    </script>
    <script src="${base}graphiql.js"></script>
    <script>
      YogaGraphiQL.renderYogaGraphiQL(document.querySelector('#root'), ${json});
    </script>
  </body>
</html>
`;
}
