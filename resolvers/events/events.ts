// Publishes state changes. Every event is published only after the write it describes committed:
// either call these after your transaction (or autocommitted statement) returned, or use
// `transaction()`, which logs the events inside the transaction and broadcasts them after the
// commit (a rollback publishes nothing). Each returns the event's seq, or null when it could not be
// logged; publishing failures are logged, never thrown into the write path.
import type { Logger } from '../platform';
import type { Channels, Envelope, PubSub, StreamTopic, Topic } from './channels';
import type { SqlClient } from './event-log';

export type Events = ReturnType<typeof createEvents>;

/** Queues an event inside a transaction; resolves to its seq (known before the commit). */
export type Emit = <T extends StreamTopic>(topic: T, key: string, payload: Channels[T]) => Promise<number>;

export function createEvents(pubsub: PubSub, logger: Logger) {
  const log = logger.child({ module: 'events' });
  /** Publishing failures are logged, never thrown into the write path: the answer is then null. */
  const logged = (publishing: Promise<number | null>, topic: Topic, key: string): Promise<number | null> =>
    publishing.catch((error: unknown) => {
      log.warn({ err: error, topic, key }, 'publish failed');
      return null;
    });
  const send = <T extends Topic>(topic: T, key: string, payload: Channels[T]): Promise<number | null> =>
    logged(pubsub.publish(topic, key, payload), topic, key);
  // revokeToken publishes explicitly and the token service's listener does too; send once.
  const recentlyRevoked = new Map<string, number>();

  return {
    /**
     * A session changed. Returns the session's new seq and stamps it on `session`, so a mutation
     * that returns this row reports the seq its change produced.
     */
    async session(session: {
      id: string;
      accountId: string;
      status: string;
      provisioningPhase?: string | null;
      stopReason?: string | null;
      /** Include the sandbox (status, runtimeState) so the event freezes it too. */
      sandbox?: { status: string; runtimeState: string | null } | null;
      seq?: number;
    }) {
      const payload: Channels['sessionUpdated'] = {
        sessionId: session.id,
        accountId: session.accountId,
        status: session.status,
        ...(session.provisioningPhase !== undefined ? { provisioningPhase: session.provisioningPhase } : {}),
        ...(session.stopReason !== undefined ? { stopReason: session.stopReason } : {}),
        ...(session.sandbox !== undefined
          ? {
              sandboxStatus: session.sandbox?.status ?? null,
              runtimeState: session.sandbox?.runtimeState ?? null,
            }
          : {}),
      };
      // The account's list hears of it in the same append, stamped with the session's seq.
      const seq = await logged(pubsub.publishSession(payload), 'sessionUpdated', session.id);
      if (seq !== null) session.seq = seq;
      return seq;
    },
    async sandbox(sandbox: { id: string; sessionId: string; status: string }, accountId: string) {
      return send('sandboxUpdated', sandbox.id, {
        sandboxId: sandbox.id,
        sessionId: sandbox.sessionId,
        accountId,
        status: sandbox.status,
      });
    },
    /** Include `sample` (the stored values) so subscribers need no database read per event. */
    async telemetry(payload: Channels['telemetry']) {
      return send('telemetry', payload.sandboxId, payload);
    },
    async reload(payload: Channels['reloadProgress']) {
      return send('reloadProgress', payload.reloadId, payload);
    },
    async changeRequest(payload: Channels['changeRequestUpdated']) {
      return send('changeRequestUpdated', payload.changeRequestId, payload);
    },
    async tokenRevoked(tokenId: string) {
      const now = Date.now();
      if ((recentlyRevoked.get(tokenId) ?? 0) > now - 5_000) return null;
      recentlyRevoked.set(tokenId, now);
      if (recentlyRevoked.size > 1_000) recentlyRevoked.delete(recentlyRevoked.keys().next().value as string);
      await send('tokenRevoked', '*', { tokenId });
      return null;
    },

    /**
     * Runs `work` in a transaction of `db`; events emitted inside are logged in that transaction and
     * broadcast once it committed. A rollback (throw) discards them with everything else.
     */
    async transaction<T, Tx extends SqlClient>(
      db: { $transaction<R>(fn: (tx: Tx) => Promise<R>): Promise<R> },
      work: (tx: Tx, emit: Emit) => Promise<T>,
    ): Promise<T> {
      const emitted: Envelope[] = [];
      const result = await db.$transaction(async (tx) =>
        work(tx, async (topic, key, payload) => {
          const envelope = await pubsub.record(tx, topic, key, payload);
          emitted.push(envelope);
          return envelope.seq;
        }),
      );
      for (const envelope of emitted) await pubsub.broadcast(envelope);
      return result;
    },

    /**
     * Broadcasts events that were appended to the log by the caller's own statement (see
     * appendManySql), once it committed.
     */
    async broadcast(envelopes: readonly Envelope[]): Promise<void> {
      for (const envelope of envelopes) await pubsub.broadcast(envelope);
    },

    /** Runs `write` (which commits) and publishes `after(result)` only once it succeeded. */
    async afterCommit<T>(write: () => Promise<T>, after: (result: T) => Promise<unknown>): Promise<T> {
      const result = await write();
      await after(result);
      return result;
    },
  };
}
