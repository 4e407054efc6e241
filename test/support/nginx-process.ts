// A real nginx (the Debian package) in front of server processes, configured with the shipped
// deploy/nginx/http.conf and site.conf: in the foreground as the test's child, on a free port, its
// config and temporary files in a directory of its own.
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort } from '../../contract/ports';
import { testRunEnv } from './test-run';
import { waitFor } from './wait';
import { collectOutput } from './child-output';

const DEPLOY = new URL('../../deploy/nginx/', import.meta.url).pathname;

export interface NginxProcess {
  port: number;
  url: string;
  graphqlUrl: string;
  wsUrl: string;
  /** nginx's stderr so far (its error log). */
  output(): string;
  stop(): Promise<void>;
}

function config(dir: string, port: number, upstreams: number[]): string {
  const temp = (name: string) => join(dir, name);
  return `daemon off;
master_process on;
worker_processes 1;
${process.getuid?.() === 0 ? 'user root;' : ''}
pid ${join(dir, 'nginx.pid')};
error_log stderr warn;
events { worker_connections 1024; }
http {
  access_log off;
  client_body_temp_path ${temp('body')};
  proxy_temp_path ${temp('proxy')};
  fastcgi_temp_path ${temp('fastcgi')};
  uwsgi_temp_path ${temp('uwsgi')};
  scgi_temp_path ${temp('scgi')};
  include ${join(DEPLOY, 'http.conf')};
  upstream singulacomp {
${upstreams.map((p) => `    server 127.0.0.1:${p} max_fails=0;`).join('\n')}
    keepalive 16;
  }
  server {
    listen 127.0.0.1:${port};
    # Answered by nginx itself: the start waits for it.
    location = /__nginx { return 200 "nginx"; }
    include ${join(DEPLOY, 'site.conf')};
  }
}
`;
}

/** Starts nginx in front of the replicas on `upstreams` (ports on 127.0.0.1). */
export async function startNginx(upstreams: number[]): Promise<NginxProcess> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await startOnce(upstreams);
    } catch (error) {
      // Another process took the port between our pick and nginx's bind.
      if (/Address already in use/.test((error as Error).message) && attempt < 5) continue;
      throw error;
    }
  }
}

async function startOnce(upstreams: number[]): Promise<NginxProcess> {
  const dir = mkdtempSync(join(tmpdir(), 'sc-nginx-'));
  for (const name of ['body', 'proxy', 'fastcgi', 'uwsgi', 'scgi']) mkdirSync(join(dir, name));
  const port = await freePort();
  const file = join(dir, 'nginx.conf');
  writeFileSync(file, config(dir, port, upstreams));
  const child: ChildProcess = spawn('nginx', ['-p', dir, '-c', file, '-e', 'stderr'], {
    cwd: dir,
    env: { PATH: process.env.PATH ?? '/usr/sbin:/usr/bin:/bin', ...testRunEnv() },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const output = collectOutput(child);
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const url = `http://127.0.0.1:${port}`;
  const serving = async () => (await (await fetch(`${url}/__nginx`)).text()) === 'nginx';
  const stop = async () => {
    if (child.exitCode === null && child.signalCode === null) {
      // SIGQUIT: graceful; the workers close their connections and exit with the master.
      child.kill('SIGQUIT');
      const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
      await exited;
      clearTimeout(timer);
    }
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    await waitFor(async () => child.exitCode !== null || (await serving()), {
      timeoutMs: 20_000,
      what: 'nginx to serve',
    });
    if (child.exitCode !== null) throw new Error(`nginx exited (${child.exitCode}):\n${output()}`);
  } catch (error) {
    await stop();
    throw new Error(`${(error as Error).message}\n${output()}`);
  }
  return {
    port,
    url,
    graphqlUrl: `${url}/graphql`,
    wsUrl: `ws://127.0.0.1:${port}/graphql`,
    output,
    stop,
  };
}
