// R-AG-2: the daemon's HTTP surface on SINGULACOMP_SERVICE_PORT — /singulacomp/* control routes and
// a reverse proxy (HTTP and WebSocket) to OpenCode or to any other local port, behind the
// X-SingulaComp-User-Context header. The proxy is a plain node:http pipe (request in, upstream
// request out over a keep-alive pool, response piped back), the same forwarding http-proxy did
// with `xfwd` (X-Forwarded-For/-Port/-Proto/-Host) at a fraction of its per-request work.
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
import { USER_CONTEXT_HEADER, UserContextVerifier } from '../contract/user-context';
import type { Logger } from './logger';
import { sandboxListeningPorts } from './sandbox-ports';

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
  handlers: ControlHandlers;
  /** Ports never proxied whoever listens on them (the API's, when it is reachable from here). */
  deniedPorts?: number[];
  /** Ports allowed beside the sandbox's own (an app started beside the daemon). @default [] */
  extraPorts?: number[];
  /** Ports the sandbox's own processes listen on. @default sandboxListeningPorts() */
  sandboxPorts?: () => Promise<Set<number>>;
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

export class ProxyServer {
  readonly server: Server;
  private readonly log: Logger;
  private readonly sockets = new Set<Socket>();
  private readonly verifier: UserContextVerifier;
  // Upstream keep-alive: without it every proxied request pays a fresh TCP connect to OpenCode.
  private readonly upstream = new HttpAgent({ keepAlive: true, maxSockets: 256, maxFreeSockets: 32 });

  constructor(private readonly options: ProxyServerOptions) {
    this.log = options.logger.child({ module: 'proxy' });
    this.verifier = new UserContextVerifier(options.token, options.sessionId);
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

  /** 401/403 result of the user-context check, or null when the request may pass. */
  private authorize(req: IncomingMessage): { status: 401 | 403; reason: string } | null {
    const verdict = this.verifier.verify(req.headers[USER_CONTEXT_HEADER]);
    return verdict.ok ? null : { status: verdict.status, reason: verdict.reason };
  }

  /** The upstream port, or an error status for a bad target header. */
  private async target(req: IncomingMessage): Promise<{ port: number } | { status: number; error: string }> {
    const raw = req.headers[TARGET_PORT_HEADER];
    if (raw === undefined) {
      const port = this.options.opencodePort();
      return port === null ? { status: 503, error: 'OpenCode is not running' } : { port };
    }
    const port = Number(Array.isArray(raw) ? raw[0] : raw);
    if (!Number.isInteger(port) || port < 1 || port > 65_535)
      return { status: 400, error: 'bad target port' };
    if (port === this.port || port === this.options.port) {
      return { status: 403, error: 'the service port cannot be proxied' };
    }
    if (this.options.deniedPorts?.includes(port))
      return { status: 403, error: 'that port cannot be proxied' };
    if (this.options.extraPorts?.includes(port)) return { port };
    // Only ports the sandbox's own processes serve: never a host service sharing this loopback.
    const own = await (this.options.sandboxPorts ?? sandboxListeningPorts)();
    if (!own.has(port)) return { status: 403, error: 'no process of this sandbox listens on that port' };
    return { port };
  }

  private strip(req: IncomingMessage): void {
    delete req.headers[USER_CONTEXT_HEADER];
    delete req.headers[TARGET_PORT_HEADER];
  }

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const path = (req.url ?? '/').split('?')[0] ?? '/';
    if (path === '/singulacomp/health') {
      const { status, body } = this.options.handlers.health();
      return sendJson(res, status, body);
    }
    const denied = this.authorize(req);
    if (denied) return sendJson(res, denied.status, { error: denied.reason });

    if (path.startsWith('/singulacomp/')) {
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

    const target = await this.target(req);
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
        `HTTP/1.1 ${status} ${status === 401 ? 'Unauthorized' : status === 403 ? 'Forbidden' : 'Error'}\r\n` +
          `content-type: application/json\r\ncontent-length: ${Buffer.byteLength(text)}\r\nconnection: close\r\n\r\n${text}`,
      );
    };
    const denied = this.authorize(req);
    if (denied) {
      refuse(denied.status, denied.reason);
      return;
    }
    if ((req.url ?? '').startsWith('/singulacomp/')) {
      refuse(404, 'no WebSocket control routes');
      return;
    }
    const target = await this.target(req);
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
