// Previews and public share links, served only from the preview site (R-PRV-1..5):
//   p<port>-<sandbox-id>.<preview domain>/…  one sandbox port's preview, every path, WebSocket too
//   s-<link-id>.<preview domain>/…           one public share link (view-only: GET/HEAD, no WebSocket)
// Each is an origin of its own, never the API's or the dashboard's, so a previewed app can neither
// read nor script the dashboard nor register a service worker over it. The old forms on the API
// origin (/v1/p/<sandbox-id>/<port>/…, /v1/share/<secret>/…) redirect to the preview site and
// proxy nothing. A signed URL or a share link's secret arrives once in the query and becomes a
// host-only cookie; the browser reloads the clean URL. X-Frame-Options and CSP frame-ancestors are
// stripped so a preview embeds in the dashboard's iframe. Nothing here creates or renews a lease or
// moves the idle clock (R-LEASE-2). Rules: resolvers/gateway/access.ts.
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import {
  AccessError,
  type AccessService,
  PREVIEW_COOKIE,
  PREVIEW_QUERY,
  type PreviewSiteHost,
  type ProxyGrant,
  SHARE_COOKIE,
  SHARE_QUERY,
} from '../resolvers/gateway/access';
import { type DaemonProxy, refuseUpgrade, sendJson } from './daemon-proxy';
import type { Logger } from './logger';

const LEGACY_PREVIEW = /^\/v1\/p\/([^/]+)\/(\d{1,5})(\/.*)?$/;
const LEGACY_SHARE = /^\/v1\/share\/([A-Za-z0-9_-]{16,128})(\/.*)?$/;
/** Our cookies: the app behind a preview never receives them. */
const OUR_COOKIES = [PREVIEW_COOKIE, SHARE_COOKIE] as const;

function cookies(header: string | undefined, name: string): string[] {
  if (!header) return [];
  return header
    .split(';')
    .map((c) => c.trim())
    .filter((c) => c.startsWith(`${name}=`))
    .map((c) => decodeURIComponent(c.slice(name.length + 1)));
}

/** `path?query` without one parameter. */
function without(path: string, params: URLSearchParams, name: string): string {
  const kept = new URLSearchParams(params);
  kept.delete(name);
  const query = kept.toString();
  return `${path}${query ? `?${query}` : ''}`;
}

export function createPreviewProxy(options: { access: AccessService; proxy: DaemonProxy; logger: Logger }) {
  const { access, proxy } = options;
  const log = options.logger.child({ module: 'preview-proxy' });

  /** The preview grant from a URL token, a cookie, or an API token. */
  async function previewGrant(
    req: IncomingMessage,
    site: Extract<PreviewSiteHost, { kind: 'preview' }>,
    urlToken: string | null,
  ): Promise<ProxyGrant> {
    const base = { authorization: req.headers.authorization, sandboxId: site.sandboxId, port: site.port };
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

  /** The share grant from the query (first visit, or a WebSocket) or the link's cookie. */
  function shareGrant(
    req: IncomingMessage,
    site: Extract<PreviewSiteHost, { kind: 'share' }>,
    urlSecret: string | null,
    upgrade: boolean,
  ) {
    const secret = urlSecret ?? cookies(req.headers.cookie, SHARE_COOKIE)[0];
    if (!secret) throw new AccessError(401, 'Open the share link you were given: it carries the access.');
    return access.share({ secret, linkId: site.linkId, method: req.method ?? 'GET', upgrade });
  }

  /** The old path forms on the API origin: a redirect to the preview site, or null. */
  async function legacyLocation(path: string, query: string): Promise<string | null> {
    const p = LEGACY_PREVIEW.exec(path);
    if (p) {
      const port = Number(p[2]);
      if (!/^[0-9a-f-]{36}$/i.test(p[1]!) || port < 1 || port > 65_535)
        throw new AccessError(404, 'No such preview.');
      return `${access.previewOrigin(p[1]!.toLowerCase(), port)}${p[3] ?? '/'}${query ? `?${query}` : ''}`;
    }
    const sh = LEGACY_SHARE.exec(path);
    if (sh) {
      const url = await access.legacyShareUrl(sh[1]!, sh[2] ?? '/');
      if (!url) throw new AccessError(404, 'No such share link.');
      return url;
    }
    return null;
  }

  function hostOf(req: IncomingMessage): PreviewSiteHost | null {
    return access.siteHost(req.headers.host);
  }

  return {
    /** Every request on the preview site's hosts, and the old path forms on any host. */
    matches: (req: IncomingMessage, path: string) =>
      hostOf(req) !== null || LEGACY_PREVIEW.test(path) || LEGACY_SHARE.test(path),

    async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
      const [path = '/', query = ''] = (req.url ?? '/').split(/\?(.*)/s, 2);
      const site = hostOf(req);
      try {
        if (!site) {
          const location = await legacyLocation(path, query);
          res.writeHead(308, { location: location!, 'cache-control': 'no-store' }).end();
          return;
        }
        const params = new URLSearchParams(query);
        if (site.kind === 'share') {
          const secret = params.get(SHARE_QUERY);
          const grant = await shareGrant(req, site, secret, false);
          if (secret) {
            const cookie = access.shareCookie(grant);
            res.writeHead(303, {
              location: without(path, params, SHARE_QUERY),
              'set-cookie': `${SHARE_COOKIE}=${encodeURIComponent(secret)}; Path=/; Max-Age=${cookie.maxAgeSeconds}; ${cookie.attributes}`,
              'cache-control': 'no-store',
            });
            res.end();
            return;
          }
          proxy.web(req, res, grant, req.url ?? '/', { allowFraming: true, dropCookies: OUR_COOKIES });
          return;
        }
        const urlToken = params.get(PREVIEW_QUERY);
        const grant = await previewGrant(req, site, urlToken);
        if (urlToken) {
          // A signed URL is opened once: it becomes a cookie of this preview's origin, and the
          // browser reloads the clean URL (the token leaves the address bar and history).
          const cookie = await access.previewCookie(site.sandboxId, site.port, grant.userId);
          res.writeHead(303, {
            location: without(path, params, PREVIEW_QUERY),
            'set-cookie': `${PREVIEW_COOKIE}=${encodeURIComponent(cookie.token)}; Path=/; Max-Age=${cookie.maxAgeSeconds}; ${cookie.attributes}`,
            'cache-control': 'no-store',
          });
          res.end();
          return;
        }
        proxy.web(req, res, grant, req.url ?? '/', { allowFraming: true, dropCookies: OUR_COOKIES });
      } catch (error) {
        if (error instanceof AccessError) {
          // Framed as http-proxy frames the daemon's answers (an explicit Connection header, no
          // Keep-Alive), so the server's refusal of a port matches the daemon's byte for byte.
          return sendJson(
            res,
            error.status,
            { error: error.message },
            {
              connection: req.headers.connection ?? 'keep-alive',
            },
          );
        }
        log.error({ err: error, path }, 'preview proxy failure');
        sendJson(res, 502, { error: 'The preview could not be reached.' });
      }
    },

    async upgrade(req: IncomingMessage, socket: Socket, head: Buffer): Promise<void> {
      const [path = '/', query = ''] = (req.url ?? '/').split(/\?(.*)/s, 2);
      const site = hostOf(req);
      try {
        if (!site) {
          const location = await legacyLocation(path, query);
          return refuseUpgrade(
            socket,
            410,
            `Previews and share links moved to the preview site: connect to ${location}.`,
          );
        }
        const params = new URLSearchParams(query);
        if (site.kind === 'share') {
          const secret = params.get(SHARE_QUERY);
          const grant = await shareGrant(req, site, secret, true);
          const url = params.has(SHARE_QUERY) ? without(path, params, SHARE_QUERY) : (req.url ?? '/');
          return proxy.ws(req, socket, head, grant, url, {
            dropCookies: OUR_COOKIES,
          });
        }
        const urlToken = params.get(PREVIEW_QUERY);
        const grant = await previewGrant(req, site, urlToken);
        const url = params.has(PREVIEW_QUERY) ? without(path, params, PREVIEW_QUERY) : (req.url ?? '/');
        proxy.ws(req, socket, head, grant, url, {
          dropCookies: OUR_COOKIES,
        });
      } catch (error) {
        if (error instanceof AccessError) return refuseUpgrade(socket, error.status, error.message);
        log.error({ err: error, path }, 'preview upgrade failure');
        refuseUpgrade(socket, 502, 'The preview could not be reached.');
      }
    },
  };
}
