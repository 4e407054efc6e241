// Real git repositories and a real smart-HTTP git server for the git service tests.
import { spawn } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { test as base } from 'vitest';
import { createTestRepo, GIT_ENV, git } from '../support/git';

export { git, GIT_ENV, refValue } from '../support/git';

export interface Upstream {
  /** Directory of the repository (the .git-less work tree, or the bare directory). */
  dir: string;
  /** What the service is given: a plain path for the work tree, a file:// URL for the bare one. */
  url: string;
  /** `main` history: first ← second (tip). */
  first: string;
  second: string;
  /** Commit `feature` points to (on top of `first`). */
  feature: string;
  /** Annotated tag `v1` on `first`, lightweight tag `light` on `second`. */
  tagObject: string;
}

/** Builds the standard upstream: main (2 commits), feature branch, annotated and lightweight tags. */
export function makeUpstream(root: string, kind: 'worktree' | 'bare'): Upstream {
  const repo = createTestRepo(null, { root, upstream: false });
  const work = repo.workdir;
  const first = repo.commit({ 'README.md': 'first\n' }, 'first');
  repo.git('tag', '-a', 'v1', '-m', 'version 1');
  const tagObject = repo.git('rev-parse', 'refs/tags/v1');
  repo.git('checkout', '--quiet', '-b', 'feature');
  const feature = repo.commit({ 'feature.txt': 'feature\n' }, 'feature');
  repo.git('checkout', '--quiet', 'main');
  const second = repo.commit({ 'README.md': 'second\n', 'dir/nested.json': '{"nested":true}\n' }, 'second');
  repo.git('tag', 'light');
  if (kind === 'worktree') return { dir: work, url: work, first, second, feature, tagObject };
  const bare = join(root, 'bare.git');
  git(root, 'clone', '--quiet', '--bare', work, bare);
  return { dir: bare, url: pathToFileURL(bare).href, first, second, feature, tagObject };
}

/** All files below `dir` whose content contains `needle` (to prove a secret never reached disk). */
export function filesContaining(dir: string, needle: string): string[] {
  const hits: string[] = [];
  const walk = (current: string) => {
    for (const entry of readdirSync(current)) {
      const path = join(current, entry);
      const stats = statSync(path);
      if (stats.isDirectory()) walk(path);
      else if (stats.isFile() && readFileSync(path).includes(needle)) hits.push(path);
    }
  };
  walk(dir);
  return hits;
}

/** A temporary directory, removed after the test; its path is printed when the test fails. */
export const test = base.extend<{ tmp: string }>({
  // biome-ignore lint/correctness/noEmptyPattern: vitest fixtures take their dependencies by destructuring
  tmp: async ({}, use) => {
    const dir = mkdtempSync(join(tmpdir(), 'git-service-'));
    try {
      await use(dir);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  },
});

export interface GitHttpServer {
  /** http://127.0.0.1:<port>/ — append the repository's directory name. */
  baseUrl: string;
  /** Authorization headers received, in order. */
  authorizations: Array<string | undefined>;
  close(): Promise<void>;
}

/**
 * Serves the bare repositories under `projectRoot` over smart HTTP through `git http-backend`,
 * answering 401 unless the request carries `Authorization: <expectedAuthorization>` (undefined: a
 * public repository, no header). Listens on `host` (a container network's gateway, for clients in
 * containers). @default host 127.0.0.1
 */
export async function startGitHttpServer(
  projectRoot: string,
  expectedAuthorization: string | undefined,
  host = '127.0.0.1',
): Promise<GitHttpServer> {
  const authorizations: Array<string | undefined> = [];
  const server: Server = createServer((req: IncomingMessage, res) => {
    authorizations.push(req.headers.authorization);
    if (req.headers.authorization !== expectedAuthorization) {
      res.writeHead(401, { 'WWW-Authenticate': 'Basic realm="git"' });
      res.end();
      return;
    }
    const url = new URL(req.url ?? '/', 'http://localhost');
    const backend = spawn('git', ['http-backend'], {
      env: {
        ...GIT_ENV,
        GIT_PROJECT_ROOT: projectRoot,
        GIT_HTTP_EXPORT_ALL: '1',
        PATH_INFO: decodeURIComponent(url.pathname),
        QUERY_STRING: url.search.slice(1),
        REQUEST_METHOD: req.method ?? 'GET',
        CONTENT_TYPE: req.headers['content-type'] ?? '',
        HTTP_CONTENT_ENCODING: req.headers['content-encoding'] ?? '',
        GIT_PROTOCOL: String(req.headers['git-protocol'] ?? ''),
        REMOTE_USER: 'tester',
        REMOTE_ADDR: '127.0.0.1',
      },
    });
    req.pipe(backend.stdin);
    const chunks: Buffer[] = [];
    backend.stdout.on('data', (chunk: Buffer) => chunks.push(chunk));
    backend.on('close', () => {
      const output = Buffer.concat(chunks);
      const split = output.indexOf('\r\n\r\n');
      const head = output.subarray(0, split).toString('utf8');
      let status = 200;
      const headers: Record<string, string> = {};
      for (const line of head.split('\r\n')) {
        const colon = line.indexOf(':');
        const name = line.slice(0, colon).trim();
        const value = line.slice(colon + 1).trim();
        if (name.toLowerCase() === 'status') status = Number.parseInt(value, 10);
        else if (name) headers[name] = value;
      }
      res.writeHead(status, headers);
      res.end(output.subarray(split + 4));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, host, resolve));
  const { port } = server.address() as AddressInfo;
  return {
    baseUrl: `http://${host}:${port}/`,
    authorizations,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}

/** A TCP port on 127.0.0.1 that nothing listens on. */
export async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}
