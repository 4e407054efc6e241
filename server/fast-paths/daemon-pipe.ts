// An HTTP request to a sandbox daemon forwarded as http-proxy-3 forwards it with the options the
// daemon proxy gives it ({ target, changeOrigin, xfwd, agent, proxyTimeout: 0 }), without its
// per-request work for options we never set: the option merge, the target URL parsed again, the
// outgoing setup's option copies, its pass lists and events. WebSocket upgrades stay with the
// library. test/core/daemon-pipe.test.ts sends the same requests both ways and compares what the
// daemon received and what the caller got.
import {
  type Agent,
  type IncomingMessage,
  type OutgoingHttpHeaders,
  type ServerResponse,
  request as httpRequest,
} from 'node:http';
import { TLSSocket } from 'node:tls';

/** The daemon's base URL, parsed once per value (the same few daemons serve every request). */
interface Target {
  hostname: string;
  port: number;
  /** `host:port`, the Host header changeOrigin sets. */
  host: string;
}

export interface DaemonPipeOptions {
  agent: Agent;
  /** What http-proxy-3's `proxyRes` listeners do, before the answer's head is written. */
  onResponse(answer: IncomingMessage, req: IncomingMessage, res: ServerResponse): void;
  /** What its `error` listener does with a failed request (daemon unreachable, connection reset). */
  onError(error: Error, req: IncomingMessage, res: ServerResponse): void;
}

/** http-proxy-3's getPath + urlJoin under a target whose path is `/`: the URL's path and query. */
function outgoingPath(url: string): string {
  if (url === '' || url.startsWith('?')) return url.length > 1 ? `/${url}` : '/';
  const u = new URL(url.startsWith('//') ? `http://base.invalid${url}` : url, 'http://base.invalid');
  const query = u.search.slice(1);
  return query ? `${u.pathname}?${query}` : u.pathname;
}

function forwardedFor(req: IncomingMessage, name: string, value: string | undefined): void {
  const key = `x-forwarded-${name}`;
  const present = req.headers[key];
  req.headers[key] = `${present || ''}${present ? ',' : ''}${value}`;
}

export function createDaemonPipe(options: DaemonPipeOptions) {
  const targets = new Map<string, Target>();

  function targetOf(base: string): Target {
    let target = targets.get(base);
    if (!target) {
      const url = new URL(base);
      // The proxy's targets always name their port (a daemon's service URL); 80 otherwise.
      const port = Number(url.port) || 80;
      target = { hostname: url.hostname.replace(/^\[|\]$/g, ''), port, host: url.host };
      if (targets.size >= 1_024) targets.delete(targets.keys().next().value as string);
      targets.set(base, target);
    }
    return target;
  }

  /** Forwards `req` to the daemon at `base` and pipes its answer to `res`. */
  return function forward(req: IncomingMessage, res: ServerResponse, base: string): void {
    const target = targetOf(base);
    // deleteLength
    if ((req.method === 'DELETE' || req.method === 'OPTIONS') && !req.headers['content-length']) {
      req.headers['content-length'] = '0';
      delete req.headers['transfer-encoding'];
    }
    // XHeaders (xfwd)
    const encrypted = req.socket instanceof TLSSocket && req.socket.encrypted;
    const hostHeader = req.headers.host;
    const port = hostHeader?.match(/:(\d+)/)?.[1] ?? (encrypted ? '443' : '80');
    forwardedFor(req, 'for', req.socket.remoteAddress);
    forwardedFor(req, 'port', port);
    forwardedFor(req, 'proto', encrypted ? 'https' : 'http');
    req.headers['x-forwarded-host'] = req.headers['x-forwarded-host'] || hostHeader || '';
    // setupOutgoing: the caller's headers less Trailer, the target's Host (changeOrigin).
    const headers: OutgoingHttpHeaders = { ...req.headers };
    delete headers.trailer;
    headers.host = target.host;
    const proxyReq = httpRequest({
      hostname: target.hostname,
      port: target.port,
      method: req.method,
      path: outgoingPath(req.url ?? ''),
      headers,
      agent: options.agent,
    });
    res.on('close', () => {
      if (!res.writableFinished) proxyReq.destroy();
    });
    const failed = (error: Error & { code?: string }) => {
      if (req.socket.destroyed && error.code === 'ECONNRESET') {
        proxyReq.destroy();
        return;
      }
      options.onError(error, req, res);
    };
    req.on('error', failed);
    proxyReq.on('error', failed);
    req.pipe(proxyReq);
    proxyReq.on('response', (answer) => {
      options.onResponse(answer, req, res);
      if (!res.headersSent) {
        // removeChunked, setConnection, writeHeaders, writeStatusCode
        delete answer.headers['transfer-encoding'];
        if (req.httpVersion === '1.0') answer.headers.connection = req.headers.connection || 'close';
        else if (!answer.headers.connection)
          answer.headers.connection = req.headers.connection || 'keep-alive';
        for (const key in answer.headers) {
          const value = answer.headers[key];
          if (value !== undefined) res.setHeader(key.trim(), value);
        }
        res.statusCode = answer.statusCode!;
        if (answer.statusMessage && req.httpVersionMajor === 1) res.statusMessage = answer.statusMessage;
      }
      if (!res.writableEnded) answer.pipe(res);
    });
  };
}
