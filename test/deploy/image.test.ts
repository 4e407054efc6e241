// deploy/Dockerfile (R-DEP-1): the control-plane image builds with Podman FROM the local base image
// (no registry), holds the server bundle and only the packages the bundle leaves outside, runs as
// a non-root user on a read-only root file system, migrates an empty PostgreSQL database, serves
// the API and the dashboard, passes its own HEALTHCHECK, and drains and exits 0 on SIGTERM.
import { execFileSync } from 'node:child_process';
import { readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import Docker from 'dockerode';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { type TestDatabase, createTestDatabase, withClient } from '../support/database';
import { PODMAN_ULIMITS, type PodmanService, startPodmanService } from '../support/podman';
import { freePort, postGraphql } from '../support/server-process';
import {
  type ServerImage,
  IGNORE_FILE,
  ignoreFileText,
  imageSize,
  serverImage,
} from '../support/server-image';
import { waitFor } from '../support/wait';

const ROOT = new URL('../..', import.meta.url).pathname;

describe('the control-plane image', { timeout: 900_000 }, () => {
  let podman: PodmanService;
  let image: ServerImage;
  let database: TestDatabase;
  let docker: Docker;

  beforeAll(async () => {
    podman = await startPodmanService();
    image = serverImage(podman.containersConf);
    docker = new Docker({ socketPath: podman.socketPath });
    database = await createTestDatabase('sc_image', { empty: true });
  }, 900_000);

  afterAll(async () => {
    await podman?.stop();
    await database?.drop();
  });

  test('the build context admits exactly the packages the server bundle leaves external, with their dependencies', () => {
    // When this fails: node scripts/container/server-ignore.mjs
    expect(readFileSync(IGNORE_FILE, 'utf8')).toBe(ignoreFileText());
    const admitted = ignoreFileText()
      .split('\n')
      .filter((line) => line.startsWith('!node_modules/'))
      .map((line) => line.slice(1));
    expect(admitted).toEqual(expect.arrayContaining(['node_modules/pino', 'node_modules/@prisma/client']));
    expect(admitted.length).toBeLessThan(100);
  });

  test('a non-root image with a health check on /healthz that runs the server bundle; its size', async () => {
    const [info] = JSON.parse(
      execFileSync('podman', ['image', 'inspect', image.ref], {
        env: { ...process.env, CONTAINERS_CONF: podman.containersConf },
        encoding: 'utf8',
      }),
    ) as Array<{
      Config: { User: string; Cmd: string[]; ExposedPorts: Record<string, unknown> };
      Healthcheck?: { Test: string[] };
    }>;
    expect(info!.Config.User).toBe('10001:10001');
    expect(info!.Config.Cmd).toEqual(['node', '/app/dist/server.mjs']);
    expect(info!.Healthcheck?.Test.join(' ')).toContain('/healthz');
    expect(Object.keys(info!.Config.ExposedPorts)).toEqual(['3000/tcp']);
    const size = imageSize(image.ref, podman.containersConf);
    const base = imageSize(image.base, podman.containersConf);
    console.log(
      `image ${image.ref}: ${(size / 1e6).toFixed(1)} MB, base ${(base / 1e6).toFixed(1)} MB, ${image.built ? `built in ${image.buildMs} ms` : 'cached'}`,
    );
    // The app adds the bundles and about thirty packages, not a node_modules tree (over 1 GB).
    expect(size - base).toBeGreaterThan(10e6);
    expect(size - base).toBeLessThan(150e6);
  });

  test('on a read-only root it migrates an empty database, serves the API and the dashboard, is healthy, and exits 0 on SIGTERM', async () => {
    const port = await freePort();
    const container = await docker.createContainer({
      Image: image.ref,
      Labels: podman.labels,
      Env: [
        `PORT=${port}`,
        'HOST=127.0.0.1',
        `DATABASE_URL=${database.url}`,
        `SINGULACOMP_SECRET_KEY=${Buffer.alloc(32, 9).toString('base64')}`,
      ],
      HostConfig: {
        NetworkMode: 'host',
        ReadonlyRootfs: true,
        Tmpfs: { '/tmp': 'rw,size=64m' },
        Ulimits: [...PODMAN_ULIMITS],
      },
    });
    await container.start();
    const url = `http://127.0.0.1:${port}`;
    const podmanCli = (args: string[]) =>
      execFileSync('podman', args, {
        env: { ...process.env, CONTAINERS_CONF: podman.containersConf },
        encoding: 'utf8',
        stdio: ['ignore', 'pipe', 'pipe'],
      });
    // The server writes to stdout only (pino and the bootstrap lines).
    const logs = async () => podmanCli(['logs', container.id]);
    await waitFor(async () => (await fetch(`${url}/readyz`)).status === 200, {
      timeoutMs: 120_000,
      what: 'the container ready',
    }).catch(async (error: unknown) => {
      throw new Error(`${(error as Error).message}\n${await logs()}`);
    });

    // Every migration applied by the container's start-up.
    const migrations = readdirSync(join(ROOT, 'prisma/migrations'), { withFileTypes: true }).filter((e) =>
      e.isDirectory(),
    );
    const applied = await withClient(
      async (client) =>
        (
          await client.query(
            'SELECT count(*)::int AS n FROM "_prisma_migrations" WHERE finished_at IS NOT NULL',
          )
        ).rows[0].n,
      database.url,
    );
    expect(applied).toBe(migrations.length);

    // The bootstrap admin's token is in the log once; it signs in.
    const token = /singulacomp_pat_[A-Za-z0-9]+/.exec(await logs())?.[0];
    expect(token).toBeDefined();
    const viewer = await postGraphql(`${url}/graphql`, { query: '{ viewer { kind } }' }, token!);
    expect(viewer.json).toEqual({ data: { viewer: { kind: 'PERSONAL_ACCESS' } } });
    // Logs are JSON lines in production.
    expect((await logs()).split('\n').some((line) => line.startsWith('{"level":30'))).toBe(true);
    const dashboard = await fetch(`${url}/`, { headers: { accept: 'text/html' } });
    expect(dashboard.status).toBe(200);
    expect(await dashboard.text()).toMatch(/<div id="root">/);

    // The server runs as 10001, not root.
    const { State } = (await container.inspect()) as { State: { Pid: number } };
    const uid = /^Uid:\s+(\d+)/m.exec(readFileSync(`/proc/${State.Pid}/status`, 'utf8'))?.[1];
    expect(uid).toBe('10001');

    // The image's own HEALTHCHECK passes.
    podmanCli(['healthcheck', 'run', container.id]);

    await container.stop({ t: 30 });
    const { State: after } = (await container.inspect()) as { State: { ExitCode: number } };
    expect(after.ExitCode).toBe(0);
    expect(await logs()).toContain('SIGTERM: finishing in-flight requests');
  });
});
