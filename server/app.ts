// buildApp() → { start, stop }: one server process. HTTP and graphql-ws share a port and /graphql.
import { once } from 'node:events';
import { existsSync, readFileSync, statSync } from 'node:fs';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { type IncomingMessage, type ServerResponse, createServer } from 'node:http';
import { join } from 'node:path';
import { EnvelopArmorPlugin } from '@escape.tech/graphql-armor';
import { useCSRFPrevention } from '@graphql-yoga/plugin-csrf-prevention';
import { createYoga } from 'graphql-yoga';
import { WebSocketServer } from 'ws';
import { createGitService } from '../resolvers/git/git';
import type { Principal } from '../resolvers/auth/principal';
import { DockerProvider } from '../resolvers/providers/docker';
import { createCloudProviders, mergeProviders } from '../resolvers/providers/index';
import { type LocalProviderOptions, createLocalProvider } from '../resolvers/providers/local';
import { createLocalIdentityStore } from '../resolvers/providers/local-identity';
import { bwrapAvailable } from '../resolvers/providers/local-isolation';
import { DEFAULT_LOCAL_UID_CLAIMS, createUidAllocator } from '../resolvers/providers/local-uids';
import { type ProviderRegistry, createProviderRegistry } from '../resolvers/providers/registry';
import type { SandboxProvider } from '../resolvers/providers/types';
import { type Services, createServices } from '../resolvers/services';
import type { Context } from '../schema/builder';
import { schema } from '../schema/index';
import { DECLARED_BODY_LIMIT_BYTES, STREAMED_BODY_LIMIT_BYTES, useRequestBodyLimit } from './body-limit';
import { createBootstrapAdmin } from './bootstrap-admin';
import { createQueryCompiler, useCompiledExecution } from './fast-paths/compiled-execution';
import { findManySql } from './fast-paths/find-many-sql';
import { createGraphqlFastPath } from './fast-paths/graphql-fast-path';
import { httpContext, wsContext } from './context';
import { useIntrospectionGate, useWebSocketOnlySubscriptions } from './graphql-guards';
import { answerHealth } from './health';
import { graphiqlOptions, renderGraphiql, serveGraphiqlAsset } from './graphiql';
import {
  UNEXPECTED_ERROR_MESSAGE,
  createErrorMasker,
  currentRequestId,
  requestIdFrom,
  withRequestId,
} from './faults';
import { serveDashboard } from './dashboard';
import { createMetrics } from './metrics';
import { type Database, openDatabase } from './db';
import { type ServerEnv, parseEnv } from './env';
import { loadKeys } from './keys';
import { type Logger, createLogger, defaultLogFormat } from './logger';
import { isFirstStartOf, seedPgliteDataDir } from './pglite-seed';
import { migrate } from './migrate';
import { createInProcessBroker, createPubSub } from './pubsub';
import type { PubSub } from '../resolvers/events/channels';
import { createRedisBroker, whenHealthy } from './pubsub-redis';
import { type RealtimeOptions, createRealtimeServer } from './realtime';
import { createEventLog } from '../resolvers/events/event-log';
import type { Socket } from 'node:net';
import { createAgentProxy } from './agent-proxy';
import { createRecordDownload } from './record-download';
import { createDaemonProxy } from './daemon-proxy';
import { createLlmGateway } from './llm-gateway';
import { createPreviewProxy } from './preview-proxy';
import { createGitProxy } from './git-proxy';
import { handleWebhook, isWebhookPath } from './webhooks';
import { AGENT_NODE_FLAGS } from '../image/runtime-layout';

export interface AppOptions {
  env?: ServerEnv;
  logger?: Logger;
  /** Extra providers (cloud adapters, or test doubles of a provider's cloud). */
  providers?: SandboxProvider[];
  /** Replaces the pub/sub built from the env. */
  pubsub?: PubSub;
  /** WebSocket limits, pings and event retention. */
  realtime?: RealtimeOptions;
  /** Create the bootstrap admin on first start. @default true */
  bootstrap?: boolean;
  /** Print the bootstrap token to stdout. @default true outside NODE_ENV=test */
  printBootstrapToken?: boolean;
  /**
   * Milliseconds since the epoch for the services that stamp times and compare them with their own
   * stamps (resolvers/services.ts): token expiry, use and revocation, leases and the reaper, session
   * lifecycle and provisioning, runtime state, telemetry, reloads, invitations, share-link and
   * preview-token expiry; tests move it. Still on real time: recovery and the lifetime guard (they
   * compare Prisma's `updatedAt` and a provider's end time), a subscription's end at its token's
   * expiry (server/realtime.ts), `ShareLink.active` and the invitation list in schema/, change-request
   * merge and close times, manifest sync and snapshot build times. @default Date.now
   */
  now?: () => number;
}

export interface App {
  services: Services;
  /** http://host:port once started. */
  url: string;
  bootstrapToken: string | null;
  start(): Promise<void>;
  stop(): Promise<void>;
}

// LOCAL sandboxes start like the image does: singulacomp-entrypoint (reaps, forwards signals, exits
// with the daemon) runs the daemon, bundled for plain node (scripts/build-agent.mjs), so no
// TypeScript loader is in memory.
function defaultEntryCommand(): string {
  const entrypoint = new URL('../cli/entrypoint.sh', import.meta.url).pathname;
  const agent = new URL('../dist/singulacomp-agent.mjs', import.meta.url).pathname;
  const flags = AGENT_NODE_FLAGS.map((flag) => `'${flag}' `).join('');
  return `exec '${entrypoint}' '${process.execPath}' ${flags}'${agent}' --workspace {workspace} --home {home} --opencode-port {opencodePort}`;
}

/**
 * Writes `<binDir>/singulacomp`, the CLI as LOCAL sandboxes run it (the image installs the same
 * CLI in /usr/local/bin): the workspace's git credential helper and the agent call it by name.
 * It runs the bundled CLI (dist/singulacomp.mjs) on plain node: an isolated sandbox sees that
 * bundle and not the sources, so the bundle is rebuilt here first when a source is newer (as
 * cli/bin.mjs does for the CLI npm installs).
 */
async function installCliShim(binDir: string, log: Logger): Promise<void> {
  const bundle = new URL('../dist/singulacomp.mjs', import.meta.url).pathname;
  if (!cliBundleFresh()) {
    try {
      await (await import(new URL('../scripts/build-cli.mjs', import.meta.url).href)).buildCli();
    } catch (error) {
      log.warn({ err: (error as Error).message }, 'could not rebuild the CLI bundle for LOCAL sandboxes');
    }
  }
  await mkdir(binDir, { recursive: true });
  await writeFile(join(binDir, 'singulacomp'), `#!/bin/sh\nexec '${process.execPath}' '${bundle}' "$@"\n`, {
    mode: 0o755,
  });
}

/** True when dist/singulacomp.mjs is newer than every source it was built from (cli/bin.mjs's test). */
function cliBundleFresh(): boolean {
  try {
    const root = new URL('..', import.meta.url);
    const builtAt = statSync(new URL('dist/singulacomp.mjs', root)).mtimeMs;
    const inputs = JSON.parse(
      readFileSync(new URL('dist/singulacomp.inputs.json', root), 'utf8'),
    ) as string[];
    return inputs.every((path) => statSync(new URL(path, root)).mtimeMs <= builtAt);
  } catch {
    return false;
  }
}

/**
 * How LOCAL sandboxes run here: bubblewrap when it works (or is demanded), else plain processes,
 * announced loudly and refused in production unless SINGULACOMP_LOCAL_ISOLATION=none says so.
 */
function localIsolation(env: ServerEnv, log: Logger): LocalProviderOptions['isolation'] {
  if (env.localIsolation === 'none') {
    log.warn('SINGULACOMP_LOCAL_ISOLATION=none: LOCAL sandboxes run unisolated, as this server user');
    return { mode: 'none' };
  }
  if (bwrapAvailable()) {
    return {
      mode: 'bwrap',
      dataDir: env.dataDir,
      uids: createUidAllocator({ range: env.localUids, claimsDir: DEFAULT_LOCAL_UID_CLAIMS }),
    };
  }
  const why =
    'bubblewrap (bwrap) is missing or cannot create namespaces here, so LOCAL sandboxes would run ' +
    'unisolated and could read this server’s data dir and reach its database';
  if (env.localIsolation === 'bwrap' || env.nodeEnv === 'production') {
    log.error(
      `${why}; LOCAL sandboxes are refused (install bubblewrap, or set SINGULACOMP_LOCAL_ISOLATION=none to accept the risk)`,
    );
    return {
      mode: 'none',
      refuse:
        'LOCAL sandboxes are refused: this server cannot isolate them (bubblewrap unavailable). ' +
        'Install bubblewrap, or set SINGULACOMP_LOCAL_ISOLATION=none to run them unisolated.',
    };
  }
  log.warn(`WARNING: ${why}. Development only; NODE_ENV=production refuses them.`);
  return { mode: 'none' };
}

export async function buildApp(options: AppOptions = {}): Promise<App> {
  const env = options.env ?? parseEnv();
  const logger =
    options.logger ?? createLogger(env.logLevel, { format: env.logFormat ?? defaultLogFormat(env.nodeEnv) });
  const log = logger.child({ module: 'app' });
  // One line per start-up step, so a slow first start shows where it is.
  let stepStart = performance.now();
  const elapsedMs = () => {
    const ms = Math.round(performance.now() - stepStart);
    stepStart = performance.now();
    return ms;
  };
  const engine = env.databaseUrl ? 'postgres' : 'pglite';
  const pgliteDir = join(env.dataDir, 'pglite');
  // main.ts may have started the copy already (and even finished it): this call shares it.
  if (!env.databaseUrl && (!existsSync(join(pgliteDir, 'PG_VERSION')) || isFirstStartOf(pgliteDir))) {
    log.info({ dataDir: env.dataDir }, 'database: creating the embedded PostgreSQL (first start only)');
    // From the seed `npm install` built, when there is one: a copy instead of initdb.
    await seedPgliteDataDir(pgliteDir);
    if (existsSync(join(pgliteDir, 'PG_VERSION'))) log.debug('database: copied from the installed seed');
  }
  const database: Database = await openDatabase({
    url: env.databaseUrl,
    dataDir: env.dataDir,
    poolSize: env.database.poolSize,
    connectTimeoutMs: env.database.connectTimeoutMs,
    namedStatements: env.fastPaths.statementNames,
  });
  log.info({ engine, ms: elapsedMs() }, 'database ready');
  const migrated = await migrate(database.raw);
  log.info(
    { applied: migrated.applied.length, upToDate: migrated.skipped.length, ms: elapsedMs() },
    migrated.applied.length > 0 ? 'migrations applied' : 'migrations up to date',
  );
  if (migrated.modified.length > 0)
    log.warn({ modified: migrated.modified }, 'applied migrations changed on disk');
  const keys = loadKeys({ secretKey: env.secretKey, dataDir: env.dataDir });
  const eventLog = createEventLog(database);
  const pubsub =
    options.pubsub ??
    createPubSub({
      broker: env.redisUrl ? createRedisBroker({ url: env.redisUrl, logger }) : createInProcessBroker(),
      log: eventLog,
      logger,
    });
  // Start-up does not block on Redis (queries and mutations work without it); a short wait avoids
  // reporting a freshly started process as unready.
  const transport = options.pubsub ? 'provided' : env.redisUrl ? 'redis' : 'in-process';
  if (await whenHealthy(pubsub, 3_000)) log.info({ transport, ms: elapsedMs() }, 'pub/sub ready');
  else log.warn({ transport }, 'pub/sub not reachable yet; retrying in the background');
  if (env.nodeEnv === 'production' && !env.previewDomain) {
    // Safe (every *.localhost name is a site of its own) but reachable only from this machine.
    log.warn('SINGULACOMP_PREVIEW_DOMAIN is not set: previews and share links open on *.localhost only');
  }
  const git = createGitService({ cacheDir: join(env.dataDir, 'git-cache'), now: options.now });
  const binDir = join(env.dataDir, 'bin');
  await installCliShim(binDir, log);
  const local = createLocalProvider({
    rootDir: join(env.dataDir, 'sandboxes'),
    entryCommand: env.localEntry ?? defaultEntryCommand(),
    passEnv: ['PATH', 'LANG', 'TZ', ...env.localPassEnv],
    clone: (repo, branch, dir, workspace) => git.cloneWorkspace(repo, branch, dir, workspace),
    binDir,
    isolation: localIsolation(env, log),
    apiPort: () => (url ? Number(new URL(url).port) : null),
    egressPorts: env.localEgressPorts,
    controlPlaneTimeoutMs: env.leaseTtlMs,
    identity: createLocalIdentityStore(database.prisma),
    onEntryExit: (id, exit) => services.reconciler.sandboxExited(id, exit),
  });
  // DOCKER (R-DOCK-1) when DOCKER_HOST is set: containers on that engine, images built through it.
  const docker = env.docker
    ? new DockerProvider({
        host: env.docker.host,
        tls: env.docker.tlsVerify && env.docker.certPath ? { certPath: env.docker.certPath } : null,
        dataDir: env.docker.dataDir ?? join(env.dataDir, 'docker-sandboxes'),
        runtimeDir: env.docker.runtimeDir ?? join(process.cwd(), 'dist/runtime/image'),
        runtimeVersion: env.runtimeVersion,
        packageFloor: env.docker.packageFloor,
        apiPort: () => (url ? Number(new URL(url).port) : null),
        egressPorts: env.localEgressPorts,
        clone: (repo, branch, dir, workspace) => git.cloneWorkspace(repo, branch, dir, workspace),
        pidsLimit: env.docker.pidsLimit,
        imageMaxAgeMs: env.docker.imageMaxAgeMs,
        imageMaxCount: env.docker.imageMaxCount,
      })
    : null;
  const providers: ProviderRegistry = createProviderRegistry([
    local,
    ...mergeProviders([...createCloudProviders(env), ...(docker ? [docker] : [])], options.providers),
  ]);

  let url = '';
  const metrics = createMetrics();
  const services = createServices({
    now: options.now,
    database,
    config: env,
    keys,
    logger,
    pubsub,
    git,
    providers,
    apiUrl: () => env.publicUrl ?? url,
    ...(env.fastPaths.findManySql ? { findManySql: findManySql(database.raw) } : {}),
    requestScope: { current: currentRequestId, run: withRequestId },
    onAdmissionRefused: () => metrics.admissionRefusals.inc(),
    onJobFailed: (queue) => metrics.jobFailures.inc({ queue }),
  });

  // One masker for both transports: yoga's (HTTP, and queries over WebSocket) and the subscriptions'.
  const maskError = createErrorMasker({
    logger,
    retryAfterSeconds: env.unavailableRetryAfterSeconds,
    onFault: (kind) => metrics.faults.inc({ kind }),
  });
  // The fast paths (server/fast-paths/README.md); with SINGULACOMP_FAST_PATHS=off, yoga alone.
  const compiler = env.fastPaths.jit ? createQueryCompiler(logger, schema) : null;
  const fastPath =
    compiler && env.fastPaths.http
      ? createGraphqlFastPath({
          services,
          compiler,
          maskError,
          errorMessage: UNEXPECTED_ERROR_MESSAGE,
          startOperation: metrics.startOperation,
          onOutcome: (outcome) => metrics.graphqlFastPath.inc({ outcome }),
        })
      : null;
  const yoga = createYoga<{ req?: IncomingMessage; principal?: Principal }, Context>({
    schema,
    graphqlEndpoint: '/graphql',
    landingPage: false,
    graphiql: env.graphiql ? (request) => graphiqlOptions(request, 'SingulaComp') : false,
    renderGraphiQL: renderGraphiql,
    // Unexpected errors never leak their message or stack; GraphQLErrors we raise pass through.
    maskedErrors: { isDev: false, maskError, errorMessage: UNEXPECTED_ERROR_MESSAGE },
    logging: false,
    // Enforced by useRequestBodyLimit below (last, after every request parser is registered).
    maxRequestBodySize: false,
    context: async ({ request, principal }): Promise<Context> =>
      principal
        ? wsContext(services, principal)
        : httpContext(services, request.headers.get('authorization')),
    plugins: [
      useIntrospectionGate(env.introspection),
      useWebSocketOnlySubscriptions(),
      EnvelopArmorPlugin({
        maxDepth: { n: 12, ignoreIntrospection: true, flattenFragments: true },
        maxAliases: { n: 20 },
        maxTokens: { n: 4_000 },
        maxDirectives: { n: 20 },
        // Fragments flattened, as for depth: a selection costs the same spelled inline or through
        // a fragment spread (unflattened, each spread multiplies its fields by depthCostFactor, and
        // the clients' shared fragments pushed their session and message lists past the limit).
        costLimit: {
          maxCost: 20_000,
          objectCost: 2,
          scalarCost: 1,
          depthCostFactor: 1.5,
          flattenFragments: true,
          ignoreIntrospection: true,
        },
        blockFieldSuggestion: { enabled: env.nodeEnv === 'production' },
      }),
      useCSRFPrevention({ requestHeaders: ['x-graphql-yoga-csrf', 'apollo-require-preflight'] }),
      metrics.plugin(),
      ...(compiler ? [useCompiledExecution(compiler)] : []),
      ...(fastPath ? [fastPath.plugin()] : []),
      useRequestBodyLimit(STREAMED_BODY_LIMIT_BYTES),
    ],
  });

  const llmGateway = createLlmGateway({ service: services.llmGateway, logger });
  const daemonProxy = createDaemonProxy({
    daemon: services.daemon,
    logger,
    pipe: env.fastPaths.daemonPipe,
  });
  const agentProxy = createAgentProxy({
    access: services.access,
    daemon: services.daemon,
    proxy: daemonProxy,
    logger,
  });
  const recordDownload = createRecordDownload({ services, logger });
  const previewProxy = createPreviewProxy({ access: services.access, proxy: daemonProxy, logger });
  const gitProxy = createGitProxy({ access: services.gitAccess, git, logger });

  let inFlight = 0;
  let draining = false;
  const drained = new Set<() => void>();
  /** Responses not yet finished: when the drain begins, each closes its connection after it. */
  const open = new Set<ServerResponse>();
  /** Counts a request for the drain and records its duration under a coarse route label. */
  const track = (res: ServerResponse, route: string): void => {
    inFlight++;
    open.add(res);
    const started = process.hrtime.bigint();
    res.once('close', () => {
      open.delete(res);
      metrics.httpDuration.observe(
        { route, status: String(res.statusCode) },
        Number(process.hrtime.bigint() - started) / 1e9,
      );
      inFlight--;
      if (inFlight === 0) for (const fn of drained) fn();
    });
  };
  const server = createServer(async (req: IncomingMessage, res: ServerResponse) => {
    const path = (req.url ?? '/').split('?')[0] ?? '/';
    // yoga and the proxies build a URL from Host and the path; a malformed one threw before any
    // handler (a 500 with a stack). It is the caller's error.
    if (!URL.canParse(`http://${req.headers.host ?? 'localhost'}${req.url ?? '/'}`)) {
      res.writeHead(400, { 'content-type': 'application/json' });
      res.end(
        JSON.stringify({
          errors: [{ message: 'Malformed Host header or URL.', extensions: { code: 'BAD_REQUEST' } }],
        }),
      );
      return;
    }
    const requestId = requestIdFrom(req.headers['x-request-id']);
    res.setHeader('x-request-id', requestId);
    // Subdomain previews own every path of their host, /healthz and /graphql included.
    if (previewProxy.matches(req, path)) {
      track(res, 'preview');
      await previewProxy.handle(req, res);
      return;
    }
    if (path === '/healthz' || path === '/readyz') {
      await answerHealth(path, res, { database, pubsub, draining: () => draining });
      return;
    }
    // A request that reaches a draining process (over a kept-alive connection: the listener is
    // closed) was not started: 503 with Retry-After says so, and a proxy may try another replica.
    if (draining && path !== '/metrics') {
      res.writeHead(503, { 'content-type': 'application/json', 'retry-after': '1', connection: 'close' });
      res.end(
        JSON.stringify({
          errors: [
            {
              message: 'The server is shutting down; retry.',
              extensions: { code: 'UNAVAILABLE', requestId },
            },
          ],
        }),
      );
      return;
    }
    if (path === '/metrics') {
      const body = await metrics.registry.metrics();
      res.writeHead(200, { 'content-type': metrics.registry.contentType }).end(body);
      return;
    }
    // Before the GraphQL body limit: a push carries a whole pack (the proxy has its own limit).
    if (gitProxy.matches(path)) {
      track(res, 'git');
      await gitProxy.handle(req, res);
      return;
    }
    if (env.graphiql && (await serveGraphiqlAsset(req, res))) return;
    // The gateway and the agent proxy carry their own body limits (screenshots, uploads).
    if (llmGateway.matches(path)) {
      track(res, 'llm');
      await llmGateway.handle(req, res);
      return;
    }
    if (recordDownload.matches(path)) {
      track(res, 'record');
      await withRequestId(requestId, () => recordDownload.handle(req, res, path));
      return;
    }
    if (agentProxy.matches(path)) {
      track(res, 'agent');
      await agentProxy.handle(req, res);
      return;
    }
    if (Number(req.headers['content-length'] ?? 0) > DECLARED_BODY_LIMIT_BYTES) {
      res.writeHead(413, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ errors: [{ message: 'Request body too large (limit 1 MiB).' }] }));
      return;
    }
    if (isWebhookPath(path)) {
      track(res, 'webhook');
      await handleWebhook(req, res, {
        triggers: services.triggers,
        logger,
        maxBodyBytes: DECLARED_BODY_LIMIT_BYTES,
      });
      return;
    }
    // The dashboard's files and its client routes (index.html); the API's paths are never its.
    if (await serveDashboard(req, res, path)) return;
    track(res, path === '/graphql' ? 'graphql' : 'other');
    try {
      if (fastPath?.accepts(req, path)) {
        await withRequestId(requestId, () => fastPath.handle(req, res, yoga));
        return;
      }
      // The plain request listener: handleNodeRequestAndResponse never answers on Node 20 here.
      await withRequestId(requestId, () => yoga.requestListener(req, res));
    } catch (error) {
      log.error({ err: error, requestId }, 'request failed');
      if (!res.headersSent) {
        res.writeHead(500, { 'content-type': 'application/json' });
        res.end(
          JSON.stringify({
            errors: [
              { message: UNEXPECTED_ERROR_MESSAGE, extensions: { code: 'INTERNAL_SERVER_ERROR', requestId } },
            ],
          }),
        );
      } else res.end();
    }
  });
  // An idle keep-alive connection stays open longer than clients and load balancers keep theirs
  // (60 s is common). With Node's 5 s default a client reusing a connection the server was just
  // closing gets ECONNRESET, a proxy a 502; on a loaded host that race was hit in practice.
  // headersTimeout must exceed it. stop() closes idle connections at once.
  server.keepAliveTimeout = 65_000;
  server.headersTimeout = 66_000;

  // Upgrades are routed here: graphql-ws on /graphql, the agent and preview proxies elsewhere (a
  // WebSocketServer bound to the HTTP server would answer 400 to every other path).
  const wss = new WebSocketServer({ noServer: true, maxPayload: DECLARED_BODY_LIMIT_BYTES });
  server.on('upgrade', (req: IncomingMessage, socket: Socket, head: Buffer) => {
    const path = (req.url ?? '/').split('?')[0] ?? '/';
    if (previewProxy.matches(req, path)) return void previewProxy.upgrade(req, socket, head);
    if (agentProxy.matches(path)) return void agentProxy.upgrade(req, socket, head);
    if (path === '/graphql') {
      if (draining) {
        socket.end(
          'HTTP/1.1 503 Service Unavailable\r\nretry-after: 1\r\nconnection: close\r\ncontent-length: 0\r\n\r\n',
        );
        return;
      }
      wss.handleUpgrade(req, socket, head, (ws) => wss.emit('connection', ws, req));
      return;
    }
    socket.end('HTTP/1.1 404 Not Found\r\nconnection: close\r\ncontent-length: 0\r\n\r\n');
  });
  const realtime = createRealtimeServer({
    wss,
    yoga,
    services,
    pubsub,
    log: eventLog,
    logger,
    maskError,
    compiler,
    options: options.realtime,
  });
  metrics.bind(
    services,
    () => realtime.connectionCount(),
    () => realtime.subscriptionCounts(),
  );
  const offReceived = pubsub.onReceived((topic, lagSeconds) =>
    metrics.pubsubLag.observe({ topic }, lagSeconds),
  );

  /** The admin token the start-up output links with (development only), if it is known. */
  let signInToken: string | null = null;
  const app: App = {
    services,
    url: '',
    bootstrapToken: null,
    async start() {
      // The admin exists before the port opens: once /healthz answers, the token file is there.
      if (options.bootstrap !== false) {
        elapsedMs();
        app.bootstrapToken = await createBootstrapAdmin(services, env.dataDir, log);
        log.info(
          { created: app.bootstrapToken !== null, ms: elapsedMs() },
          app.bootstrapToken ? 'bootstrap admin created' : 'bootstrap: users exist',
        );
        const tokenFile = join(env.dataDir, 'bootstrap-token');
        if (options.printBootstrapToken ?? env.nodeEnv !== 'test') {
          if (app.bootstrapToken) {
            // The token itself only on the first start, so an operator can log in (R-RUN-1).
            process.stdout.write(
              `\nSingulaComp bootstrap admin token (shown once; also in ${tokenFile}):\n  ${app.bootstrapToken}\n\n`,
            );
            signInToken = app.bootstrapToken;
          } else {
            // Every later start says where the token is: a newcomer who restarted has lost the first output.
            signInToken = await readFile(tokenFile, 'utf8').then(
              (text) => text.trim() || null,
              () => null,
            );
            process.stdout.write(
              signInToken
                ? `\nSingulaComp admin token: in ${tokenFile}\n`
                : `\nSingulaComp: no token file at ${tokenFile} (it is written on the first start only); sign in with a personal access token (createPersonalAccessToken).\n`,
            );
          }
        }
      }
      server.listen(env.port, env.host);
      await once(server, 'listening');
      const address = server.address();
      const port = typeof address === 'object' && address ? address.port : env.port;
      const host = env.host === '0.0.0.0' || env.host === '::' ? '127.0.0.1' : env.host;
      url = `http://${host}:${port}`;
      app.url = url;
      for (const failure of await local.reattach()) {
        log.error(
          { providerSandboxId: failure.id, err: failure.error },
          'could not reattach a LOCAL sandbox',
        );
      }
      await services.startBackground();
      services.reaper.start();
      services.triggers.start();
      log.info({ url: `${url}/graphql`, graphiql: env.graphiql }, 'listening');
      if (signInToken && env.graphiql) {
        // The token travels in the link's query string: only for the operator's own terminal, and
        // only in development (GraphiQL is off in production).
        process.stdout.write(`GraphiQL, signed in: ${url}/graphql?token=${signInToken}\n`);
        process.stdout.write(`Dashboard, token filled in: ${url}/?token=${signInToken}\n\n`);
      }
    },
    async stop() {
      draining = true;
      // Answers still being written end their connection: no request follows on it.
      for (const res of open) if (!res.headersSent) res.setHeader('connection', 'close');
      await services.reaper.stop();
      await services.triggers.stop();
      server.close();
      server.closeIdleConnections();
      if (inFlight > 0) {
        await Promise.race([
          new Promise<void>((resolve) => drained.add(resolve)),
          new Promise((resolve) => setTimeout(resolve, env.shutdownGraceMs)),
        ]);
      }
      server.closeAllConnections();
      offReceived();
      await realtime.close();
      wss.close();
      daemonProxy.close();
      llmGateway.close();
      // Bounded: provisioning still running after the grace period resumes on another process
      // (or on this one after a restart) from its durable job.
      await services.stopBackground(env.shutdownGraceMs);
      await services.telemetry.drain();
      await pubsub.close();
      await providers.close();
      await database.close();
    },
  };
  return app;
}
