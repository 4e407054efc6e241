// deploy/compose.yaml (R-DEP-1) under podman-compose: PostgreSQL, Redis and nginx from the locally
// built services image, two replicas of the control-plane image sharing SINGULACOMP_SECRET_KEY, the
// engine socket of a private Podman service as the DOCKER provider's. The smoke: both replicas
// healthy, the proxy ready, the bootstrap admin signs in through the proxy, a project is created,
// and two subscribers held by different replicas both receive the events of a session created
// through the proxy on a repository the replicas reach over HTTP.
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { statSync } from 'node:fs';
import { basename, dirname } from 'node:path';
import { print } from 'graphql';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { AccountSessionsDocument, CreateProjectDocument, CreateSessionDocument } from '../generated/graphql';
import { type Socket, openSocket, watch } from '../realtime/helpers';
import { type GitHttpServer, startGitHttpServer } from '../git/helpers';
import { type TestRepo, createTestRepo } from '../support/git';
import { type PodmanService, startPodmanService } from '../support/podman';
import { freePort, postGraphql } from '../support/server-process';
import { serverImage, servicesImage } from '../support/server-image';
import { waitFor } from '../support/wait';

const COMPOSE_FILE = new URL('../../deploy/compose.yaml', import.meta.url).pathname;

/** Sockets opened at most while looking for one on each replica. */
const MAX_SOCKETS = 8;

describe('deploy/compose.yaml', { timeout: 900_000 }, () => {
  let podman: PodmanService;
  let project: string;
  let env: NodeJS.ProcessEnv;
  let url: string;
  let repo: TestRepo;
  let git: GitHttpServer;
  const sockets: Socket[] = [];

  const compose = (...args: string[]) =>
    execFileSync(
      'podman-compose',
      ['-p', project, '-f', COMPOSE_FILE, '--podman-args=--runtime runc', ...args],
      {
        env,
        encoding: 'utf8',
        stdio: ['ignore', 'pipe', 'pipe'],
        timeout: 300_000,
        maxBuffer: 64 * 1024 * 1024,
      },
    );
  const podmanCli = (...args: string[]) =>
    execFileSync('podman', args, { env, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
  const container = (service: string) => `${project}_${service}_1`;
  /** Prometheus's text for one replica, from inside its container (its port is not published). */
  const metricsOf = (service: string) =>
    podmanCli(
      'exec',
      container(service),
      'node',
      '-e',
      'fetch("http://127.0.0.1:3000/metrics").then(async (r) => process.stdout.write(await r.text()))',
    );
  const websockets = (service: string) =>
    Number(/^singulacomp_websocket_connections (\d+)/m.exec(metricsOf(service))?.[1] ?? Number.NaN);

  beforeAll(async () => {
    podman = await startPodmanService();
    const server = serverImage(podman.containersConf);
    const services = servicesImage(podman.containersConf);
    project = `sc-compose-${randomBytes(4).toString('hex')}`;
    const port = await freePort();
    url = `http://127.0.0.1:${port}`;
    env = {
      ...process.env,
      CONTAINERS_CONF: podman.containersConf,
      SINGULACOMP_IMAGE: server.ref,
      SINGULACOMP_SERVICES_IMAGE: services.ref,
      SINGULACOMP_HTTP_PORT: String(port),
      SINGULACOMP_SECRET_KEY: randomBytes(32).toString('base64'),
      SINGULACOMP_PUBLIC_URL: url,
      DOCKER_SOCKET: podman.socketPath,
      DOCKER_GID: String(statSync(podman.socketPath).gid),
      // LOCAL, which a production server refuses without bubblewrap: the smoke's session fails at
      // once, publishing its events, and starts no sandbox on the engine socket.
      SINGULACOMP_DEFAULT_PROVIDER: 'LOCAL',
    };
    compose('up', '-d');
    // The project's repository, served over HTTP on the compose network's gateway (this host).
    const network = JSON.parse(podmanCli('network', 'inspect', `${project}_default`)) as Array<{
      subnets: Array<{ gateway: string }>;
    }>;
    repo = createTestRepo({ 'README.md': '# compose\n' });
    git = await startGitHttpServer(dirname(repo.url), undefined, network[0]!.subnets[0]!.gateway);
  }, 900_000);

  afterAll(async () => {
    for (const s of sockets) await s.dispose();
    await git?.close();
    repo?.remove();
    if (project) {
      try {
        compose('down', '-v');
      } catch {
        // containers not created
      }
      try {
        podmanCli('network', 'rm', '-f', `${project}_default`);
      } catch {
        // none
      }
    }
    await podman?.stop();
  });

  test('both replicas are healthy, the admin signs in through the proxy, and a subscription on each replica sees every session event', async () => {
    await waitFor(async () => (await fetch(`${url}/readyz`)).status === 200, {
      timeoutMs: 180_000,
      what: 'the proxy and a replica ready',
    }).catch((error: unknown) => {
      throw new Error(`${(error as Error).message}\n${compose('logs')}`);
    });
    // Each replica's own HEALTHCHECK.
    for (const service of ['server-1', 'server-2']) {
      await waitFor(
        () => {
          podmanCli('healthcheck', 'run', container(service));
          return true;
        },
        { timeoutMs: 120_000, what: `${service} healthy` },
      );
    }

    // Exactly one replica created the admin and printed its token once.
    const logs = ['server-1', 'server-2'].map((s) => podmanCli('logs', container(s)));
    const tokens = logs.flatMap((text) => text.match(/singulacomp_pat_[A-Za-z0-9]+/g) ?? []);
    expect(tokens).toHaveLength(1);
    const token = tokens[0]!;
    const viewer = await postGraphql(`${url}/graphql`, { query: '{ viewer { kind } }' }, token);
    expect(viewer.json).toEqual({ data: { viewer: { kind: 'PERSONAL_ACCESS' } } });

    const created = await postGraphql(
      `${url}/graphql`,
      {
        query: print(CreateProjectDocument),
        variables: { input: { name: 'compose', repositoryUrl: `${git.baseUrl}${basename(repo.url)}` } },
      },
      token,
    );
    const projectId = (created.json.data?.createProject as { project?: { id: string } } | undefined)?.project
      ?.id;
    expect(projectId, JSON.stringify(created.json)).toBeTruthy();

    // Sockets through the proxy until each replica holds one. Round robin is kept per nginx worker,
    // so two sockets in a row may land on the same replica: open another until both have one.
    const wsUrl = `${url.replace('http', 'ws')}/graphql`;
    const watches = [];
    for (let i = 0; i < MAX_SOCKETS; i++) {
      const socket = openSocket(wsUrl, token);
      sockets.push(socket);
      await waitFor(() => socket.connected, { timeoutMs: 30_000, what: 'socket connected' });
      watches.push(watch(socket, AccountSessionsDocument, { after: 0 }));
      await waitFor(() => websockets('server-1') + websockets('server-2') === sockets.length, {
        timeoutMs: 30_000,
        what: `${sockets.length} sockets counted by the replicas`,
      });
      if (websockets('server-1') >= 1 && websockets('server-2') >= 1) break;
    }
    expect([websockets('server-1') >= 1, websockets('server-2') >= 1]).toEqual([true, true]);

    // A session created through the proxy (on either replica): both subscribers get its events.
    const session = await postGraphql(
      `${url}/graphql`,
      { query: print(CreateSessionDocument), variables: { input: { projectId, prompt: 'compose smoke' } } },
      token,
    );
    const sessionId = (session.json.data?.createSession as { session?: { sessionId: string } } | undefined)
      ?.session?.sessionId;
    expect(sessionId, JSON.stringify(session.json)).toBeTruthy();
    for (const w of watches) {
      const [first] = await w.waitForEvents(1, 60_000);
      expect((first!.data as { accountSessions: { sessionId: string } }).accountSessions.sessionId).toBe(
        sessionId,
      );
    }
    // The same stream on both replicas: the same first seq.
    expect(new Set(watches.map((w) => w.events[0]!.seq)).size).toBe(1);
  });
});
