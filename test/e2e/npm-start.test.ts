// The README's Quick start as a newcomer runs it: `npm start` on a fresh data dir (embedded PGlite,
// in-process pub/sub, LOCAL sandboxes running the real daemon and a real `opencode serve` against
// the stub model), then the main job through the public API only: project → session →
// agentReady → telemetry (live and stored) → reload → stop.
import { existsSync, mkdtempSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { TypedDocumentNode } from '@graphql-typed-document-node/core';
import { print } from 'graphql';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { OPENCODE_CONFIG_SUBDIR, opencodeConfig } from '../fixtures/opencode-project';
import { type StubModel, startStubModel } from '../fixtures/stub-model';
import {
  AgentSessionDocument,
  CreateProjectDocument,
  CreateSessionDocument,
  ReloadSessionDocument,
  SessionStatesDocument,
  StopSessionStateDocument,
  TelemetryUpdatesDocument,
} from '../generated/graphql';
import { openSocket, watch } from '../realtime/helpers';
import { createTestRepo } from '../support/git';
import { type ServerProcess, postGraphql, startServerProcess } from '../support/server-process';
import { waitFor } from '../support/wait';
import { E2E_SETUP_TIMEOUT_MS, localDaemonEnv } from './helpers';

describe('npm start on a fresh data dir runs the main job', () => {
  let server: ServerProcess;
  let stub: StubModel;
  let token: string;
  const dataDir = mkdtempSync(join(tmpdir(), 'sc-npm-start-'));

  async function gql<T, V>(doc: TypedDocumentNode<T, V>, variables: V): Promise<T> {
    const res = await postGraphql(server.graphqlUrl, { query: print(doc), variables }, token);
    if (!res.json.data || res.json.errors) throw new Error(JSON.stringify(res.json));
    return res.json.data as T;
  }

  beforeAll(async () => {
    stub = await startStubModel({ reply: 'Done.' });
    const daemonEnv = localDaemonEnv({ SINGULACOMP_TELEMETRY_INTERVAL_MS: '1000' });
    server = await startServerProcess({
      npmStart: true,
      dataDir,
      logLevel: 'info',
      startTimeoutMs: E2E_SETUP_TIMEOUT_MS - 30_000,
      env: {
        // As a newcomer runs it: development defaults, the bundled daemon in LOCAL sandboxes.
        NODE_ENV: 'development',
        SINGULACOMP_LOCAL_ENTRY: '',
        SINGULACOMP_LOCAL_PASS_ENV: Object.keys(daemonEnv).join(','),
        // An isolated sandbox reaches only the API and the ports named here: the stub model.
        SINGULACOMP_LOCAL_EGRESS_PORTS: new URL(stub.baseURL).port,
        ...daemonEnv,
      },
    });
    token = server.bootstrapToken()!;
  }, E2E_SETUP_TIMEOUT_MS);
  afterAll(async () => {
    await server?.stop();
    await stub?.close();
    rmSync(dataDir, { recursive: true, force: true });
  });

  test('start-up prints one line per step and one listening line, as JSON when not on a terminal', async () => {
    // The server answers as soon as it listens; its log line may reach the pipe a moment later.
    await waitFor(() => server.output().includes('"msg":"listening"'), 30_000, 'the listening line');
    const lines = server
      .output()
      .split('\n')
      .filter((line) => line.startsWith('{'))
      .map((line) => JSON.parse(line) as { msg: string; module?: string });
    const steps = lines.filter((l) => l.module === 'app').map((l) => l.msg);
    expect(steps).toEqual([
      'database: creating the embedded PostgreSQL (first start only)',
      'database ready',
      // The seed `npm install` built already holds every migration (server/pglite-seed.ts).
      'migrations up to date',
      'pub/sub ready',
      'bootstrap admin created',
      'listening',
    ]);
    expect(token).toMatch(/^singulacomp_pat_/);
    expect(server.output()).toContain(`${server.url}/graphql?token=${token}`);
  });

  test('project → session → agentReady → telemetry → reload → stop, through the public API', async () => {
    const repo = createTestRepo({
      'README.md': '# npm start\n',
      [join(OPENCODE_CONFIG_SUBDIR, 'opencode.json')]:
        `${JSON.stringify(opencodeConfig({ baseURL: stub.baseURL }), null, 2)}\n`,
    });
    const project = await gql(CreateProjectDocument, {
      input: { name: 'main-job', repositoryUrl: repo.url },
    });
    if (project.createProject.__typename !== 'CreateProjectSuccess') throw new Error(JSON.stringify(project));
    const created = await gql(CreateSessionDocument, {
      input: { projectId: project.createProject.project.id, prompt: 'Say done.' },
    });
    if (created.createSession.__typename !== 'CreateSessionSuccess') throw new Error(JSON.stringify(created));
    const sessionId = created.createSession.session.sessionId;

    const socket = openSocket(server.wsUrl, token);
    try {
      // The session's own stream says when the agent can take a turn.
      const states = watch(socket, SessionStatesDocument, { id: sessionId, after: 0 });
      await waitFor(async () => states.events.some((e) => e.data.sessionUpdated.agentReady), 180_000).catch(
        (error: unknown) => {
          // Where it stood: the session's last event and the server's last lines.
          throw new Error(
            `${(error as Error).message}\nlast event: ${JSON.stringify(states.events.at(-1))}\nserver output:\n${server.output().slice(-4_000)}`,
          );
        },
      );
      const ready = states.events.find((e) => e.data.sessionUpdated.agentReady)!.data.sessionUpdated;
      expect(ready.status).toBe('RUNNING');
      const sandboxId = ready.sandbox!.id;

      // Telemetry: delivered live and stored (the embedded database keeps it).
      const telemetry = watch(socket, TelemetryUpdatesDocument, { sandboxId });
      const [sample] = await telemetry.waitForEvents(1, 60_000);
      expect(sample!.data.telemetry.memoryLimitBytes).toBeGreaterThan(0);
      const view = await gql(AgentSessionDocument, { id: sessionId });
      expect(view.session?.sandbox?.latestTelemetry?.memoryLimitBytes).toBeGreaterThan(0);
      // The prompt reached the model and its turn ended (a reload without force waits for that).
      await waitFor(async () => stub.requests.length > 0, 60_000);
      await waitFor(
        async () => states.events.some((e) => e.data.sessionUpdated.runtimeState === 'IDLE'),
        120_000,
        'the first turn to end (runtimeState IDLE)',
      ).catch((error: unknown) => {
        const sandboxes = join(dataDir, 'sandboxes');
        const logs = readdirSync(sandboxes).map((id) => {
          const log = join(sandboxes, id, 'entry.log');
          return `${id}:\n${existsSync(log) ? readFileSync(log, 'utf8').slice(-6_000) : '(no log)'}`;
        });
        throw new Error(
          `${(error as Error).message}\nlast event: ${JSON.stringify(states.events.at(-1))}\nserver output:\n${server.output().slice(-4_000)}\ndaemon logs:\n${logs.join('\n')}`,
        );
      });

      const reload = await gql(ReloadSessionDocument, { input: { sessionId, noRepo: true } });
      if (reload.reloadSession.__typename !== 'ReloadSessionSuccess') throw new Error(JSON.stringify(reload));
      const reloadId = reload.reloadSession.reload.id;
      const finished = await waitFor(async () => {
        const v = await gql(AgentSessionDocument, { id: sessionId });
        const r = v.session?.reloads.edges.find((edge) => edge.node.id === reloadId)?.node;
        return r && r.status !== 'RUNNING' ? r : null;
      }, 120_000);
      expect({ status: finished.status, error: finished.error }).toEqual({
        status: 'SUCCEEDED',
        error: null,
      });

      const stopped = await gql(StopSessionStateDocument, { input: { sessionId } });
      if (stopped.stopSession.__typename !== 'StopSessionSuccess') throw new Error(JSON.stringify(stopped));
      expect(stopped.stopSession.session).toMatchObject({ status: 'STOPPED', agentReady: false });
      await waitFor(
        async () => states.events.some((e) => e.data.sessionUpdated.status === 'STOPPED'),
        60_000,
      );
    } finally {
      await socket.dispose();
    }
  }, 600_000);
});
