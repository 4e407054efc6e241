// Redis broker (R-RUN-2): every process publishes on one channel and subscribes to it. Separate
// publish and subscribe connections, reconnecting with capped backoff. Publishing fails fast while
// Redis is down (no offline queue: a write must never wait on Redis); the event is already in the
// log and subscribers learn of the interruption through onHealth.
import { Redis, type RedisOptions } from 'ioredis';
import type { Logger } from './logger';
import { type Broker, PROCESS_ID } from './pubsub';
import type { Envelope } from '../resolvers/events/channels';

export interface RedisBrokerOptions {
  url: string;
  logger: Logger;
  /** @default 'singulacomp:events' */
  channel?: string;
  /** Longest wait between reconnect attempts. @default 2_000 */
  maxBackoffMs?: number;
  /**
   * Who "we" are on the channel (messages from ourselves were dispatched locally already).
   * @default this process's id — one broker per process
   */
  originId?: string;
}

interface Wire {
  o: string;
  e: Envelope;
}

export function createRedisBroker(options: RedisBrokerOptions): Broker {
  const log = options.logger.child({ module: 'pubsub-redis' });
  const channel = options.channel ?? 'singulacomp:events';
  const originId = options.originId ?? PROCESS_ID;
  const maxBackoffMs = options.maxBackoffMs ?? 2_000;
  const common: RedisOptions = {
    retryStrategy: (attempt) => Math.min(50 * 2 ** Math.min(attempt, 10), maxBackoffMs),
    maxRetriesPerRequest: 1,
    enableOfflineQueue: false,
    connectTimeout: 2_000,
    lazyConnect: false,
  };
  const pub = new Redis(options.url, { ...common, connectionName: 'singulacomp-pub' });
  // A subscriber connection cannot run the INFO ready check once subscribed.
  const sub = new Redis(options.url, {
    ...common,
    connectionName: 'singulacomp-sub',
    enableReadyCheck: false,
    autoResubscribe: false,
    enableOfflineQueue: true,
  });

  const messageListeners = new Set<(envelope: Envelope) => void>();
  const healthListeners = new Set<(healthy: boolean) => void>();
  let pubUp = false;
  let subUp = false;
  let closed = false;
  let reported = false;

  const report = () => {
    const now = pubUp && subUp;
    if (now === reported) return;
    reported = now;
    log.info({ healthy: now }, now ? 'pub/sub connected' : 'pub/sub unavailable');
    for (const listener of healthListeners) listener(now);
  };

  pub.on('ready', () => {
    pubUp = true;
    report();
  });
  pub.on('close', () => {
    pubUp = false;
    report();
  });
  sub.on('ready', () => {
    // Subscribe ourselves so "healthy" means the subscription is confirmed, not just the socket.
    sub.subscribe(channel).then(
      () => {
        subUp = true;
        report();
      },
      (error: unknown) => log.warn({ err: error }, 'subscribe failed'),
    );
  });
  sub.on('close', () => {
    subUp = false;
    report();
  });
  for (const client of [pub, sub]) {
    client.on('error', (error: Error) => {
      if (!closed) log.debug({ err: error }, 'redis connection error');
    });
  }
  sub.on('message', (_channel: string, text: string) => {
    let wire: Wire;
    try {
      wire = JSON.parse(text) as Wire;
    } catch {
      return;
    }
    // Our own events were dispatched locally when published.
    if (wire.o === originId) return;
    for (const listener of messageListeners) listener(wire.e);
  });

  return {
    async publish(envelope) {
      if (!pubUp) throw new Error('Redis is unavailable');
      await pub.publish(channel, JSON.stringify({ o: originId, e: envelope } satisfies Wire));
    },
    onMessage(listener) {
      messageListeners.add(listener);
      return () => messageListeners.delete(listener);
    },
    healthy: () => reported,
    onHealth(listener) {
      healthListeners.add(listener);
      return () => healthListeners.delete(listener);
    },
    async close() {
      closed = true;
      messageListeners.clear();
      healthListeners.clear();
      pub.disconnect();
      sub.disconnect();
    },
  };
}

/** Resolves once the broker reports healthy (or after timeoutMs; start-up does not block on Redis). */
export function whenHealthy(
  broker: Pick<Broker, 'healthy' | 'onHealth'>,
  timeoutMs: number,
): Promise<boolean> {
  if (broker.healthy()) return Promise.resolve(true);
  return new Promise((resolve) => {
    const timer = setTimeout(() => {
      off();
      resolve(false);
    }, timeoutMs);
    const off = broker.onHealth((healthy) => {
      if (!healthy) return;
      clearTimeout(timer);
      off();
      resolve(true);
    });
  });
}
