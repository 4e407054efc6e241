// R-CONV-1: forwards OpenCode's conversation events (text deltas, part and message updates, turn
// state) to the API in small ordered batches over the daemon's authenticated channel. One batch is
// in flight at a time, so the API sees events in OpenCode's order; a batch the API keeps refusing
// is dropped and logged (its events are then missing from the session record too).
import type { ApiClient } from './api-client';
import type { OpencodeEvent } from './events';
import type { Logger } from './logger';

/** OpenCode event types a conversation client needs; the rest (file watcher, LSP, …) stay local. */
export const FORWARDED_EVENT_TYPES: ReadonlySet<string> = new Set([
  'message.updated',
  'message.removed',
  'message.part.updated',
  'message.part.delta',
  'message.part.removed',
  'session.status',
  'session.idle',
  'session.error',
]);

export interface EventForwarderOptions {
  api: ApiClient;
  logger: Logger;
  sessionId: string;
  /** Longest wait before a partial batch goes out. @default 50 */
  flushMs?: number;
  /** @default 100 */
  maxBatch?: number;
  /** Events held while the API is unreachable before the oldest are dropped. @default 10_000 */
  maxPending?: number;
}

export class EventForwarder {
  private pending: OpencodeEvent[] = [];
  private timer: NodeJS.Timeout | null = null;
  private sending: Promise<void> | null = null;
  private readonly log: Logger;
  forwarded = 0;
  dropped = 0;

  constructor(private readonly options: EventForwarderOptions) {
    this.log = options.logger.child({ module: 'event-forward' });
  }

  push(event: OpencodeEvent): void {
    if (!FORWARDED_EVENT_TYPES.has(event.type)) return;
    this.pending.push(event);
    const maxPending = this.options.maxPending ?? 10_000;
    if (this.pending.length > maxPending) {
      this.dropped += this.pending.length - maxPending;
      this.pending.splice(0, this.pending.length - maxPending);
    }
    if (this.pending.length >= (this.options.maxBatch ?? 100)) this.kick();
    else this.timer ??= setTimeout(() => this.kick(), this.options.flushMs ?? 50);
  }

  /** Sends everything pending; resolves when the API has it (or gave up on it). */
  async flush(): Promise<void> {
    while (this.pending.length > 0 || this.sending) {
      this.kick();
      await this.sending;
    }
  }

  private kick(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    if (this.sending || this.pending.length === 0) return;
    this.sending = this.send().finally(() => {
      this.sending = null;
      if (this.pending.length > 0) this.kick();
    });
  }

  private async send(): Promise<void> {
    const batch = this.pending.splice(0, this.options.maxBatch ?? 100);
    try {
      await this.options.api.reportAgentEvents({
        sessionId: this.options.sessionId,
        events: batch.map((event) => JSON.stringify(event)),
      });
      this.forwarded += batch.length;
    } catch (error) {
      this.dropped += batch.length;
      this.log.warn({ err: (error as Error).message, count: batch.length }, 'agent events not delivered');
    }
  }
}
