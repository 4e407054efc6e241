// Forwards an authorized HTTP request or WebSocket upgrade to a sandbox daemon (http-proxy-3, the
// maintained rewrite of http-proxy): the caller's credentials are removed, the daemon's
// user-context header is set through the one server→daemon client, signed for OpenCode (the agent
// proxy) or for one app port (previews and share links; never the daemon's control routes).
// An app's answer loses Service-Worker-Allowed: a previewed app registers service workers for its
// own origin's paths only (R-PRV-4).
import { Agent as HttpAgent, type IncomingMessage, type ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import { createProxyServer } from 'http-proxy-3';
import { type DaemonClient, TARGET_PORT_HEADER } from '../resolvers/daemon/daemon-client';
import type { ProxyGrant } from '../resolvers/gateway/access';
import { createDaemonPipe } from './fast-paths/daemon-pipe';
import type { Logger } from './logger';

export interface ForwardOptions {
  /** Drop X-Frame-Options and CSP frame-ancestors from the answer (previews embed in iframes). */
  allowFraming?: boolean;
  /** Cookie names of ours to remove before the request reaches the sandbox. */
  dropCookies?: readonly string[];
  /**
   * WebSocket only: the subprotocol the 101 answer names. The caller offered it (next to its
   * credential, which is not forwarded) and a browser fails a handshake that names none.
   */
  answerProtocol?: string;
}

const FRAMING = Symbol('allowFraming');
const APP = Symbol('app');
const PROTOCOL = Symbol('answerProtocol');

/** Removes the frame-ancestors directive from a CSP value; null when nothing else is left. */
export function withoutFrameAncestors(csp: string): string | null {
  const kept = csp
    .split(';')
    .map((d) => d.trim())
    .filter((d) => d.length > 0 && !/^frame-ancestors(\s|$)/i.test(d));
  return kept.length > 0 ? kept.join('; ') : null;
}

function stripCookies(header: string | undefined, names: readonly string[]): string | undefined {
  if (!header || names.length === 0) return header;
  const kept = header
    .split(';')
    .map((c) => c.trim())
    .filter((c) => c && !names.includes(c.slice(0, c.indexOf('=') === -1 ? c.length : c.indexOf('='))));
  return kept.length > 0 ? kept.join('; ') : undefined;
}

export function sendJson(
  res: ServerResponse,
  status: number,
  body: unknown,
  headers: Record<string, string> = {},
) {
  const text = JSON.stringify(body);
  res.writeHead(status, {
    'content-type': 'application/json',
    'content-length': Buffer.byteLength(text),
    ...headers,
  });
  res.end(text);
}

/** Answers an upgrade request with a plain HTTP error and closes the socket. */
export function refuseUpgrade(socket: Socket, status: number, message: string): void {
  const text = JSON.stringify({ error: message });
  const reason =
    {
      400: 'Bad Request',
      401: 'Unauthorized',
      403: 'Forbidden',
      404: 'Not Found',
      405: 'Method Not Allowed',
      410: 'Gone',
      502: 'Bad Gateway',
      503: 'Service Unavailable',
    }[status] ?? 'Error';
  socket.end(
    `HTTP/1.1 ${status} ${reason}\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(text)}\r\nconnection: close\r\n\r\n${text}`,
  );
}

export interface DaemonProxyOptions {
  daemon: DaemonClient;
  logger: Logger;
  /**
   * Forward HTTP requests with server/fast-paths/daemon-pipe.ts instead of http-proxy-3 (the same
   * forwarding; WebSockets stay with the library). @default false
   */
  pipe?: boolean;
}

export function createDaemonProxy(options: DaemonProxyOptions) {
  const { daemon } = options;
  const log = options.logger.child({ module: 'daemon-proxy' });
  // Keep-alive to the daemons: without an agent http-proxy sends `Connection: close`, which the
  // daemon would pass on to OpenCode, and every request would pay a fresh connect.
  const agent = new HttpAgent({ keepAlive: true, maxSockets: 256, maxFreeSockets: 32 });
  const proxy = createProxyServer({ ws: true, proxyTimeout: 0, xfwd: true, agent });
  const pipe = options.pipe
    ? createDaemonPipe({
        agent,
        onResponse: (answer, req, res) => proxy.emit('proxyRes', answer, req, res),
        onError: (error, req, res) => proxy.emit('error', error, req, res),
      })
    : null;
  proxy.on('error', (error, _req, resOrSocket) => {
    log.debug({ err: error.message }, 'daemon unreachable');
    if (resOrSocket && 'writeHead' in resOrSocket) {
      const res = resOrSocket as ServerResponse;
      if (!res.headersSent)
        sendJson(res, 502, { error: `The sandbox could not be reached: ${error.message}` });
      else res.end();
    } else {
      (resOrSocket as Socket | undefined)?.destroy();
    }
  });
  // Emitted before http-proxy listens for the upgrade itself, so the header is in place when it
  // writes the 101 to the caller.
  proxy.on('proxyReqWs', (proxyReq, req) => {
    const protocol = (req as IncomingMessage & { [PROTOCOL]?: string })[PROTOCOL];
    if (!protocol) return;
    proxyReq.on('upgrade', (proxyRes) => {
      proxyRes.headers['sec-websocket-protocol'] = protocol;
    });
  });
  proxy.on('proxyRes', (proxyRes, req) => {
    // Hop-by-hop (RFC 9110 §7.6.1): the daemon's keep-alive timeout is not the client's, and it
    // would tell the daemon's answers from the server's own, which a refused port must not.
    delete proxyRes.headers['keep-alive'];
    if ((req as IncomingMessage & { [APP]?: boolean })[APP])
      delete proxyRes.headers['service-worker-allowed'];
    if (!(req as IncomingMessage & { [FRAMING]?: boolean })[FRAMING]) return;
    delete proxyRes.headers['x-frame-options'];
    for (const name of ['content-security-policy', 'content-security-policy-report-only']) {
      const value = proxyRes.headers[name];
      if (typeof value !== 'string') continue;
      const kept = withoutFrameAncestors(value);
      if (kept) proxyRes.headers[name] = kept;
      else delete proxyRes.headers[name];
    }
  });

  function prepare(req: IncomingMessage, grant: ProxyGrant, path: string, forward: ForwardOptions): string {
    req.url = path.startsWith('/') ? path : `/${path}`;
    delete req.headers.authorization;
    const cookie = stripCookies(req.headers.cookie, forward.dropCookies ?? []);
    if (cookie) req.headers.cookie = cookie;
    else delete req.headers.cookie;
    delete req.headers[TARGET_PORT_HEADER];
    Object.assign(
      req.headers,
      grant.port === null
        ? daemon.headers(grant.target, { userId: grant.userId, audience: 'opencode', ttlSeconds: 300 })
        : daemon.headers(grant.target, {
            userId: grant.userId,
            audience: 'app',
            port: grant.port,
            ttlSeconds: 300,
          }),
    );
    if (grant.port !== null) (req as IncomingMessage & { [APP]?: boolean })[APP] = true;
    if (forward.allowFraming) (req as IncomingMessage & { [FRAMING]?: boolean })[FRAMING] = true;
    if (forward.answerProtocol) {
      delete req.headers['sec-websocket-protocol'];
      (req as IncomingMessage & { [PROTOCOL]?: string })[PROTOCOL] = forward.answerProtocol;
    }
    return daemon.baseUrl(grant.target);
  }

  return {
    web(
      req: IncomingMessage,
      res: ServerResponse,
      grant: ProxyGrant,
      path: string,
      forward: ForwardOptions = {},
    ) {
      const target = prepare(req, grant, path, forward);
      if (pipe) pipe(req, res, target);
      else proxy.web(req, res, { target, changeOrigin: true });
    },
    ws(
      req: IncomingMessage,
      socket: Socket,
      head: Buffer,
      grant: ProxyGrant,
      path: string,
      forward: ForwardOptions = {},
    ) {
      socket.on('error', () => socket.destroy());
      const target = prepare(req, grant, path, forward);
      proxy.ws(req, socket, head, { target, changeOrigin: true });
    },
    close: () => {
      proxy.close();
      agent.destroy();
    },
  };
}

export type DaemonProxy = ReturnType<typeof createDaemonProxy>;
