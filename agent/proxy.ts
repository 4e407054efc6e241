// R-AG-2: the daemon's HTTP surface on SINGULACOMP_SERVICE_PORT — /singulacomp/* control routes and
// a reverse proxy (HTTP and WebSocket) to OpenCode or to any other local port, behind the
// X-SingulaComp-User-Context header. The header's audience decides which (R-PRV-5): `control`
// reaches only the control routes, `opencode` only OpenCode, `app` only the one sandbox port its
// claims name, whatever the path, and never the daemon's or OpenCode's port. The control plane signs
// preview and share traffic `app` only, so it can never reach a control route. The proxy is a plain
// node:http pipe (request in, upstream request out over a keep-alive pool, response piped back),
// the same forwarding http-proxy did with `xfwd` (X-Forwarded-For/-Port/-Proto/-Host) at a fraction
// of its per-request work.
import {
  createServer,
  Agent as HttpAgent,
  type IncomingHttpHeaders,
  type IncomingMessage,
  request as httpRequest,
  type OutgoingHttpHeaders,
  type Server,
  type ServerResponse,
} from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { UNREACHABLE_PORT_MESSAGE, UNREACHABLE_PORT_STATUS } from '../contract/ports';
import { USER_CONTEXT_HEADER, type UserContextClaims, UserContextVerifier } from '../contract/user-context';
import type { Logger } from './logger';
import { SandboxPorts } from './sandbox-ports';

export const TARGET_PORT_HEADER = 'x-singulacomp-target-port';

export interface ControlHandlers {
  health(): { status: number; body: unknown };
  refresh(): Promise<{ status: number; body: unknown }>;
  reload(body: unknown): Promise<{ status: number; body: unknown }>;
  part(id: string): Promise<{ mime: string; bytes: Buffer } | null>;
  /** POST /singulacomp/message: a user message to the conversation; starts a turn. */
  message(body: unknown): Promise<{ status: number; body: unknown }>;
  /** POST /singulacomp/abort: ends the conversation's running turn. */
  abort(): Promise<{ status: number; body: unknown }>;
  /** GET /singulacomp/messages: the conversation's transcript as OpenCode stores it. */
  messages(): Promise<{ status: number; body: unknown }>;
}

export interface ProxyServerOptions {
  logger: Logger;
  port: number;
  /** @default '0.0.0.0' */
  host?: string;
  token: string;
  sessionId: string;
  /** Port OpenCode currently serves on (changes after a reload). */
  opencodePort: () => number | null;
  /**
   * Every port an OpenCode process of this daemon listens on or will (its configured port, a reload's
   * replacement): never an `app` target, whatever else listens there. @default []
   */
  reservedPorts?: () => Iterable<number>;
  handlers: ControlHandlers;
  /** Ports never proxied whoever listens on them (the API's, when it is reachable from here). */
  deniedPorts?: number[];
  /** Ports allowed beside the sandbox's own (an app started beside the daemon). @default [] */
  extraPorts?: number[];
  /**
   * Whether a process of the sandbox serves a port; `reserved`: refuse it, at the cost of a check
   * of an unused one. @default a SandboxPorts of this process's tree
   */
  sandboxPort?: (port: number, reserved: boolean) => Promise<boolean>;
}

function sendJson(res: ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
  res.end(text);
}

async function readJson(req: IncomingMessage, limitBytes = 64 * 1024): Promise<unknown> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req) {
    size += (chunk as Buffer).length;
    if (size > limitBytes) throw new Error('body too large');
    chunks.push(chunk as Buffer);
  }
  const text = Buffer.concat(chunks).toString('utf8');
  return text ? JSON.parse(text) : {};
}

/**
 * Hop-by-hop headers (RFC 9110 §7.6.1): they describe one connection, so neither side's are
 * forwarded; node:http frames each side itself (keep-alive, chunked or content-length).
 */
const HOP_BY_HOP = new Set([
  'connection',
  'keep-alive',
  'proxy-connection',
  'transfer-encoding',
  'te',
  'trailer',
  'upgrade',
]);

/** X-Forwarded-* as http-proxy's `xfwd` sets them: appended to a value already present. */
function forwardedHeaders(req: IncomingMessage, proto: 'http' | 'ws'): OutgoingHttpHeaders {
  const given = req.headers;
  const headers: OutgoingHttpHeaders = {};
  const append = (name: string, value: string): void => {
    const before = given[name];
    headers[name] = before ? `${before},${value}` : value;
  };
  const hostPort = given.host ? /:(\d+)/.exec(given.host) : null;
  append('x-forwarded-for', req.socket.remoteAddress ?? '');
  append('x-forwarded-port', hostPort ? hostPort[1]! : '80');
  append('x-forwarded-proto', proto);
  headers['x-forwarded-host'] = given['x-forwarded-host'] || given.host || '';
  return headers;
}

/** The request's headers for the upstream: without hop-by-hop ones (unless kept), with X-Forwarded-*. */
function upstreamHeaders(
  req: IncomingMessage,
  proto: 'http' | 'ws',
  keep?: Set<string>,
): OutgoingHttpHeaders {
  const headers: OutgoingHttpHeaders = {};
  const given: IncomingHttpHeaders = req.headers;
  for (const name in given) {
    if (HOP_BY_HOP.has(name) && !keep?.has(name)) continue;
    headers[name] = given[name];
  }
  return Object.assign(headers, forwardedHeaders(req, proto));
}

/** Raw response headers without hop-by-hop ones, as the flat [name, value, …] list writeHead takes. */
function downstreamHeaders(raw: string[]): string[] {
  const headers: string[] = [];
  for (let i = 0; i < raw.length; i += 2) {
    if (!HOP_BY_HOP.has(raw[i]!.toLowerCase())) headers.push(raw[i]!, raw[i + 1]!);
  }
  return headers;
}

/** A response head for a raw socket (upgrade answers): status line, then the raw headers. */
function rawHead(statusLine: string, raw: string[]): string {
  let head = statusLine;
  for (let i = 0; i < raw.length; i += 2) head += `\r\n${raw[i]}: ${raw[i + 1]}`;
  return `${head}\r\n\r\n`;
}

const UPGRADE_HEADERS = new Set(['connection', 'upgrade']);

const REASONS: Record<number, string> = {
  400: 'Bad Request',
  401: 'Unauthorized',
  403: 'Forbidden',
  404: 'Not Found',
  502: 'Bad Gateway',
  503: 'Service Unavailable',
};

export class ProxyServer {
  readonly server: Server;
  private readonly log: Logger;
  private readonly sockets = new Set<Socket>();
  private readonly verifier: UserContextVerifier;
  private readonly sandboxPort: (port: number, reserved: boolean) => Promise<boolean>;
  // Upstream keep-alive: without it every proxied request pays a fresh TCP connect to OpenCode.
  private readonly upstream = new HttpAgent({ keepAlive: true, maxSockets: 256, maxFreeSockets: 32 });

  constructor(private readonly options: ProxyServerOptions) {
    this.log = options.logger.child({ module: 'proxy' });
    this.verifier = new UserContextVerifier(options.token, options.sessionId);
    if (options.sandboxPort) this.sandboxPort = options.sandboxPort;
    else {
      const ports = new SandboxPorts();
      this.sandboxPort = (port, reserved) => ports.owns(port, reserved);
    }
    this.server = createServer((req, res) => {
      this.handle(req, res).catch((error: unknown) => {
        this.log.error({ err: (error as Error).message, url: req.url }, 'request failed');
        if (!res.headersSent) sendJson(res, 500, { error: 'internal error' });
        else res.end();
      });
    });
    this.server.on('upgrade', (req, socket, head) => this.upgrade(req, socket as Socket, head));
    this.server.on('connection', (socket) => {
      this.sockets.add(socket);
      socket.once('close', () => this.sockets.delete(socket));
    });
  }

  async listen(): Promise<number> {
    await new Promise<void>((resolve, reject) => {
      this.server.once('error', reject);
      this.server.listen(this.options.port, this.options.host ?? '0.0.0.0', () => {
        this.server.off('error', reject);
        resolve();
      });
    });
    return this.port;
  }

  get port(): number {
    return (this.server.address() as AddressInfo).port;
  }

  /** Stops accepting, lets in-flight requests finish for `graceMs`, then drops every socket. */
  async close(graceMs = 2_000): Promise<void> {
    const closed = new Promise<void>((resolve) => this.server.close(() => resolve()));
    this.server.closeIdleConnections();
    const timer = setTimeout(() => {
      for (const socket of this.sockets) socket.destroy();
    }, graceMs);
    await closed;
    clearTimeout(timer);
    this.upstream.destroy();
  }

  /** The verified claims, or the 401/403 refusal of the user-context check. */
  private authorize(
    req: IncomingMessage,
  ): { claims: UserContextClaims } | { status: 401 | 403; reason: string } {
    const verdict = this.verifier.verify(req.headers[USER_CONTEXT_HEADER]);
    return verdict.ok ? { claims: verdict.claims } : { status: verdict.status, reason: verdict.reason };
  }

  /** Ports never reached as an app: this service port, OpenCode's, and the denied ones. */
  private reserved(port: number): boolean {
    if (port === this.port || port === this.options.port) return true;
    if (this.options.deniedPorts?.includes(port)) return true;
    for (const p of this.options.reservedPorts?.() ?? []) if (p === port) return true;
    const opencode = this.options.opencodePort();
    return opencode !== null && opencode === port;
  }

  /**
   * The upstream port of a proxied request, or the error to answer. `opencode` reaches OpenCode;
   * `app` reaches the port its claims name when a process of this sandbox serves it. A reserved port
   * answers exactly as an unused one, so no caller can tell OpenCode's port from a free one.
   */
  private async target(
    req: IncomingMessage,
    claims: UserContextClaims,
  ): Promise<{ port: number } | { status: number; error: string }> {
    const raw = req.headers[TARGET_PORT_HEADER];
    if (claims.aud === 'opencode') {
      if (raw !== undefined) return { status: 400, error: 'an OpenCode request names no target port' };
      const port = this.options.opencodePort();
      return port === null ? { status: 503, error: 'OpenCode is not running' } : { port };
    }
    const port = claims.port!;
    const unreachable = { status: UNREACHABLE_PORT_STATUS, error: UNREACHABLE_PORT_MESSAGE };
    // The header is what an older daemon reads: it must name the same port as the signed claims.
    if (raw !== undefined && Number(Array.isArray(raw) ? raw[0] : raw) !== port) return unreachable;
    if (this.options.extraPorts?.includes(port) && !this.reserved(port)) return { port };
    // Only ports the sandbox's own processes serve: never a host service sharing this loopback. A
    // reserved port is checked as an unused one is, so it costs what an unused one does.
    const reserved = this.reserved(port);
    const own = await this.sandboxPort(port, reserved);
    return reserved || !own ? unreachable : { port };
  }

  /** The ports a preview or share link may never reach (GET /singulacomp/ports, with OpenCode's current one). */
  private reservedPorts(): number[] {
    const ports = new Set<number>([this.port, ...(this.options.reservedPorts?.() ?? [])]);
    const opencode = this.options.opencodePort();
    if (opencode !== null) ports.add(opencode);
    return [...ports].sort((a, b) => a - b);
  }

  private strip(req: IncomingMessage): void {
    delete req.headers[USER_CONTEXT_HEADER];
    delete req.headers[TARGET_PORT_HEADER];
  }

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const path = (req.url ?? '/').split('?')[0] ?? '/';
    // Health answers without a header; a request with one goes where its audience says (an app's
    // own /singulacomp/health included).
    if (path === '/singulacomp/health' && req.headers[USER_CONTEXT_HEADER] === undefined) {
      const { status, body } = this.options.handlers.health();
      return sendJson(res, status, body);
    }
    const verdict = this.authorize(req);
    if ('status' in verdict) return sendJson(res, verdict.status, { error: verdict.reason });
    const { claims } = verdict;

    if (claims.aud === 'control') {
      if (!path.startsWith('/singulacomp/'))
        return sendJson(res, 404, { error: 'a control call reaches only /singulacomp/*' });
      if (path === '/singulacomp/health') {
        const { status, body } = this.options.handlers.health();
        return sendJson(res, status, body);
      }
      if (path === '/singulacomp/ports' && req.method === 'GET') {
        return sendJson(res, 200, { reserved: this.reservedPorts(), opencode: this.options.opencodePort() });
      }
      if (path === '/singulacomp/refresh' && req.method === 'POST') {
        const { status, body } = await this.options.handlers.refresh();
        return sendJson(res, status, body);
      }
      if (path === '/singulacomp/reload' && req.method === 'POST') {
        let body: unknown;
        try {
          body = await readJson(req);
        } catch (error) {
          return sendJson(res, 400, { error: `bad body: ${(error as Error).message}` });
        }
        const result = await this.options.handlers.reload(body);
        return sendJson(res, result.status, result.body);
      }
      if (path === '/singulacomp/message' && req.method === 'POST') {
        let body: unknown;
        try {
          body = await readJson(req, 1024 * 1024);
        } catch (error) {
          return sendJson(res, 400, { error: `bad body: ${(error as Error).message}` });
        }
        const result = await this.options.handlers.message(body);
        return sendJson(res, result.status, result.body);
      }
      if (path === '/singulacomp/abort' && req.method === 'POST') {
        const result = await this.options.handlers.abort();
        return sendJson(res, result.status, result.body);
      }
      if (path === '/singulacomp/messages' && req.method === 'GET') {
        const result = await this.options.handlers.messages();
        return sendJson(res, result.status, result.body);
      }
      const part = /^\/singulacomp\/part\/([^/]+)$/.exec(path);
      if (part && (req.method === 'GET' || req.method === 'HEAD')) {
        const found = await this.options.handlers.part(decodeURIComponent(part[1]!));
        if (!found) return sendJson(res, 404, { error: 'no such offloaded part' });
        res.writeHead(200, {
          'content-type': found.mime,
          'content-length': found.bytes.length,
          'cache-control': 'private, max-age=31536000, immutable',
        });
        return void res.end(req.method === 'HEAD' ? undefined : found.bytes);
      }
      return sendJson(res, 404, { error: 'unknown control route' });
    }

    const target = await this.target(req, claims);
    if ('status' in target) return sendJson(res, target.status, { error: target.error });
    this.strip(req);
    this.forward(req, res, target.port);
  }

  /** Forwards one HTTP request to 127.0.0.1:`port` and pipes the answer back (streams stay streams). */
  private forward(req: IncomingMessage, res: ServerResponse, port: number): void {
    const upstream = httpRequest({
      host: '127.0.0.1',
      port,
      method: req.method,
      path: req.url,
      headers: upstreamHeaders(req, 'http'),
      agent: this.upstream,
    });
    upstream.on('response', (answer) => {
      res.writeHead(answer.statusCode ?? 502, answer.statusMessage, downstreamHeaders(answer.rawHeaders));
      answer.on('error', (error) => this.upstreamFailed(error, res));
      answer.pipe(res);
    });
    upstream.on('error', (error) => this.upstreamFailed(error, res));
    // The client went away before the answer ended (an SSE reader closing): drop the upstream too.
    res.on('close', () => {
      if (!res.writableFinished) upstream.destroy();
    });
    const length = req.headers['content-length'];
    if (req.headers['transfer-encoding'] === undefined && (length === undefined || length === '0')) {
      upstream.end();
    } else {
      req.pipe(upstream);
    }
  }

  private upstreamFailed(error: Error, res: ServerResponse): void {
    this.log.debug({ err: error.message }, 'upstream error');
    if (!res.headersSent) sendJson(res, 502, { error: 'upstream unavailable', detail: error.message });
    else res.end();
  }

  private upgrade(req: IncomingMessage, socket: Socket, head: Buffer): void {
    this.upgradeAsync(req, socket, head).catch((error: unknown) => {
      this.log.error({ err: (error as Error).message, url: req.url }, 'upgrade failed');
      socket.destroy();
    });
  }

  private async upgradeAsync(req: IncomingMessage, socket: Socket, head: Buffer): Promise<void> {
    socket.on('error', () => socket.destroy());
    const refuse = (status: number, reason: string): void => {
      const text = JSON.stringify({ error: reason });
      socket.end(
        `HTTP/1.1 ${status} ${REASONS[status] ?? 'Error'}\r\n` +
          `content-type: application/json\r\ncontent-length: ${Buffer.byteLength(text)}\r\nconnection: close\r\n\r\n${text}`,
      );
    };
    const verdict = this.authorize(req);
    if ('status' in verdict) {
      refuse(verdict.status, verdict.reason);
      return;
    }
    if (verdict.claims.aud === 'control') {
      refuse(404, 'no WebSocket control routes');
      return;
    }
    const target = await this.target(req, verdict.claims);
    if ('status' in target) {
      refuse(target.status, target.error);
      return;
    }
    this.strip(req);
    this.forwardUpgrade(req, socket, head, target.port);
  }

  /** A WebSocket (any Upgrade) to 127.0.0.1:`port`: the upstream's 101 and then both sockets piped. */
  private forwardUpgrade(req: IncomingMessage, socket: Socket, head: Buffer, port: number): void {
    socket.setTimeout(0);
    socket.setNoDelay(true);
    socket.setKeepAlive(true, 0);
    if (head.length > 0) socket.unshift(head);
    const upstream = httpRequest({
      host: '127.0.0.1',
      port,
      method: req.method,
      path: req.url,
      headers: upstreamHeaders(req, 'ws', UPGRADE_HEADERS),
      agent: false,
    });
    const failed = (error: Error): void => {
      this.log.debug({ err: error.message }, 'upstream error');
      socket.destroy();
    };
    upstream.on('error', failed);
    upstream.on('response', (answer) => {
      // No upgrade: the upstream's answer goes back as it is.
      if ((answer as IncomingMessage & { upgrade?: boolean }).upgrade) return;
      socket.write(
        rawHead(`HTTP/${answer.httpVersion} ${answer.statusCode} ${answer.statusMessage}`, answer.rawHeaders),
      );
      answer.pipe(socket);
    });
    upstream.on('upgrade', (answer: IncomingMessage, upstreamSocket: Socket, upstreamHead: Buffer) => {
      upstreamSocket.on('error', failed);
      upstreamSocket.on('close', () => socket.destroy());
      socket.on('error', () => upstreamSocket.end());
      socket.on('close', () => upstreamSocket.destroy());
      upstreamSocket.setTimeout(0);
      upstreamSocket.setNoDelay(true);
      upstreamSocket.setKeepAlive(true, 0);
      if (upstreamHead.length > 0) upstreamSocket.unshift(upstreamHead);
      socket.write(rawHead('HTTP/1.1 101 Switching Protocols', answer.rawHeaders));
      upstreamSocket.pipe(socket).pipe(upstreamSocket);
    });
    upstream.end();
  }
}
