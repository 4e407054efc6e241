// Requests to the preview site from Node. Previews and share links live on their own hosts
// (`p<port>-<sandbox>.localhost:<port>` by default); Node's resolver does not resolve *.localhost,
// so every host here connects to 127.0.0.1 while the URL's host travels as the Host header, as a
// browser sends it. A client keeps the cookies each host set (the preview and share cookies) and
// follows redirects like fetch: 303 becomes a GET, 307/308 keep the method and body, and an
// Authorization header is not carried to another origin.
import { request as httpRequest } from 'node:http';
import type { LookupFunction } from 'node:net';
import WebSocket from 'ws';

/** Resolves every name to 127.0.0.1 (what a browser does for *.localhost). */
export const loopbackLookup: LookupFunction = (_host, options, callback) => {
  if ((options as { all?: boolean }).all) {
    (callback as unknown as (e: null, a: { address: string; family: number }[]) => void)(null, [
      { address: '127.0.0.1', family: 4 },
    ]);
  } else callback(null, '127.0.0.1', 4);
};

export interface PreviewResponse {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: string;
  /** The URL that answered (after redirects). */
  url: string;
  /** Every URL visited, the first included. */
  visited: string[];
}

export interface PreviewRequestInit {
  method?: string;
  headers?: Record<string, string>;
  body?: string;
  /** Follow redirects. @default true */
  follow?: boolean;
}

function once(
  url: URL,
  init: { method: string; headers: Record<string, string>; body?: string },
): Promise<Omit<PreviewResponse, 'url' | 'visited'>> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(
      url,
      { method: init.method, headers: init.headers, lookup: loopbackLookup },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () =>
          resolve({ status: res.statusCode!, headers: res.headers, body: Buffer.concat(chunks).toString() }),
        );
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.end(init.body);
  });
}

export interface PreviewClient {
  request(url: string, init?: PreviewRequestInit): Promise<PreviewResponse>;
  /** `name=value; …` of the cookies held for `url`'s host. */
  cookieHeader(url: string): string;
}

/** A client with a cookie jar of its own (one browser profile). */
export function createPreviewClient(): PreviewClient {
  const jar = new Map<string, Map<string, string>>();
  const cookieHeader = (url: string): string =>
    [...(jar.get(new URL(url).host) ?? new Map<string, string>())].map(([k, v]) => `${k}=${v}`).join('; ');
  const keep = (url: URL, setCookie: string | string[] | undefined): void => {
    for (const line of Array.isArray(setCookie) ? setCookie : setCookie ? [setCookie] : []) {
      const [pair = ''] = line.split(';');
      const eq = pair.indexOf('=');
      if (eq < 1) continue;
      const cookies = jar.get(url.host) ?? new Map<string, string>();
      const maxAge = /;\s*Max-Age=(-?\d+)/i.exec(line);
      if (maxAge && Number(maxAge[1]) <= 0) cookies.delete(pair.slice(0, eq).trim());
      else cookies.set(pair.slice(0, eq).trim(), pair.slice(eq + 1).trim());
      jar.set(url.host, cookies);
    }
  };
  return {
    cookieHeader,
    async request(start, init = {}) {
      let url = new URL(start);
      let method = init.method ?? 'GET';
      let body = init.body;
      let headers = { ...(init.headers ?? {}) };
      const origin = url.origin;
      const visited: string[] = [];
      for (let hop = 0; hop < 10; hop++) {
        visited.push(url.href);
        // A Cookie header the caller gave wins over the jar's.
        const cookie = headers.cookie ?? cookieHeader(url.href);
        const sent = { ...headers, ...(cookie ? { cookie } : {}) };
        const res = await once(url, { method, headers: sent, body });
        keep(url, res.headers['set-cookie']);
        const location = res.headers.location;
        if (init.follow === false || res.status < 300 || res.status > 308 || typeof location !== 'string') {
          return { ...res, url: url.href, visited };
        }
        url = new URL(location, url);
        if (res.status === 303 || ((res.status === 301 || res.status === 302) && method === 'POST')) {
          method = 'GET';
          body = undefined;
        }
        if (url.origin !== origin) {
          const { authorization: _dropped, ...rest } = headers;
          headers = rest;
        }
      }
      throw new Error(`too many redirects from ${start}`);
    },
  };
}

/** A WebSocket to a preview-site URL (connects to 127.0.0.1, the URL's host as Host). */
export function previewWebSocket(url: string, headers: Record<string, string> = {}): WebSocket {
  return new WebSocket(url, { headers, lookup: loopbackLookup } as WebSocket.ClientOptions);
}

/** `path` below a preview or share URL, keeping the URL's query (its token) as it is. */
export function under(base: string, path: string): string {
  const url = new URL(base);
  url.pathname = `${url.pathname.replace(/\/?$/, '/')}${path.replace(/^\//, '')}`;
  return url.href;
}
