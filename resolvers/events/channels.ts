// The domain's realtime channels (topic → payload) and the pub/sub port the services publish through.
// server/pubsub.ts implements the port (event log + broker); services and schema depend only on this.
import { GraphQLError } from 'graphql';
import type { SqlClient } from '../platform';

/** The parts of a session's state an event freezes, so a replay shows them as they were. */
export interface SessionSnapshot {
  status: string;
  provisioningPhase?: string | null;
  stopReason?: string | null;
  /** null: no sandbox yet (or gone); undefined: not known to the publisher. */
  sandboxStatus?: string | null;
  runtimeState?: string | null;
}

/** A telemetry sample carried inside its event, so delivering it needs no database read. */
export interface TelemetrySnapshot {
  at: string;
  memoryUsedBytes: number;
  memoryLimitBytes: number;
  load1: number;
  diskUsedBytes: number;
  diskTotalBytes: number;
  daemonRssBytes: number;
  opencodeRssBytes: number;
  reason: 'INTERVAL' | 'STATE_CHANGE' | 'MEMORY_GUARD';
}

export type AgentEventKind = 'TEXT_DELTA' | 'PART_UPDATED' | 'TOOL_CALL' | 'MESSAGE_UPDATED' | 'TURN_STATE';

/** An OpenCode event reduced to what a conversation client shows. */
export interface AgentEventPayload {
  kind: AgentEventKind;
  opencodeSessionId: string | null;
  messageId?: string;
  partId?: string;
  delta?: string;
  role?: string;
  part?: Record<string, unknown>;
  turnState?: 'BUSY' | 'RETRY' | 'IDLE' | 'ERROR';
  error?: string;
}

/** topic → payload. Payloads carry ids plus the state at the time; subscribers re-check capability. */
export interface Channels {
  /** The snapshot fields freeze the session as of the event (absent in events logged before them). */
  sessionUpdated: { sessionId: string; accountId: string } & SessionSnapshot;
  sandboxUpdated: { sandboxId: string; sessionId: string; accountId: string; status: string };
  telemetry: {
    sandboxId: string;
    sessionId: string;
    accountId: string;
    sampleId: string;
    /** The sample itself; when absent the subscriber reads it by sampleId. */
    sample?: TelemetrySnapshot;
  };
  reloadProgress: { reloadId: string; sessionId: string; accountId: string; status?: string; phase?: string };
  /** `sessionSeq` is the seq of the matching sessionUpdated event (Session.seq). */
  accountSessions: { sessionId: string; accountId: string; sessionSeq?: number } & SessionSnapshot;
  /** One agent event of a session's conversation (resolvers/gateway/conversation.ts). */
  sessionEvents: { sessionId: string; accountId: string; event: AgentEventPayload };
  changeRequestUpdated: { changeRequestId: string; projectId: string; accountId: string; status: string };
  /** Control message: close this token's sockets on every process. Not logged, no seq. */
  tokenRevoked: { tokenId: string };
}
export type Topic = keyof Channels;
/** Topics that are logged, numbered and replayable. */
export type StreamTopic = Exclude<Topic, 'tokenRevoked'>;
export const CONTROL_TOPICS: ReadonlySet<Topic> = new Set<Topic>(['tokenRevoked']);

export interface Envelope<T extends Topic = Topic> {
  topic: T;
  key: string;
  /** Per-(topic, key) monotonic sequence number; 0 for control messages. */
  seq: number;
  payload: Channels[T];
  /** When it was broadcast (ms since the epoch, the publisher's clock): pub/sub lag is measured from it. */
  at?: number;
}

export interface SubscribeOptions {
  /** Replay events with seq > after first (null/undefined: live only). */
  after?: number | null;
  signal?: AbortSignal;
  /** Keep only the newest undelivered live event (telemetry). */
  coalesce?: boolean;
  /** Undelivered events a slow consumer may accumulate before the stream fails. @default 1_000 */
  maxBuffered?: number;
  /** Per-event checks as events are handed to the reader (one object per subscription, no closures). */
  observer?: StreamObserver;
}

export interface StreamObserver {
  /**
   * Called as each event is handed to the reader (capability checks, seq bookkeeping). If it
   * throws, the stream ends and that read fails with the error.
   */
  delivered(envelope: Envelope): void;
  /**
   * Called instead of failing the stream when its buffer overflows (the server closes the socket),
   * with the seq of the last event handed to the reader; the stream then ends.
   */
  overflow?(lastSeq: number): void;
}

export interface PubSub {
  /** Logs and broadcasts an event; returns its seq (null when logging failed, e.g. no database). */
  publish<T extends Topic>(topic: T, key: string, payload: Channels[T]): Promise<number | null>;
  /**
   * Logs events of one stream in one append, in this order, then broadcasts them; returns their
   * seqs. A burst (an agent's batch of text deltas) costs one statement, not one per event.
   */
  publishMany<T extends StreamTopic>(
    topic: T,
    key: string,
    payloads: readonly Channels[T][],
  ): Promise<number[]>;
  /**
   * Logs and broadcasts a session's sessionUpdated event and its accountSessions twin (whose
   * `sessionSeq` is the first's seq) in one append; returns the session event's seq (null when
   * logging failed).
   */
  publishSession(payload: Channels['sessionUpdated']): Promise<number | null>;
  /** Logs an event inside the caller's transaction; broadcast the result after the commit. */
  record<T extends StreamTopic>(
    tx: SqlClient,
    topic: T,
    key: string,
    payload: Channels[T],
  ): Promise<Envelope<T>>;
  broadcast(envelope: Envelope): Promise<void>;
  /**
   * Broadcasts events the caller's own statement appended (see appendManySql), in order: to this
   * process's subscribers all at once, then to the broker.
   */
  broadcastMany(envelopes: readonly Envelope[]): Promise<void>;
  /** While the pub/sub is down the stream's first read fails with PUBSUB_UNAVAILABLE. */
  subscribe<T extends StreamTopic>(
    topic: T,
    key: string,
    options?: SubscribeOptions,
  ): AsyncIterableIterator<Envelope<T>>;
  /** Control messages (tokenRevoked) from this and every other process. */
  onControl<T extends Topic>(topic: T, listener: (payload: Channels[T]) => void): () => void;
  /** Latest seq on (topic, key), 0 when none. */
  currentSeq(topic: StreamTopic, key: string): Promise<number>;
  healthy(): boolean;
  onHealth(listener: (healthy: boolean) => void): () => void;
  /** Live subscriptions held by this process. */
  subscriptionCount(): number;
  /**
   * Every event the broker delivers to this process, with the time since it was broadcast
   * (seconds; the publisher's clock against ours), for the pub/sub lag metric.
   */
  onReceived(listener: (topic: Topic, lagSeconds: number) => void): () => void;
  close(): Promise<void>;
}

export class StreamInterruptedError extends GraphQLError {
  constructor(
    code: 'PUBSUB_UNAVAILABLE' | 'SLOW_CONSUMER' | 'REPLAY_UNAVAILABLE',
    message: string,
    seq: number | null,
  ) {
    super(message, { extensions: { code, seq } });
  }
}
