// Previews and public share links (R-PRV-1, R-PRV-2, R-PRV-3):
//   /v1/p/<sandbox-id>/<port>/…        path form, WebSocket upgrades supported
//   p<port>-<sandbox-id>.<api-host>/…  subdomain form, HTTP only (an upgrade is refused, naming the path form)
//   /v1/share/<secret>/…               public share link (view-only: GET/HEAD, no WebSocket)
// X-Frame-Options and CSP frame-ancestors are stripped so a preview embeds in an iframe. Nothing
// here creates or renews a lease or moves the idle clock (R-LEASE-2). Rules: resolvers/gateway/access.ts.
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import {
  AccessError,
  type AccessService,
  PREVIEW_COOKIE,
  PREVIEW_QUERY,
  type ProxyGrant,
} from '../resolvers/gateway/access';
import { type DaemonProxy, refuseUpgrade, sendJson } from './daemon-proxy';
import type { Logger } from './logger';

const PATH_FORM = /^\/v1\/p\/([^/]+)\/(\d{1,5})(\/.*)?$/;
const SHARE_FORM = /^\/v1\/share\/([A-Za-z0-9_-]{16,128})(\/.*)?$/;
const HOST_FORM = /^p(\d{1,5})-([0-9a-f-]{36})\./i;

type Route =
  | {
      kind: 'preview';
      form: 'PATH' | 'SUBDOMAIN';
      sandboxId: string;
      port: number;
      rest: string | null;
      cookiePath: string;
    }
  | { kind: 'share'; secret: string; rest: string | null };

function route(req: IncomingMessage, path: string): Route | null {
  const host = HOST_FORM.exec(req.headers.host ?? '');
  if (host) {
    return {
      kind: 'preview',
      form: 'SUBDOMAIN',
      sandboxId: host[2]!,
      port: Number(host[1]),
      rest: path,
      cookiePath: '/',
    };
  }
  const p = PATH_FORM.exec(path);
  if (p) {
    return {
      kind: 'preview',
      form: 'PATH',
      sandboxId: p[1]!,
      port: Number(p[2]),
      rest: p[3] ?? null,
      cookiePath: `/v1/p/${p[1]}/${p[2]}/`,
    };
  }
  const s = SHARE_FORM.exec(path);
  if (s) return { kind: 'share', secret: s[1]!, rest: s[2] ?? null };
  return null;
}

function cookies(header: string | undefined, name: string): string[] {
  if (!header) return [];
  return header
    .split(';')
    .map((c) => c.trim())
    .filter((c) => c.startsWith(`${name}=`))
    .map((c) => decodeURIComponent(c.slice(name.length + 1)));
}

export function createPreviewProxy(options: { access: AccessService; proxy: DaemonProxy; logger: Logger }) {
  const { access, proxy } = options;
  const log = options.logger.child({ module: 'preview-proxy' });

  /** The preview grant from a URL token, a cookie (most specific path first) or an API token. */
  async function previewGrant(
    req: IncomingMessage,
    r: Extract<Route, { kind: 'preview' }>,
    urlToken: string | null,
  ): Promise<ProxyGrant> {
    const base = { authorization: req.headers.authorization, sandboxId: r.sandboxId, port: r.port };
    const candidates = urlToken ? [urlToken] : cookies(req.headers.cookie, PREVIEW_COOKIE);
    let last: unknown = null;
    for (const token of candidates) {
      try {
        return await access.preview({ ...base, previewToken: token });
      } catch (error) {
        last = error;
      }
    }
    if (candidates.length > 0 && !req.headers.authorization) throw last;
    return access.preview({ ...base, previewToken: null });
  }

  return {
    matches: (req: IncomingMessage, path: string) => route(req, path) !== null,

    async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
      const [path = '/', query = ''] = (req.url ?? '/').split(/\?(.*)/s, 2);
      const r = route(req, path)!;
      try {
        if (r.rest === null) {
          // Relative links of the previewed app resolve against a trailing slash.
          res.writeHead(308, { location: `${path}/${query ? `?${query}` : ''}` }).end();
          return;
        }
        if (r.kind === 'share') {
          const grant = await access.share({ secret: r.secret, method: req.method ?? 'GET', upgrade: false });
          proxy.web(req, res, grant, `${r.rest}${query ? `?${query}` : ''}`, { allowFraming: true });
          return;
        }
        const params = new URLSearchParams(query);
        const urlToken = params.get(PREVIEW_QUERY);
        const grant = await previewGrant(req, r, urlToken);
        if (urlToken) {
          // A signed URL is opened once: it becomes a cookie scoped to this preview, and the
          // browser reloads the clean URL (the token leaves the address bar and history).
          const cookie = access.previewCookie(r.sandboxId, r.port, grant.userId);
          params.delete(PREVIEW_QUERY);
          const rest = params.toString();
          res.writeHead(303, {
            location: `${path}${rest ? `?${rest}` : ''}`,
            'set-cookie': `${PREVIEW_COOKIE}=${encodeURIComponent(cookie.token)}; Path=${r.cookiePath}; Max-Age=${cookie.maxAgeSeconds}; ${cookie.attributes}`,
            'cache-control': 'no-store',
          });
          res.end();
          return;
        }
        proxy.web(req, res, grant, `${r.rest}${query ? `?${query}` : ''}`, {
          allowFraming: true,
          dropCookies: [PREVIEW_COOKIE],
        });
      } catch (error) {
        if (error instanceof AccessError) return sendJson(res, error.status, { error: error.message });
        log.error({ err: error, path }, 'preview proxy failure');
        sendJson(res, 502, { error: 'The preview could not be reached.' });
      }
    },

    async upgrade(req: IncomingMessage, socket: Socket, head: Buffer): Promise<void> {
      const [path = '/', query = ''] = (req.url ?? '/').split(/\?(.*)/s, 2);
      const r = route(req, path);
      if (!r) return refuseUpgrade(socket, 404, 'No WebSocket route here.');
      try {
        if (r.kind === 'share') {
          const grant = await access.share({ secret: r.secret, method: req.method ?? 'GET', upgrade: true });
          return proxy.ws(req, socket, head, grant, `${r.rest ?? '/'}${query ? `?${query}` : ''}`);
        }
        if (r.form === 'SUBDOMAIN') {
          return refuseUpgrade(
            socket,
            400,
            `WebSocket upgrades are not supported on the subdomain preview form yet; use the path form /v1/p/${r.sandboxId}/${r.port}/.`,
          );
        }
        const grant = await previewGrant(req, r, null);
        proxy.ws(req, socket, head, grant, `${r.rest ?? '/'}${query ? `?${query}` : ''}`, {
          dropCookies: [PREVIEW_COOKIE],
        });
      } catch (error) {
        if (error instanceof AccessError) return refuseUpgrade(socket, error.status, error.message);
        log.error({ err: error, path }, 'preview upgrade failure');
        refuseUpgrade(socket, 502, 'The preview could not be reached.');
      }
    },
  };
}
