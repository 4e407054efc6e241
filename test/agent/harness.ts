// Builds a real daemon for tests and benches: a recording GraphQL API (the sandbox mutations of
// docs/agent-api.md), the stub model, a workspace with an OpenCode config, and createAgent with
// every interval scaled down.
import { randomUUID } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type FieldNode, type OperationDefinitionNode, parse } from 'graphql';
import { type Agent, type AgentOptions, createAgent } from '../../agent/agent';
import { ApiClient } from '../../agent/api-client';
import { createLogger } from '../../agent/logger';
import { freePort } from '../../contract/ports';
import { type UserContextAudience, signUserContext } from '../../contract/user-context';
import { OFFLINE_OPENCODE_ENV, writeOpencodeProject } from '../fixtures/opencode-project';
import { type StubModel, type StubModelOptions, startStubModel } from '../fixtures/stub-model';
import { WAIT_SCALE } from '../support/wait';

export interface RecordedCall {
  operation: string;
  variables: Record<string, unknown>;
  input: Record<string, unknown>;
  authorization: string | undefined;
  at: number;
}

export interface RecordingApiOptions {
  sessionId: string;
  sandboxId?: string;
  prompt?: string | null;
  alreadyClaimed?: boolean;
  /** claimBootstrap is answered only once this settles (a slow or distant API). */
  claimHeld?: Promise<void>;
}

export interface RecordingApi {
  url: string;
  calls: RecordedCall[];
  of(operation: string): RecordedCall[];
  /** Paths of the requests that were not GraphQL (the LLM gateway's model list), in order. */
  otherPaths: string[];
  /** Current lease generation the fake server holds (for fencing assertions). */
  lease: { generation: number; released: boolean };
  close(): Promise<void>;
}

/** A small GraphQL server answering the sandbox mutations and recording every call. */
export async function startRecordingApi(options: RecordingApiOptions): Promise<RecordingApi> {
  const calls: RecordedCall[] = [];
  const otherPaths: string[] = [];
  const lease = { generation: 0, released: true };
  let claimed = options.alreadyClaimed ?? false;
  const sandboxId = options.sandboxId ?? randomUUID();
  const expires = (): string => new Date(Date.now() + 180_000).toISOString();

  const answer = (operation: string, input: Record<string, unknown>): Record<string, unknown> => {
    switch (operation) {
      case 'claimBootstrap': {
        const first = !claimed;
        claimed = true;
        return {
          __typename: 'ClaimBootstrapSuccess',
          sessionId: options.sessionId,
          sandboxId,
          prompt: first ? (options.prompt ?? null) : null,
          turnLedgerId: first ? randomUUID() : null,
          agent: 'build',
          alreadyClaimed: !first,
        };
      }
      case 'renewLease': {
        const given = input.generation as number | undefined;
        if (given === undefined || given === null || lease.released) {
          lease.generation += 1;
          lease.released = false;
        } else if (given !== lease.generation) {
          return {
            __typename: 'LeaseFencedError',
            code: 'LEASE_FENCED',
            message: 'stale generation',
            field: null,
          };
        }
        return {
          __typename: 'RenewLeaseSuccess',
          lease: { generation: lease.generation, expiresAt: expires() },
        };
      }
      case 'releaseLease': {
        if (input.generation === lease.generation) lease.released = true;
        return {
          __typename: 'ReleaseLeaseSuccess',
          lease: { generation: lease.generation, releasedAt: new Date().toISOString() },
        };
      }
      case 'reportTelemetry':
        return { __typename: 'ReportTelemetrySuccess', sample: { at: new Date().toISOString() } };
      case 'reportRuntimeState':
        return { __typename: 'ReportRuntimeStateSuccess', sandbox: { id: sandboxId } };
      case 'reportReloadPhase':
        return { __typename: 'ReportReloadPhaseSuccess', reload: { id: input.reloadId, status: 'RUNNING' } };
      case 'reportAgentEvents':
        return { __typename: 'ReportAgentEventsSuccess', accepted: (input.events as unknown[]).length };
      case 'reportSandboxPorts':
        return { __typename: 'ReportSandboxPortsSuccess', ports: input.ports };
      default:
        throw new Error(`unexpected operation ${operation}`);
    }
  };

  const server: Server = createServer(async (req, res) => {
    // Only GraphQL here: the LLM gateway's model list answers 404, so OpenCode keeps the
    // workspace's own provider (the stub model).
    if (!req.url?.startsWith('/graphql')) {
      otherPaths.push(req.url ?? '');
      res.writeHead(404, { 'content-type': 'application/json' }).end('{"error":"not here"}');
      return;
    }
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as {
      query: string;
      variables?: Record<string, unknown>;
    };
    const operationNode = parse(body.query).definitions[0] as OperationDefinitionNode;
    const field = operationNode.selectionSet.selections[0] as FieldNode;
    const operation = field.name.value;
    const variables = body.variables ?? {};
    const input = (variables.input as Record<string, unknown> | undefined) ?? {};
    calls.push({ operation, variables, input, authorization: req.headers.authorization, at: Date.now() });
    if (operation === 'claimBootstrap') await options.claimHeld;
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ data: { [operation]: answer(operation, input) } }));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    url,
    calls,
    lease,
    of: (operation) => calls.filter((call) => call.operation === operation),
    otherPaths,
    close: async () => {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

export interface TestAgentOptions {
  prompt?: string | null;
  /** The API answers as for a daemon that already claimed its bootstrap. */
  alreadyClaimed?: boolean;
  /** claimBootstrap is answered only once this settles. */
  claimHeld?: Promise<void>;
  stub?: StubModelOptions;
  agent?: Partial<AgentOptions>;
  /** Start the agent (boot OpenCode) right away. @default true */
  start?: boolean;
}

export interface TestAgent {
  agent: Agent;
  api: RecordingApi;
  stub: StubModel;
  sessionId: string;
  token: string;
  workspace: string;
  home: string;
  /** Base URL of the daemon's service port. */
  url: string;
  /**
   * A valid X-SingulaComp-User-Context header for this session: a control call unless `audience`
   * says otherwise (`opencode` for OpenCode's API, `app` with `port` for a sandbox port).
   */
  userContext(overrides?: {
    audience?: UserContextAudience;
    port?: number;
    sessionId?: string;
    ttlSeconds?: number;
    nowSeconds?: number;
    token?: string;
  }): string;
  /** Runtime states reported so far, in order. */
  states(): string[];
  stop(): Promise<void>;
}

export async function startTestAgent(options: TestAgentOptions = {}): Promise<TestAgent> {
  const sessionId = randomUUID();
  const token = `sandbox-token-${randomUUID()}`;
  const root = await mkdtemp(join(tmpdir(), 'singulacomp-agent-'));
  const workspace = join(root, 'workspace');
  const home = join(root, 'home');
  const stub = await startStubModel(options.stub);
  await writeOpencodeProject(workspace, { baseURL: stub.baseURL });
  const api = await startRecordingApi({
    sessionId,
    prompt: options.prompt ?? null,
    alreadyClaimed: options.alreadyClaimed,
    ...(options.claimHeld ? { claimHeld: options.claimHeld } : {}),
  });
  const logLevel = process.env.AGENT_TEST_LOG ?? 'silent';
  const agent = createAgent({
    sessionId,
    token,
    apiUrl: api.url,
    // Passed in as a test would pass a client of its own (createAgent's `api` option).
    api: new ApiClient({ apiUrl: api.url, token, logger: createLogger(logLevel) }),
    servicePort: 0,
    serviceHost: '127.0.0.1',
    workspace,
    home,
    opencodePort: await freePort(),
    opencodeEnv: { ...OFFLINE_OPENCODE_ENV },
    leaseRenewIntervalMs: 1_000,
    telemetryIntervalMs: 5_000,
    fastSampleMs: 200,
    slowSampleMs: 1_000,
    offloadIntervalMs: 600_000,
    // A first boot of `opencode serve` on a loaded machine can take longer than 30 s; a health
    // timeout here would kill and restart it in a loop. Scaled like every test backstop.
    healthTimeoutMs: 30_000 * WAIT_SCALE,
    healthPollMs: 100,
    restartBackoff: { initialMs: 300, maxMs: 5_000, jitter: 0 },
    stableAfterMs: 60_000,
    eventBackoff: { initialMs: 50, maxMs: 1_000 },
    stopGraceMs: 3_000,
    shutdownTimeoutMs: 10_000,
    reloadValidateTimeoutMs: 20_000 * WAIT_SCALE,
    logLevel,
    ...options.agent,
  });
  const stopAll = async (): Promise<void> => {
    await agent.stop();
    await Promise.all([stub.close(), api.close()]);
    await rm(root, { recursive: true, force: true });
  };
  if (options.start !== false) {
    try {
      await agent.start();
    } catch (error) {
      await stopAll();
      throw error;
    }
  }
  return {
    agent,
    api,
    stub,
    sessionId,
    token,
    workspace,
    home,
    get url() {
      return `http://127.0.0.1:${agent.servicePort}`;
    },
    userContext: (overrides = {}) =>
      signUserContext(
        {
          sessionId: overrides.sessionId ?? sessionId,
          userId: 'user-1',
          audience: overrides.audience ?? 'control',
          ...(overrides.port === undefined ? {} : { port: overrides.port }),
          ttlSeconds: overrides.ttlSeconds ?? 120,
          nowSeconds: overrides.nowSeconds,
        },
        overrides.token ?? token,
      ),
    states: () => api.of('reportRuntimeState').map((call) => String(call.input.state)),
    stop: stopAll,
  };
}

/** The test kit's `waitFor`, re-exported for the agent tests. */
export { waitFor } from '../support/wait';
