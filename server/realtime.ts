// graphql-ws on /graphql (SPEC §11): authentication in connection_init, connections tracked per
// token so an expiry (4401) or a revocation seen on any process (4403) closes them, per-token
// connection limits, server pings, slow-consumer closes (4420) and the event-log pruner.
import { randomUUID } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import type { Socket } from 'node:net';
import {
  GraphQLError,
  type ExecutionArgs,
  type ExecutionResult,
  type OperationDefinitionNode,
} from 'graphql';
import { contextCacheSymbol } from '@pothos/core';
import { useServer } from 'graphql-ws/use/ws';
import type { YogaServerInstance } from 'graphql-yoga';
import type { WebSocket, WebSocketServer } from 'ws';
import type { Principal } from '../resolvers/auth/principal';
import type { Services } from '../resolvers/services';
import type { ConnectionHandle, Context } from '../schema/builder';
import { UNEXPECTED_ERROR_MESSAGE, withRequestId } from './faults';
import type { QueryCompiler } from './fast-paths/compiled-execution';
import { isAsyncIterable, subscribeWith } from './fast-paths/compiled-subscriptions';
import type { Logger } from './logger';
import type { PubSub } from '../resolvers/events/channels';
import type { EventLog } from '../resolvers/events/event-log';

/** WebSocket close codes this server uses (4400–4499 mirror HTTP statuses, as graphql-ws does). */
export const CLOSE_CODES = {
  /** Token missing, invalid or expired. Fatal for the graphql-ws client: get a new token. */
  unauthorized: 4401,
  /** Token revoked while connected. */
  revoked: 4403,
  /** The connection never sent connection_init in time (graphql-ws's own code). */
  initTimeout: 4408,
  /** Too many sockets for one token. */
  tooManyConnections: 4429,
  /** The client read too slowly; resubscribe with `after` set to the last seq received. */
  slowConsumer: 4420,
} as const;

export interface RealtimeOptions {
  /** Interval of WebSocket pings (a missing pong terminates the socket). @default 12_000 */
  keepAliveMs?: number;
  /** Close a connection that has not sent connection_init by then. @default 10_000 */
  connectionInitWaitTimeoutMs?: number;
  /** Open sockets one token may hold on one process. @default 100 */
  maxConnectionsPerToken?: number;
  /** Concurrent operations on one socket. @default 5_000 */
  maxSubscriptionsPerConnection?: number;
  /** Undelivered status/phase events per subscription before the socket is closed (4420). @default 1_000 */
  maxBufferedEvents?: number;
  /** How often connected tokens are re-read (catches revocations a pub/sub outage hid). @default 30_000 */
  revalidateIntervalMs?: number;
  /** How long events stay replayable. @default 3_600_000 */
  eventRetentionMs?: number;
  /** @default 60_000 */
  pruneIntervalMs?: number;
}

interface Tracked {
  socket: WebSocket;
  principal: Principal;
  expiry: NodeJS.Timeout | null;
}

type Yoga = YogaServerInstance<{ req?: IncomingMessage; principal?: Principal }, Context>;

export interface RealtimeServer {
  /** Open sockets per token id (tests, metrics). */
  connectionCount(tokenId?: string): number;
  /** Open subscription streams on this process by root field (metrics). */
  subscriptionCounts(): Map<string, number>;
  close(): Promise<void>;
}

/** The root field of a subscription document's operation. */
function rootField(args: ExecutionArgs): string {
  const operation = args.document.definitions.find(
    (d): d is OperationDefinitionNode =>
      d.kind === 'OperationDefinition' && (!args.operationName || d.name?.value === args.operationName),
  );
  const first = operation?.selectionSet.selections[0];
  return first?.kind === 'Field' ? first.name.value : 'unknown';
}

/**
 * The same stream, counted in `counts[field]` from now until it ends however it ends: returned by
 * graphql-ws (complete, socket close) here, exhausted or failed through the onComplete and onError
 * hooks. A class with no async step of its own: an idle subscription keeps no frame for it.
 */
class Counted<T> implements AsyncGenerator<T> {
  private open = true;

  constructor(
    private readonly iterator: AsyncIterator<T>,
    private readonly field: string,
    private readonly counts: Map<string, number>,
  ) {
    counts.set(field, (counts.get(field) ?? 0) + 1);
  }

  /** Stops counting this stream (once). */
  close(): void {
    if (!this.open) return;
    this.open = false;
    const n = (this.counts.get(this.field) ?? 1) - 1;
    if (n > 0) this.counts.set(this.field, n);
    else this.counts.delete(this.field);
  }

  next(...args: [] | [unknown]): Promise<IteratorResult<T>> {
    return this.iterator.next(...args);
  }

  return(value?: unknown): Promise<IteratorResult<T>> {
    this.close();
    return this.iterator.return
      ? this.iterator.return(value)
      : Promise.resolve({ done: true, value: value as T });
  }

  throw(error: unknown): Promise<IteratorResult<T>> {
    this.close();
    return this.iterator.throw ? this.iterator.throw(error) : Promise.reject(error);
  }

  [Symbol.asyncIterator](): AsyncGenerator<T> {
    return this;
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.return(undefined);
  }
}

/** The stream graphql-ws holds for an operation, if it is one we count. */
function countedOf(subscriptions: Record<string, unknown>, id: string): Counted<unknown> | null {
  const stream = subscriptions[id];
  return stream instanceof Counted ? stream : null;
}

/**
 * Pothos keys its per-request caches (scope-auth results, read checks, Prisma loaders) on this property when
 * present. A subscription's context lives as long as the subscription: a fresh key after subscribing
 * and after each event lets the caches of finished work be collected instead of held per idle
 * subscription (what they cache is recomputed for the next event).
 */
function freshPothosCaches(contextValue: unknown): void {
  (contextValue as Record<symbol, object>)[contextCacheSymbol] = {};
}

/** What every subscription handle of one server shares. */
interface HandleShared {
  logger: Logger;
  /** Token expiry on the services' clock (the one `authenticate` checks against). */
  tokens: Pick<Services['tokens'], 'expired'>;
  maxBufferedEvents: number;
}

/**
 * A subscription's view of its connection (Context.connection): token checks, the seq of the event
 * being delivered (read back by onNext), the slow-consumer close. Methods live on the prototype.
 */
class SubscriptionHandle implements ConnectionHandle {
  /** The seq of the event being delivered; undefined before the first. */
  seq: number | undefined = undefined;

  constructor(
    readonly principal: Principal,
    private readonly socket: WebSocket,
    private readonly shared: HandleShared,
  ) {}

  get maxBufferedEvents(): number {
    return this.shared.maxBufferedEvents;
  }

  assertValid(): void {
    if (!this.shared.tokens.expired(this.principal)) return;
    this.socket.close(CLOSE_CODES.unauthorized, 'Token expired');
    throw new GraphQLError('Token expired.', { extensions: { code: 'UNAUTHENTICATED' } });
  }

  delivered(seq: number): void {
    this.seq = seq;
  }

  slowConsumer(lastSeq: number): void {
    this.shared.logger.info({ tokenId: this.principal.tokenId, lastSeq }, 'closing slow consumer');
    this.socket.close(CLOSE_CODES.slowConsumer, `Slow consumer: resubscribe with after: ${lastSeq}`);
  }
}

/**
 * Bytes a socket may hold unsent before a send waits for its write again (see coalesceSends).
 * Beyond it graphql-ws waits for each write, its stream's buffer fills, and a reader that stays too
 * slow is closed (4420) as before.
 */
const SEND_AHEAD_BYTES = 64 * 1024;

/**
 * graphql-ws sends each event as one WebSocket message and waits for that write to complete before
 * taking the next event, so every event cost a system call of its own (writev: the largest part of
 * delivering a text delta, 10,000 of them a second per stream). Here the socket's writes are held
 * (cork) until the current run of callbacks and promise jobs is over, so the events of one batch go
 * out in one write, in order; a send is answered at once while the socket holds less than
 * SEND_AHEAD_BYTES unsent, and only when its write completes beyond that (backpressure as before).
 * A failed write still closes the socket ('error' → close), which ends its subscriptions.
 */
export function coalesceSends(socket: WebSocket): void {
  const raw = (socket as unknown as { _socket?: Socket })._socket;
  if (!raw) return;
  const send = socket.send.bind(socket);
  let corked = false;
  const uncork = () => {
    corked = false;
    raw.uncork();
  };
  socket.send = ((data: string, cb?: (error?: Error) => void) => {
    if (!corked) {
      corked = true;
      raw.cork();
      process.nextTick(uncork);
    }
    if (!cb || socket.bufferedAmount >= SEND_AHEAD_BYTES) return send(data, cb);
    send(data);
    queueMicrotask(cb);
  }) as WebSocket['send'];
}

export function createRealtimeServer(deps: {
  wss: WebSocketServer;
  yoga: Yoga;
  services: Services;
  pubsub: PubSub;
  log: EventLog;
  logger: Logger;
  /** yoga's error masker (server/faults.ts), applied here to what subscriptions deliver. */
  maskError: (error: unknown, message: string) => Error;
  /** When set, each subscription event runs the document's compiled query (fast-paths/compiled-subscriptions.ts). */
  compiler?: QueryCompiler | null;
  options?: RealtimeOptions;
}): RealtimeServer {
  const { wss, yoga, services, pubsub } = deps;
  const opts = deps.options ?? {};
  const logger = deps.logger.child({ module: 'realtime' });
  const maxConnectionsPerToken = opts.maxConnectionsPerToken ?? 100;
  const maxSubscriptions = opts.maxSubscriptionsPerConnection ?? 5_000;
  const maxBufferedEvents = opts.maxBufferedEvents ?? 1_000;
  const byToken = new Map<string, Set<Tracked>>();
  const subscriptions = new Map<string, number>();
  const handleShared: HandleShared = { logger, maxBufferedEvents, tokens: services.tokens };
  const expired = (principal: Principal) => services.tokens.expired(principal);
  let rootValue: { execute: unknown } = { execute: undefined };
  /** The result with its errors masked as yoga masks them; the same object when it has none. */
  const masked = (result: ExecutionResult): ExecutionResult =>
    result.errors
      ? {
          ...result,
          errors: result.errors.map(
            (error) => deps.maskError(error, UNEXPECTED_ERROR_MESSAGE) as GraphQLError,
          ),
        }
      : result;

  function closeToken(tokenId: string, code: number, reason: string): void {
    const set = byToken.get(tokenId);
    if (!set) return;
    logger.info({ tokenId, code, sockets: set.size }, 'closing sockets of token');
    for (const tracked of [...set]) tracked.socket.close(code, reason);
  }

  function untrack(tracked: Tracked): void {
    if (tracked.expiry) clearTimeout(tracked.expiry);
    const set = byToken.get(tracked.principal.tokenId);
    set?.delete(tracked);
    if (set?.size === 0) byToken.delete(tracked.principal.tokenId);
  }

  const offLocal = services.tokens.onRevoked((tokenId) => {
    closeToken(tokenId, CLOSE_CODES.revoked, 'Token revoked');
    void services.events.tokenRevoked(tokenId);
  });
  const offRemote = pubsub.onControl('tokenRevoked', ({ tokenId }) => {
    services.tokens.forget(tokenId);
    closeToken(tokenId, CLOSE_CODES.revoked, 'Token revoked');
  });

  // Safety net for revocations whose message a pub/sub outage swallowed.
  const revalidate = setInterval(async () => {
    const ids = [...byToken.keys()];
    for (let i = 0; i < ids.length; i += 500) {
      const chunk = ids.slice(i, i + 500);
      try {
        const live = await services.tokens.unrevoked(chunk);
        for (const id of chunk) if (!live.has(id)) closeToken(id, CLOSE_CODES.revoked, 'Token revoked');
      } catch (error) {
        logger.warn({ err: error }, 'token revalidation failed');
      }
    }
  }, opts.revalidateIntervalMs ?? 30_000);
  revalidate.unref();

  const retentionMs = opts.eventRetentionMs ?? 3_600_000;
  const prune = setInterval(() => {
    deps.log
      .prune(retentionMs)
      .catch((error: unknown) => logger.warn({ err: error }, 'event log prune failed'));
  }, opts.pruneIntervalMs ?? 60_000);
  prune.unref();

  const server = useServer<Record<string, unknown> | undefined, { principal?: Principal }>(
    {
      connectionInitWaitTimeout: opts.connectionInitWaitTimeoutMs ?? 10_000,
      onConnect: async (ctx) => {
        const socket = ctx.extra.socket;
        const authorization = ctx.connectionParams?.authorization;
        let principal: Principal | null = null;
        try {
          principal = await services.tokens.authenticate(
            typeof authorization === 'string'
              ? /^Bearer\s/i.test(authorization)
                ? authorization
                : `Bearer ${authorization}`
              : null,
          );
        } catch {
          principal = null;
        }
        if (!principal || expired(principal)) {
          socket.close(CLOSE_CODES.unauthorized, 'Unauthorized');
          return false;
        }
        const set = byToken.get(principal.tokenId) ?? new Set<Tracked>();
        if (set.size >= maxConnectionsPerToken) {
          socket.close(
            CLOSE_CODES.tooManyConnections,
            `Too many connections for this token (limit ${maxConnectionsPerToken})`,
          );
          return false;
        }
        if (socket.readyState !== socket.OPEN) return false;
        coalesceSends(socket);
        const tracked: Tracked = { socket, principal, expiry: null };
        const untilExpiry = services.tokens.msUntilExpiry(principal);
        if (untilExpiry !== null) {
          const ms = Math.min(untilExpiry, 2_147_483_647);
          tracked.expiry = setTimeout(() => socket.close(CLOSE_CODES.unauthorized, 'Token expired'), ms);
          tracked.expiry.unref();
        }
        set.add(tracked);
        byToken.set(principal.tokenId, set);
        socket.once('close', () => untrack(tracked));
        (ctx.extra as { principal?: Principal }).principal = principal;
        return true;
      },
      onSubscribe: async (ctx, _id, params) => {
        const principal = (ctx.extra as { principal?: Principal }).principal;
        const socket = ctx.extra.socket;
        if (!principal)
          return [new GraphQLError('Unauthorized', { extensions: { code: 'UNAUTHENTICATED' } })];
        if (expired(principal)) {
          socket.close(CLOSE_CODES.unauthorized, 'Token expired');
          return [new GraphQLError('Token expired.', { extensions: { code: 'UNAUTHENTICATED' } })];
        }
        if (Object.keys(ctx.subscriptions).length > maxSubscriptions) {
          return [
            new GraphQLError(
              `Too many operations on one connection (limit ${maxSubscriptions}); open another socket.`,
              {
                extensions: { code: 'TOO_MANY_SUBSCRIPTIONS' },
              },
            ),
          ];
        }
        const enveloped = yoga.getEnveloped({ principal, params, req: ctx.extra.request });
        const document = enveloped.parse(params.query);
        const errors = enveloped.validate(enveloped.schema, document);
        if (errors.length > 0) return errors;
        const contextValue = (await enveloped.contextFactory()) as object;
        (contextValue as Context).connection = new SubscriptionHandle(principal, socket, handleShared);
        freshPothosCaches(contextValue);
        // execute is the same function for every operation: share one root value.
        if (rootValue.execute !== enveloped.execute) rootValue = { execute: enveloped.execute };
        const args = {
          schema: enveloped.schema,
          operationName: params.operationName,
          document,
          variableValues: params.variables,
          contextValue,
          rootValue,
        };
        return args as unknown as ExecutionArgs;
      },
      // A stream that ended (exhausted, or failed: onError runs first) is no longer counted.
      onError: (ctx, id) => {
        countedOf(ctx.subscriptions, id)?.close();
        return undefined;
      },
      onComplete: (ctx, id) => {
        countedOf(ctx.subscriptions, id)?.close();
      },
      // Every event carries its per-topic seq: the value to pass as `after` when resuming. Errors are
      // masked here for subscriptions (they bypass envelop, below); a query's were masked by yoga
      // already, and masking is idempotent.
      onNext: (_ctx, _id, _payload, args, result) => {
        freshPothosCaches(args.contextValue);
        const seq = ((args.contextValue as Context).connection as SubscriptionHandle | undefined)?.seq;
        const answer = masked(result as ExecutionResult);
        if (seq === undefined) return answer === result ? undefined : answer;
        const extensions = answer.extensions ? { ...answer.extensions, seq } : { seq };
        if (answer !== result) return { ...answer, extensions };
        // Each event's result is its own (executed for this event alone): it takes the seq itself
        // instead of being copied once more per event.
        (result as { extensions?: unknown }).extensions = extensions;
        return result as ExecutionResult;
      },
      // Each operation gets a request id, so an unexpected error it meets is logged with one.
      execute: (args) =>
        withRequestId(randomUUID(), () =>
          (args.rootValue as { execute: (a: unknown) => never }).execute(args),
        ),
      // graphql-js's subscribe, not envelop's: envelop's layers (its hooks and three async-iterator
      // wrappers) held about half of every idle subscription's memory (bench/subscriptions.ts: 8.6 KB
      // with them, 4.2 KB without), for one hook a subscription here needs: the error masking that
      // onNext above applies. A subscription refused at its start is answered once by onNext and
      // completed; its errors are masked here already, where the masker logs them with the
      // operation's request id.
      subscribe: (args) =>
        withRequestId(randomUUID(), async () => {
          const result = await subscribeWith(deps.compiler ?? null, args);
          if (!isAsyncIterable(result)) return masked(result);
          freshPothosCaches(args.contextValue);
          const stream = (result as AsyncIterable<ExecutionResult>)[Symbol.asyncIterator]();
          return new Counted(stream, rootField(args), subscriptions);
        }),
    },
    wss,
    opts.keepAliveMs ?? 12_000,
  );

  return {
    subscriptionCounts: () => new Map(subscriptions),
    connectionCount(tokenId) {
      if (tokenId) return byToken.get(tokenId)?.size ?? 0;
      let n = 0;
      for (const set of byToken.values()) n += set.size;
      return n;
    },
    async close() {
      offLocal();
      offRemote();
      clearInterval(revalidate);
      clearInterval(prune);
      for (const client of wss.clients) client.close(1001, 'Server shutting down');
      await server.dispose();
    },
  };
}
