// The daemon pipe (server/fast-paths/daemon-pipe.ts) forwards HTTP requests to a daemon as
// http-proxy-3 does with the daemon proxy's options. Two fronts, one per path, forward the same raw
// requests to one recording daemon; what the daemon received and the bytes each caller got must be
// the same (the signed user context aside, which names its signing second).
import { type IncomingMessage, type Server, type ServerResponse, createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { connect } from 'node:net';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { USER_CONTEXT_HEADER } from '../../contract/user-context';
import { encrypt } from '../../resolvers/auth/crypto';
import { createDaemonClient } from '../../resolvers/daemon/daemon-client';
import type { ProxyGrant } from '../../resolvers/gateway/access';
import { createDaemonProxy } from '../../server/daemon-proxy';
import { createLogger } from '../../server/logger';

interface Received {
  method: string;
  url: string;
  headers: Record<string, string | string[] | undefined>;
  body: string;
}

const DATE = 'Sun, 06 Dec 2026 08:00:00 GMT';

/** The daemon's answers, by path. */
function answer(req: IncomingMessage, res: ServerResponse, received: Received): void {
  const path = (req.url ?? '/').split('?')[0];
  res.setHeader('date', DATE);
  if (path === '/framed') {
    res.writeHead(200, {
      'content-type': 'text/html',
      'x-frame-options': 'DENY',
      'content-security-policy': "default-src 'self'; frame-ancestors 'none'",
      'service-worker-allowed': '/',
      'set-cookie': ['a=1; Path=/', 'b=2; HttpOnly'],
      'keep-alive': 'timeout=5',
    });
    res.end('<p>framed</p>');
  } else if (path === '/stream') {
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    res.write('data: one\n\n');
    setTimeout(() => res.end('data: two\n\n'), 20);
  } else if (path === '/missing') {
    res.writeHead(404, 'Nothing Here', { 'content-type': 'text/plain', 'content-length': '7' });
    res.end('missing');
  } else if (path === '/moved') {
    res.writeHead(302, { location: 'http://127.0.0.1:1/elsewhere', connection: 'close' });
    res.end();
  } else {
    const text = JSON.stringify(received);
    res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
    res.end(req.method === 'HEAD' ? undefined : text);
  }
}

async function listen(server: Server): Promise<number> {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return (server.address() as AddressInfo).port;
}

/** One raw request on its own connection; the answer's bytes until the server closes it. */
function raw(port: number, text: string, until?: (got: string) => boolean): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1', () => socket.write(text));
    let got = '';
    socket.on('data', (d: Buffer) => {
      got += d.toString('latin1');
      if (until?.(got)) socket.destroy();
    });
    socket.on('close', () => resolve(got));
    socket.on('error', reject);
  });
}

describe('the daemon pipe', () => {
  const received: Received[] = [];
  const servers: Server[] = [];
  const key = Buffer.alloc(32, 7);
  let daemonPort = 0;
  const fronts: Record<'library' | 'pipe', number> = { library: 0, pipe: 0 };

  function front(pipe: boolean, target: () => string): Server {
    const daemon = createDaemonClient({ encryptionKey: key });
    const proxy = createDaemonProxy({ daemon, logger: createLogger('silent'), pipe });
    return createServer((req, res) => {
      const grant: ProxyGrant = {
        target: {
          sessionId: 'session-1',
          serviceUrl: target(),
          sandboxTokenEnc: encrypt(key, 'sandbox-token'),
        },
        userId: 'user-1',
        port: 3000,
      };
      proxy.web(req, res, grant, req.url ?? '/', {
        allowFraming: true,
        dropCookies: ['singulacomp_preview'],
      });
    });
  }

  let unreachable = false;
  beforeAll(async () => {
    const daemon = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        const { [USER_CONTEXT_HEADER]: signed, ...headers } = req.headers;
        const entry = {
          method: req.method ?? '',
          url: req.url ?? '',
          headers: { ...headers, signed: signed ? 'present' : 'absent' },
          body: Buffer.concat(chunks).toString(),
        };
        received.push(entry);
        answer(req, res, entry);
      });
    });
    servers.push(daemon);
    daemonPort = await listen(daemon);
    const target = () => `http://127.0.0.1:${unreachable ? 1 : daemonPort}`;
    for (const kind of ['library', 'pipe'] as const) {
      const server = front(kind === 'pipe', target);
      servers.push(server);
      fronts[kind] = await listen(server);
    }
  });
  afterAll(async () => {
    for (const server of servers) {
      server.closeAllConnections();
      server.close();
    }
  });

  /** The request sent through both fronts: what the daemon saw and what the caller got, each way. */
  async function both(text: string, until?: (got: string) => boolean) {
    const out = {} as Record<'library' | 'pipe', { daemon: Received | null; answer: string }>;
    for (const kind of ['library', 'pipe'] as const) {
      const before = received.length;
      const answerText = await raw(fronts[kind], text, until);
      // The date of an answer the front wrote itself (a 502) is the front's clock.
      out[kind] = {
        daemon: received.length > before ? received.at(-1)! : null,
        answer: answerText.replace(/^Date: .*\r\n/im, 'Date: (now)\r\n'),
      };
    }
    return out;
  }

  const host = 'Host: p3000-0f7c7f2e-1d1b-4c55-9f4e-5d8c2a3b4c5d.localhost:4000\r\n';
  const cases: [string, string][] = [
    [
      'a GET with our cookie and the app’s',
      `GET /echo?x=1&y HTTP/1.1\r\n${host}Cookie: singulacomp_preview=abc; app=1\r\nAuthorization: Bearer t\r\nConnection: close\r\n\r\n`,
    ],
    [
      'a POST with a body',
      `POST /echo HTTP/1.1\r\n${host}Content-Type: application/json\r\nContent-Length: 11\r\nConnection: close\r\n\r\n{"a":"b c"}`,
    ],
    [
      'a chunked POST',
      `POST /echo HTTP/1.1\r\n${host}Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n3\r\nabc\r\n0\r\n\r\n`,
    ],
    ['a DELETE without a body', `DELETE /echo HTTP/1.1\r\n${host}Connection: close\r\n\r\n`],
    ['an OPTIONS', `OPTIONS /echo HTTP/1.1\r\n${host}Connection: close\r\n\r\n`],
    ['a HEAD', `HEAD /echo HTTP/1.1\r\n${host}Connection: close\r\n\r\n`],
    [
      'a path with dots and an encoded character',
      `GET /a/../b/./c%20d/?q=%2F HTTP/1.1\r\n${host}Connection: close\r\n\r\n`,
    ],
    ['a path that begins with two slashes', `GET //echo/x HTTP/1.1\r\n${host}Connection: close\r\n\r\n`],
    [
      'forwarded headers already present',
      `GET /echo HTTP/1.1\r\n${host}X-Forwarded-For: 10.0.0.1\r\nX-Forwarded-Host: app.example\r\nX-Forwarded-Proto: https\r\nTrailer: x\r\nConnection: close\r\n\r\n`,
    ],
    ['an HTTP/1.0 request', `GET /echo HTTP/1.0\r\n${host}\r\n`],
    ['an answer meant for another frame', `GET /framed HTTP/1.1\r\n${host}Connection: close\r\n\r\n`],
    ['a status with its own reason', `GET /missing HTTP/1.1\r\n${host}Connection: close\r\n\r\n`],
    ['a redirect that closes the connection', `GET /moved HTTP/1.1\r\n${host}Connection: close\r\n\r\n`],
    ['a streamed answer', `GET /stream HTTP/1.1\r\n${host}Connection: close\r\n\r\n`],
  ];

  test.each(cases)('%s reaches the daemon and comes back the same both ways', async (_name, text) => {
    const { library, pipe } = await both(text);
    expect(library.daemon).not.toBeNull();
    expect(library.answer).toMatch(/^HTTP\/1\.[01] \d{3} /);
    expect(pipe.daemon).toEqual(library.daemon);
    expect(pipe.answer).toBe(library.answer);
  });

  test('the forwarded request carries the X-Forwarded headers and the daemon’s Host', async () => {
    const { pipe } = await both(`GET /echo HTTP/1.1\r\n${host}Connection: close\r\n\r\n`);
    expect(pipe.daemon!.headers).toMatchObject({
      host: `127.0.0.1:${daemonPort}`,
      'x-forwarded-for': '127.0.0.1',
      'x-forwarded-port': '4000',
      'x-forwarded-proto': 'http',
      'x-forwarded-host': 'p3000-0f7c7f2e-1d1b-4c55-9f4e-5d8c2a3b4c5d.localhost:4000',
      signed: 'present',
    });
  });

  test('a kept-alive caller gets the same answers on one connection', async () => {
    const twice = `GET /echo HTTP/1.1\r\n${host}\r\nGET /framed HTTP/1.1\r\n${host}\r\n`;
    const { library, pipe } = await both(twice, (got) => got.includes('<p>framed</p>'));
    expect(library.answer.match(/HTTP\/1\.1 200 OK/g)).toHaveLength(2);
    expect(pipe.answer).toBe(library.answer);
  });

  test('an unreachable daemon is the same 502 both ways', async () => {
    unreachable = true;
    try {
      const { library, pipe } = await both(`GET /echo HTTP/1.1\r\n${host}Connection: close\r\n\r\n`);
      expect(library.daemon).toBeNull();
      expect(library.answer).toMatch(/^HTTP\/1\.1 502 Bad Gateway\r\n/);
      expect(library.answer).toContain('The sandbox could not be reached');
      expect(pipe.answer).toBe(library.answer);
    } finally {
      unreachable = false;
    }
  });
});
