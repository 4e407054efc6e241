// The floor of any HTTP gateway on this machine: a bare node:http reverse proxy (no auth, no policy,
// no body handling; kept-alive upstream connections). bench/session-gateway.ts puts one in the
// server's process in front of the stub LLM (a completion then takes the same two extra hops
// between processes as through the server), and for the preview two in a row, the second in a
// process of its own as the daemon is, in front of the app. What they add over a direct call is
// the hops' own cost: waking two more processes on each request's way there and back.
//
// Forked with a target URL, it sends {ready: url} and serves until it is disconnected.
import { fork } from 'node:child_process';
import { Agent, createServer, request as httpRequest } from 'node:http';
import type { AddressInfo } from 'node:net';
import { pathToFileURL } from 'node:url';
import { childExecArgv } from './harness';

export interface BareProxy {
  url: string;
  close(): void;
}

/** A bare reverse proxy to `target` (an origin, or an origin and a path prefix) on a free port. */
export async function startBareProxy(target: string): Promise<BareProxy> {
  const to = new URL(target);
  const prefix = to.pathname.replace(/\/+$/, '');
  const agent = new Agent({ keepAlive: true });
  const server = createServer((req, res) => {
    const headers = { ...req.headers, host: to.host };
    const up = httpRequest(
      {
        hostname: to.hostname,
        port: to.port,
        path: `${prefix}${req.url}`,
        method: req.method,
        headers,
        agent,
      },
      (answer) => {
        res.writeHead(answer.statusCode ?? 502, answer.headers);
        answer.pipe(res);
      },
    );
    up.on('error', () => res.destroy());
    req.pipe(up);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    close: () => {
      agent.destroy();
      server.closeAllConnections();
      server.close();
    },
  };
}

/** startBareProxy in a process of its own. */
export function forkBareProxy(target: string): Promise<BareProxy> {
  const child = fork(import.meta.filename, [target], {
    execArgv: childExecArgv(),
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  return new Promise((resolve, reject) => {
    child.once('message', (message: { ready: string }) =>
      resolve({ url: message.ready, close: () => child.kill() }),
    );
    child.once('exit', (code) => reject(new Error(`the bare proxy exited with ${code}`)));
  });
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href && process.send) {
  const target = process.argv[2];
  if (!target) process.exit(2);
  const proxy = await startBareProxy(target);
  process.send({ ready: proxy.url });
  process.on('disconnect', () => process.exit(0));
}
