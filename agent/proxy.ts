// R-AG-2: the daemon's HTTP surface on SINGULACOMP_SERVICE_PORT — /singulacomp/* control routes and
// a reverse proxy (HTTP and WebSocket) to OpenCode or to any other local port, behind the
// X-SingulaComp-User-Context header.
import {
  Agent as HttpAgent,
  createServer,
  type IncomingMessage,
  type Server,
  type ServerResponse,
} from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import httpProxy from 'http-proxy';
import type { Logger } from './logger';
import { USER_CONTEXT_HEADER, verifyUserContext } from '../contract/user-context';
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

export class ProxyServer {
  readonly server: Server;
  private readonly proxy: httpProxy;
  private readonly log: Logger;
  private readonly sockets = new Set<Socket>();
  // Upstream keep-alive: without it every proxied request pays a fresh TCP connect to OpenCode.
  private readonly upstream = new HttpAgent({ keepAlive: true, maxSockets: 256, maxFreeSockets: 32 });

  constructor(private readonly options: ProxyServerOptions) {
    this.log = options.logger.child({ module: 'proxy' });
    this.proxy = httpProxy.createProxyServer({ xfwd: true, ws: true, proxyTimeout: 0 });
    this.proxy.on('error', (error, _req, resOrSocket) => {
      this.log.debug({ err: error.message }, 'upstream error');
      if (resOrSocket && 'writeHead' in resOrSocket) {
        const res = resOrSocket as ServerResponse;
        if (!res.headersSent) sendJson(res, 502, { error: 'upstream unavailable', detail: error.message });
        else res.end();
      } else {
        (resOrSocket as Socket | undefined)?.destroy();
      }
    });
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
    this.proxy.close();
    this.upstream.destroy();
  }

  /** 401/403 result of the user-context check, or null when the request may pass. */
  private authorize(req: IncomingMessage): { status: 401 | 403; reason: string } | null {
    const verdict = verifyUserContext(
      req.headers[USER_CONTEXT_HEADER],
      this.options.token,
      this.options.sessionId,
    );
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
    this.proxy.web(req, res, { target: `http://127.0.0.1:${target.port}`, agent: this.upstream });
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
    this.proxy.ws(req, socket, head, { target: `ws://127.0.0.1:${target.port}` });
  }
}
