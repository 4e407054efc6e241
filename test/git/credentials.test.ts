import { readFileSync } from 'node:fs';
import { type AddressInfo, createServer, type Socket } from 'node:net';
import { join } from 'node:path';
import { describe, expect } from 'vitest';
import { createGitService, GitRepositoryUnreachableError } from '../../resolvers/git/git';
import {
  closedPort,
  filesContaining,
  git,
  makeUpstream,
  refValue,
  startGitHttpServer,
  test,
} from './helpers';

const TOKEN = 'ghs_s3cretT0kenValue0123456789';
const basicOf = (userPass: string) => Buffer.from(userPass).toString('base64');
const EXPECTED_AUTH = `Basic ${basicOf(`x-access-token:${TOKEN}`)}`;

/** Every form in which the token could leak. */
function assertNoSecret(text: string, secret = TOKEN): void {
  expect(text).not.toContain(secret);
  expect(text).not.toContain(basicOf(`x-access-token:${secret}`));
}

describe('an unreachable https upstream', () => {
  test('fails with GitRepositoryUnreachableError whose message never contains the credential', async ({
    tmp,
  }) => {
    const port = await closedPort();
    const service = createGitService({ cacheDir: join(tmp, 'cache'), timeoutMs: 20_000 });
    const repos = [
      { url: `https://127.0.0.1:${port}/org/repo.git`, credential: TOKEN },
      { url: `https://x-access-token:${TOKEN}@127.0.0.1:${port}/org/repo.git` },
      { url: `https://${TOKEN}@127.0.0.1:${port}/org/repo.git` },
    ];
    for (const repo of repos) {
      const attempts: Array<() => Promise<unknown>> = [
        () => service.resolveRef(repo, 'main'),
        () => service.cutBranch(repo, 'main', 'session'),
        () => service.branchExists(repo, 'session'),
        () => service.readFileAtRef(repo, 'main', 'README.md'),
        () => service.cloneWorkspace(repo, 'session', join(tmp, 'ws')),
      ];
      for (const attempt of attempts) {
        const error = await attempt().catch((caught: unknown) => caught);
        expect(error).toBeInstanceOf(GitRepositoryUnreachableError);
        const unreachable = error as GitRepositoryUnreachableError;
        expect(unreachable.message).toContain(`127.0.0.1:${port}/org/repo.git`);
        expect(unreachable.message).toMatch(/connection failed.*Check the host and port/);
        assertNoSecret(unreachable.message);
        assertNoSecret(JSON.stringify(unreachable));
        assertNoSecret(String(unreachable.stack));
      }
    }
    expect(filesContaining(tmp, TOKEN)).toEqual([]);
  });
});

describe('an upstream that accepts connections but never answers', () => {
  test('is cut off after timeoutMs and reported as unreachable without the credential', async ({ tmp }) => {
    const sockets: Socket[] = [];
    const server = createServer((socket) => sockets.push(socket));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const { port } = server.address() as AddressInfo;
    try {
      const service = createGitService({ cacheDir: join(tmp, 'cache'), timeoutMs: 1_500 });
      const started = Date.now();
      const error = await service
        .resolveRef({ url: `http://127.0.0.1:${port}/org/repo.git`, credential: TOKEN }, 'main')
        .catch((caught: unknown) => caught);
      expect(error).toBeInstanceOf(GitRepositoryUnreachableError);
      expect((error as Error).message).toMatch(/timed out after 1500 ms/);
      assertNoSecret((error as Error).message);
      expect(Date.now() - started).toBeLessThan(10_000);
    } finally {
      for (const socket of sockets) socket.destroy();
      await new Promise((resolve) => server.close(resolve));
    }
  });
});

describe('an http upstream that requires a credential', () => {
  const setup = async (tmp: string) => {
    const upstream = makeUpstream(join(tmp, 'upstream'), 'bare');
    const server = await startGitHttpServer(join(tmp, 'upstream'), EXPECTED_AUTH);
    const service = createGitService({ cacheDir: join(tmp, 'cache'), timeoutMs: 20_000 });
    const url = `${server.baseUrl}bare.git`;
    return { upstream, server, service, url };
  };

  test('receives the credential as a Basic authorization header and serves every operation', async ({
    tmp,
  }) => {
    const { upstream, server, service, url } = await setup(tmp);
    try {
      const repo = { url, credential: TOKEN };
      expect(await service.resolveRef(repo, 'main')).toBe(upstream.second);
      expect((await service.cutBranch(repo, 'v1', 'session-http')).commit).toBe(upstream.first);
      expect(refValue(upstream.dir, 'refs/heads/session-http')).toBe(upstream.first);
      expect((await service.readFileAtRef(repo, 'session-http', 'README.md'))?.toString()).toBe('first\n');
      const workspace = join(tmp, 'workspace');
      expect((await service.cloneWorkspace(repo, 'session-http', workspace)).commit).toBe(upstream.first);
      expect(git(workspace, 'remote', 'get-url', 'origin')).toBe(url);
      assertNoSecret(readFileSync(join(workspace, '.git', 'config'), 'utf8'));
      expect(server.authorizations).toContain(EXPECTED_AUTH);
      // Nothing under the cache, the workspace or the upstream holds the token in any form.
      expect(filesContaining(tmp, TOKEN)).toEqual([]);
      expect(filesContaining(tmp, basicOf(`x-access-token:${TOKEN}`))).toEqual([]);
    } finally {
      await server.close();
    }
  });

  test('accepts a credential embedded in the URL and strips it from the clone origin', async ({ tmp }) => {
    const { upstream, server, service, url } = await setup(tmp);
    try {
      const withUserInfo = url.replace('http://', `http://x-access-token:${TOKEN}@`);
      await service.cutBranch({ url: withUserInfo }, 'main', 'embedded');
      const workspace = join(tmp, 'workspace');
      await service.cloneWorkspace({ url: withUserInfo }, 'embedded', workspace);
      expect(git(workspace, 'remote', 'get-url', 'origin')).toBe(url);
      expect(refValue(upstream.dir, 'refs/heads/embedded')).toBe(upstream.second);
      expect(filesContaining(tmp, TOKEN)).toEqual([]);
    } finally {
      await server.close();
    }
  });

  test('reports a missing or wrong credential as an authentication failure without echoing it', async ({
    tmp,
  }) => {
    const { server, service, url } = await setup(tmp);
    try {
      const missing = await service.resolveRef({ url }, 'main').catch((caught: unknown) => caught);
      expect(missing).toBeInstanceOf(GitRepositoryUnreachableError);
      expect((missing as Error).message).toMatch(/authentication failed.*credential/);

      const wrongToken = 'ghs_wrongTokenValue9876543210';
      const wrong = await service
        .cutBranch({ url, credential: wrongToken }, 'main', 'denied')
        .catch((caught: unknown) => caught);
      expect(wrong).toBeInstanceOf(GitRepositoryUnreachableError);
      expect((wrong as Error).message).toMatch(/authentication failed/);
      assertNoSecret((wrong as Error).message, wrongToken);
      expect(server.authorizations).toContain(`Basic ${basicOf(`x-access-token:${wrongToken}`)}`);
    } finally {
      await server.close();
    }
  });
});
