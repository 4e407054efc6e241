// Typed realtime channels and the one pub/sub every server process uses (SPEC §11, R-RUN-2).
//
// An event is appended to the database event log (which assigns its per-topic monotonic `seq`) and
// then broadcast through a broker: in-process by default, Redis when REDIS_URL is set
// (server/pubsub-redis.ts). Subscribers replay what they missed (`after`) from the log, then follow
// the broker, dropping duplicates and filling gaps from the log, so a stream has no duplicate and no
// gap even when two processes publish concurrently or a subscriber reconnects.
import { randomUUID } from 'node:crypto';
import { EventEmitter } from 'node:events';
import type { Logger } from './logger';
import type { EventLog } from '../resolvers/events/event-log';
import {
  CONTROL_TOPICS,
  type Envelope,
  type PubSub,
  type StreamObserver,
  type StreamTopic,
  StreamInterruptedError,
  type SubscribeOptions,
} from '../resolvers/events/channels';

/** Carries envelopes to every server process. */
export interface Broker {
  /**
   * true: this process is the only one (the in-process broker). The pub/sub dispatches every event
   * to this process's subscribers when it is published, so nothing is handed to the broker.
   */
  readonly local?: boolean;
  publish(envelope: Envelope): Promise<void>;
  onMessage(listener: (envelope: Envelope) => void): () => void;
  /** true while messages flow to and from every process. */
  healthy(): boolean;
  onHealth(listener: (healthy: boolean) => void): () => void;
  close(): Promise<void>;
}

/**
 * One process, no transport: its events reach its subscribers by the pub/sub's local dispatch alone.
 * Nothing comes back through it (an event handed back would be dispatched a second time, to be
 * dropped as a duplicate, a control event would fire twice, and the pub/sub lag histogram would
 * count a lag of zero for every event, which no transport carried).
 */
export function createInProcessBroker(): Broker {
  return {
    local: true,
    async publish() {},
    onMessage: () => () => {},
    healthy: () => true,
    onHealth: () => () => {},
    async close() {},
  };
}

export interface PubSubOptions {
  broker: Broker;
  log: EventLog;
  logger: Logger;
  /** Events replayed per `after` request before the stream reports REPLAY_UNAVAILABLE. @default 10_000 */
  maxReplay?: number;
}

/**
 * The streams of this process by topic, then key. A key with one subscriber (the common case) holds
 * the stream itself; a second one turns the entry into an array.
 */
class Registry {
  private readonly topics = new Map<string, Map<string, EventStream | EventStream[]>>();
  count = 0;

  add(stream: EventStream): void {
    let keys = this.topics.get(stream.topic);
    if (!keys) {
      keys = new Map();
      this.topics.set(stream.topic, keys);
    }
    const entry = keys.get(stream.key);
    if (entry === undefined) keys.set(stream.key, stream);
    else if (Array.isArray(entry)) entry.push(stream);
    else keys.set(stream.key, [entry, stream]);
    this.count++;
  }

  /** Called once by a stream when it ends. */
  remove(stream: EventStream): void {
    const keys = this.topics.get(stream.topic);
    const entry = keys?.get(stream.key);
    if (!keys || entry === undefined) return;
    if (entry === stream) keys.delete(stream.key);
    else if (Array.isArray(entry)) {
      const i = entry.indexOf(stream);
      if (i < 0) return;
      entry.splice(i, 1);
      if (entry.length === 1) keys.set(stream.key, entry[0]!);
    } else return;
    if (keys.size === 0) this.topics.delete(stream.topic);
    this.count--;
  }

  dispatch(envelope: Envelope): void {
    const entry = this.topics.get(envelope.topic)?.get(envelope.key);
    if (entry === undefined) return;
    if (!Array.isArray(entry)) entry.push(envelope);
    // A stream that ends while being pushed to leaves the array: iterate over a copy.
    else for (const stream of [...entry]) stream.push(envelope);
  }

  all(): EventStream[] {
    const out: EventStream[] = [];
    for (const keys of this.topics.values())
      for (const entry of keys.values()) {
        if (Array.isArray(entry)) out.push(...entry);
        else out.push(entry);
      }
    return out;
  }
}

export function createPubSub(options: PubSubOptions): PubSub {
  const { broker, log } = options;
  /** Whether other processes hear of this one's events through the broker. */
  const remote = broker.local !== true;
  const logger = options.logger.child({ module: 'pubsub' });
  const maxReplay = options.maxReplay ?? 10_000;
  const registry = new Registry();
  const control = new EventEmitter();
  control.setMaxListeners(0);
  const shared: StreamShared = { log, maxReplay, registry, logger };

  const dispatch = (envelope: Envelope) => {
    if (CONTROL_TOPICS.has(envelope.topic)) {
      control.emit(envelope.topic, envelope.payload);
      return;
    }
    registry.dispatch(envelope);
  };
  const received = new EventEmitter();
  received.setMaxListeners(0);
  // `at` is transport metadata: subscribers get the envelope as the log holds it.
  const offMessage = broker.onMessage(({ at, ...envelope }) => {
    if (typeof at === 'number')
      received.emit('received', envelope.topic, Math.max(0, Date.now() - at) / 1000);
    dispatch(envelope as Envelope);
  });
  const offHealth = broker.onHealth((healthy) => {
    if (healthy) return;
    for (const stream of registry.all())
      stream.fail(
        new StreamInterruptedError(
          'PUBSUB_UNAVAILABLE',
          'Event delivery is interrupted (pub/sub unavailable). Resubscribe with `after` set to the last seq you received.',
          stream.lastSeq,
        ),
      );
  });

  const pubsub: PubSub = {
    async publish(topic, key, payload) {
      if (CONTROL_TOPICS.has(topic)) {
        const envelope: Envelope = { topic, key, seq: 0, payload } as Envelope;
        // Local delivery never depends on the broker being up.
        dispatch(envelope);
        if (remote) await broker.publish({ ...envelope, at: Date.now() });
        return null;
      }
      const seq = await log.append(topic as StreamTopic, key, payload as never);
      await pubsub.broadcast({ topic, key, seq, payload } as Envelope);
      return seq;
    },
    async publishMany(topic, key, payloads) {
      if (payloads.length === 0) return [];
      const seqs = await log.appendMany(topic, key, payloads);
      await pubsub.broadcastMany(
        payloads.map((payload, i) => ({ topic, key, seq: seqs[i]!, payload }) as Envelope),
      );
      return seqs;
    },
    async broadcastMany(envelopes) {
      // Local subscribers first, all of them, then the broker in order (one connection: in order).
      for (const envelope of envelopes) dispatch(envelope);
      if (!remote) return;
      const at = Date.now();
      await Promise.all(
        envelopes.map((envelope) =>
          broker.publish({ ...envelope, at }).catch((error: unknown) => {
            logger.warn(
              { err: error, topic: envelope.topic, key: envelope.key, seq: envelope.seq },
              'broadcast failed',
            );
          }),
        ),
      );
    },
    async publishSession(payload) {
      const { seq, accountSeq } = await log.appendSession(payload);
      await pubsub.broadcast({ topic: 'sessionUpdated', key: payload.sessionId, seq, payload });
      await pubsub.broadcast({
        topic: 'accountSessions',
        key: payload.accountId,
        seq: accountSeq,
        payload: { ...payload, sessionSeq: seq },
      });
      return seq;
    },
    async record(tx, topic, key, payload) {
      const seq = await log.append(topic, key, payload, tx);
      return { topic, key, seq, payload };
    },
    async broadcast(envelope) {
      // Local subscribers first: a process never waits on Redis to see its own writes.
      dispatch(envelope);
      if (!remote) return;
      try {
        await broker.publish({ ...envelope, at: Date.now() });
      } catch (error) {
        // The event is in the log; remote subscribers were (or will be) told the stream broke.
        logger.warn(
          { err: error, topic: envelope.topic, key: envelope.key, seq: envelope.seq },
          'broadcast failed',
        );
      }
    },
    subscribe(topic, key, subscribeOptions = {}) {
      const stream = new EventStream(topic, key, subscribeOptions, shared);
      registry.add(stream);
      if (!broker.healthy()) {
        // Told on the first read, like any interruption of the stream.
        stream.fail(
          new StreamInterruptedError(
            'PUBSUB_UNAVAILABLE',
            'Event delivery is unavailable (pub/sub down). Retry with `after` shortly.',
            subscribeOptions.after ?? null,
          ),
        );
      } else stream.start();
      return stream as unknown as AsyncIterableIterator<Envelope<typeof topic>>;
    },
    onControl(topic, listener) {
      control.on(topic, listener as (payload: unknown) => void);
      return () => control.off(topic, listener as (payload: unknown) => void);
    },
    currentSeq: (topic, key) => log.currentSeq(topic, key),
    healthy: () => broker.healthy(),
    onHealth: (listener) => broker.onHealth(listener),
    subscriptionCount: () => registry.count,
    onReceived(listener) {
      received.on('received', listener);
      return () => received.off('received', listener);
    },
    async close() {
      offMessage();
      offHealth();
      for (const stream of registry.all()) stream.end();
      control.removeAllListeners();
      received.removeAllListeners();
      await broker.close();
    },
  };
  return pubsub;
}

interface Queued {
  envelope: Envelope;
  live: boolean;
}

/** What every stream of one pub/sub shares (one object, not one closure per stream). */
interface StreamShared {
  log: EventLog;
  maxReplay: number;
  registry: Registry;
  logger: Logger;
}

/**
 * One subscription's ordered stream: replay from the log, then live events from the broker.
 * Events arriving during replay or gap filling wait in `pending`; anything at or below `lastSeq`
 * is a duplicate and dropped; a jump in seq is filled from the log before the jumping event.
 *
 * An idle stream is small: its buffers are allocated on first use, the abort signal calls the
 * stream itself (handleEvent), and it leaves the registry through the shared object.
 */
class EventStream implements AsyncIterableIterator<Envelope> {
  lastSeq: number | null;
  private queue: Queued[] | null = null;
  private pending: Envelope[] | null = null;
  private busy = true;
  private done = false;
  private error: Error | null = null;
  private waiter: ((result: IteratorResult<Envelope>) => void) | null = null;
  private rejecter: ((error: Error) => void) | null = null;
  private readonly maxBuffered: number;
  private readonly coalesce: boolean;
  private readonly observer: StreamObserver | undefined;
  private readonly signal: AbortSignal | undefined;

  constructor(
    readonly topic: StreamTopic,
    readonly key: string,
    options: SubscribeOptions,
    private readonly shared: StreamShared,
  ) {
    this.lastSeq = options.after ?? null;
    this.maxBuffered = options.maxBuffered ?? 1_000;
    this.coalesce = options.coalesce === true;
    this.observer = options.observer;
    this.signal = options.signal;
    this.signal?.addEventListener('abort', this, { once: true });
  }

  /** The abort signal's listener. */
  handleEvent(): void {
    this.end();
  }

  start(): void {
    const { log } = this.shared;
    if (this.lastSeq === null) {
      // A live-only stream starts after the topic's current seq. Without that baseline the first
      // event to arrive would define the start, and an earlier one still on its way through the
      // broker (another process published it) would be dropped as old: a silent gap. Events
      // delivered to this stream while the baseline was being read were published after it
      // subscribed, so they are live even when the read already counted them.
      void log.currentSeq(this.topic, this.key).then(
        (seq) => {
          if (this.lastSeq === null) {
            let start = seq;
            if (this.pending) for (const envelope of this.pending) start = Math.min(start, envelope.seq - 1);
            this.lastSeq = start;
          }
          this.drain();
        },
        (error: unknown) => {
          this.shared.logger.warn(
            { err: error, topic: this.topic, key: this.key },
            'could not read the current seq',
          );
          this.drain();
        },
      );
      return;
    }
    void this.fill(this.lastSeq, null).then(() => this.drain());
  }

  push(envelope: Envelope): void {
    if (this.done) return;
    if (this.busy) {
      if (!this.pending) this.pending = [];
      const pending = this.pending;
      if (pending.length >= this.maxBuffered + this.shared.maxReplay) this.overflow();
      else pending.push(envelope);
      return;
    }
    this.accept(envelope);
  }

  private accept(envelope: Envelope): void {
    if (this.lastSeq !== null && envelope.seq <= this.lastSeq) return;
    if (this.lastSeq !== null && envelope.seq > this.lastSeq + 1) {
      // Another process's event overtook this one, or the broker dropped one: read the gap (also on
      // coalesced streams: coalescing merges what a slow reader has not taken yet, it never skips
      // an event the reader was never given the chance to see in order).
      this.busy = true;
      if (!this.pending) this.pending = [];
      this.pending.unshift(envelope);
      void this.fill(this.lastSeq, envelope.seq).then(() => this.drain());
      return;
    }
    this.enqueue(envelope, true);
  }

  private drain(): void {
    this.busy = false;
    while (!this.busy && !this.done && this.pending && this.pending.length > 0)
      this.accept(this.pending.shift()!);
    if (!this.busy && this.pending?.length === 0) this.pending = null;
  }

  /** Reads (after, before) from the log into the queue. */
  private async fill(after: number, before: number | null): Promise<void> {
    const { log, maxReplay } = this.shared;
    try {
      let events = await log.range(this.topic, this.key, after, before, maxReplay + 1);
      if (this.done) return;
      let first = events[0];
      let missing = first ? first.seq !== after + 1 : before !== null && before > after + 1;
      // Nothing retained after `after`: fine only if nothing was ever written after it. An event
      // appended between the two reads is not a loss: read the range once more.
      if (!first && before === null && (await log.currentSeq(this.topic, this.key)) > after) {
        events = await log.range(this.topic, this.key, after, before, maxReplay + 1);
        first = events[0];
        missing = first?.seq !== after + 1;
      }
      if (this.done) return;
      if (missing || events.length > maxReplay) {
        this.fail(
          new StreamInterruptedError(
            'REPLAY_UNAVAILABLE',
            `Events after seq ${after} are no longer retained; re-read the current state and subscribe without \`after\`.`,
            after,
          ),
        );
        return;
      }
      for (const envelope of events) this.enqueue(envelope, false);
    } catch (error) {
      this.shared.logger.warn({ err: error, topic: this.topic, key: this.key }, 'replay read failed');
      this.fail(
        new StreamInterruptedError(
          'REPLAY_UNAVAILABLE',
          'Could not read missed events; resubscribe with `after` set to the last seq you received.',
          this.lastSeq,
        ),
      );
    }
  }

  private enqueue(envelope: Envelope, live: boolean): void {
    if (this.done) return;
    this.lastSeq = envelope.seq;
    if (this.waiter) {
      const resolve = this.waiter;
      const reject = this.rejecter!;
      this.waiter = null;
      this.rejecter = null;
      const error = this.hand(envelope);
      if (error) reject(error);
      else resolve({ value: envelope, done: false });
      return;
    }
    if (!this.queue) this.queue = [];
    const queue = this.queue;
    const tail = queue[queue.length - 1];
    if (live && this.coalesce && tail?.live) {
      tail.envelope = envelope;
      return;
    }
    if (queue.length >= this.maxBuffered) {
      this.overflow();
      return;
    }
    queue.push({ envelope, live });
  }

  /**
   * Hands an event to the consumer: runs the subscriber's per-event check (the observer). A check
   * that throws ends the stream, and its error is what the consumer's read gets.
   */
  private hand(envelope: Envelope): Error | null {
    if (!this.observer) return null;
    try {
      this.observer.delivered(envelope);
      return null;
    } catch (error) {
      this.queue = null;
      this.error = null;
      this.end();
      return error as Error;
    }
  }

  private overflow(): void {
    const seq = this.deliveredSeq();
    if (this.observer?.overflow) {
      // The connection is closed; the client resumes from what it actually received.
      this.queue = null;
      this.observer.overflow(seq ?? 0);
      this.end();
      return;
    }
    this.fail(
      new StreamInterruptedError(
        'SLOW_CONSUMER',
        `Too many undelivered events; resubscribe with \`after: ${seq}\`.`,
        seq,
      ),
    );
  }

  /** Seq of the last event handed to the consumer. */
  private deliveredSeq(): number | null {
    const first = this.queue?.[0];
    return first ? first.envelope.seq - 1 : this.lastSeq;
  }

  fail(error: Error): void {
    if (this.done) return;
    if (this.rejecter) {
      const reject = this.rejecter;
      this.waiter = null;
      this.rejecter = null;
      this.finish();
      reject(error);
      return;
    }
    // Already-queued events are delivered first; the error follows them.
    this.error = error;
    this.finish();
  }

  end(): void {
    if (this.done) return;
    this.finish();
    if (this.waiter) {
      const resolve = this.waiter;
      this.waiter = null;
      this.rejecter = null;
      resolve({ value: undefined, done: true });
    }
  }

  private finish(): void {
    this.done = true;
    this.pending = null;
    this.signal?.removeEventListener('abort', this);
    this.shared.registry.remove(this);
  }

  next(): Promise<IteratorResult<Envelope>> {
    const item = this.queue?.shift();
    if (item) {
      if (this.queue!.length === 0) this.queue = null;
      const error = this.hand(item.envelope);
      if (error) return Promise.reject(error);
      return Promise.resolve({ value: item.envelope, done: false });
    }
    if (this.error) {
      const error = this.error;
      this.error = null;
      return Promise.reject(error);
    }
    if (this.done) return Promise.resolve({ value: undefined, done: true });
    return new Promise((resolve, reject) => {
      this.waiter = resolve;
      this.rejecter = reject;
    });
  }

  return(): Promise<IteratorResult<Envelope>> {
    this.queue = null;
    this.error = null;
    this.end();
    return Promise.resolve({ value: undefined, done: true });
  }

  [Symbol.asyncIterator](): AsyncIterableIterator<Envelope> {
    return this;
  }
}

/** Identifies this process in broker messages so it can ignore its own echoes. */
export const PROCESS_ID = randomUUID();
