// R-AG-3: follows OpenCode's event stream and derives the turn state per OpenCode session.
// It follows the process-wide `/global/event` (each event as `{ directory, payload }`) rather than
// `/event`, which is bound to the project instance current when the stream connected, so a
// disposed or re-created instance cannot leave the daemon on a stream that never sees a turn.
//
// OpenCode 1.18 events used here (each payload `{"id","type","properties"}`):
//   session.status  { sessionID, status: { type: 'busy' | 'idle' | 'retry', attempt?, message?, next? } }
//   session.idle    { sessionID }
//   session.error   { sessionID?, error: { name, data: { message } } }
//   server.connected {}
import { EventEmitter } from 'node:events';
import { sleep } from '../contract/clock';
import { Backoff, type BackoffOptions } from '../contract/retry';
import { request } from './http';
import type { Logger } from './logger';
import type { OpencodeClient } from './opencode';

export type TurnState = 'busy' | 'retry' | 'idle' | 'error';

export interface TurnChange {
  /** Aggregate over every OpenCode session: busy > retry > the last idle/error. */
  state: TurnState;
  previous: TurnState;
  /** The OpenCode session whose event caused the change. */
  opencodeSessionId: string | null;
  message?: string;
}

export interface TurnTrackerEvents {
  change: [TurnChange];
}

/** Per-session turn states and their aggregate; emits `change` when the aggregate changes. */
export class TurnTracker extends EventEmitter<TurnTrackerEvents> {
  private readonly sessions = new Map<string, TurnState>();
  /** Sessions being aborted on purpose, with the error their turn ends with. */
  private readonly aborting = new Map<string, string>();
  private aggregate: TurnState = 'idle';
  private lastMessage: string | undefined;

  get state(): TurnState {
    return this.aggregate;
  }

  /** OpenCode sessions with a turn in flight (busy or retrying). */
  inFlight(): string[] {
    return [...this.sessions].filter(([, s]) => s === 'busy' || s === 'retry').map(([id]) => id);
  }

  get turnInFlight(): boolean {
    return this.aggregate === 'busy' || this.aggregate === 'retry';
  }

  /**
   * The daemon is aborting this session's turn: ignore its remaining busy events and end the
   * turn with `message` as its error once OpenCode reports it idle.
   */
  expectAbort(opencodeSessionId: string, message: string): void {
    this.aborting.set(opencodeSessionId, message);
  }

  /** True while an abort this daemon asked for has not yet ended the turn. */
  isAborting(opencodeSessionId: string): boolean {
    return this.aborting.has(opencodeSessionId);
  }

  set(opencodeSessionId: string, state: TurnState, message?: string): void {
    const abortMessage = this.aborting.get(opencodeSessionId);
    if (abortMessage !== undefined) {
      if (state === 'busy' || state === 'retry') return;
      this.aborting.delete(opencodeSessionId);
      state = 'error';
      message = abortMessage;
    }
    const before = this.sessions.get(opencodeSessionId);
    // An idle right after an error ends the same turn; the error stays its outcome.
    if (state === 'idle' && before === 'error') return;
    this.sessions.set(opencodeSessionId, state);
    this.recompute(opencodeSessionId, 'idle', message);
  }

  /** Every in-flight turn ended without its own event (OpenCode died or was replaced). */
  endAll(state: 'idle' | 'error', message?: string): void {
    const ended = this.inFlight();
    for (const id of ended) this.sessions.set(id, state);
    for (const id of ended) this.aborting.delete(id);
    if (ended.length > 0) this.recompute(null, state, message);
  }

  /** Reconciles with GET /session/status (which lists only non-idle sessions). */
  reconcile(statuses: Record<string, { type: string; message?: string }>): void {
    for (const id of this.inFlight()) {
      if (!statuses[id]) this.set(id, 'idle');
    }
    for (const [id, status] of Object.entries(statuses)) {
      if (status.type === 'busy' || status.type === 'retry') this.set(id, status.type, status.message);
    }
  }

  private recompute(source: string | null, fallback: 'idle' | 'error', message?: string): void {
    const states = [...this.sessions.values()];
    let next: TurnState;
    if (states.includes('busy')) next = 'busy';
    else if (states.includes('retry')) next = 'retry';
    else if (source !== null) next = this.sessions.get(source) === 'error' ? 'error' : 'idle';
    else next = fallback;
    if (next === 'busy') message = undefined;
    if (next === this.aggregate && message === this.lastMessage) return;
    if (next === this.aggregate && next !== 'retry') return;
    const previous = this.aggregate;
    this.aggregate = next;
    this.lastMessage = message;
    this.emit('change', { state: next, previous, opencodeSessionId: source, message });
  }
}

export interface OpencodeEvent {
  id?: string;
  type: string;
  properties: Record<string, unknown>;
}

/** Maps one OpenCode event to a turn-state update, or null when it says nothing about turns. */
export function turnUpdateFrom(
  event: OpencodeEvent,
): { opencodeSessionId: string; state: TurnState; message?: string } | null {
  const props = event.properties ?? {};
  const sessionId = typeof props.sessionID === 'string' ? props.sessionID : null;
  if (!sessionId) return null;
  switch (event.type) {
    case 'session.status': {
      const status = props.status as { type?: string; message?: string; attempt?: number } | undefined;
      if (status?.type === 'busy') return { opencodeSessionId: sessionId, state: 'busy' };
      if (status?.type === 'idle') return { opencodeSessionId: sessionId, state: 'idle' };
      if (status?.type === 'retry') {
        const message = `retry attempt ${status.attempt ?? '?'}: ${status.message ?? 'provider error'}`;
        return { opencodeSessionId: sessionId, state: 'retry', message };
      }
      return null;
    }
    case 'session.idle':
      return { opencodeSessionId: sessionId, state: 'idle' };
    case 'session.error': {
      const error = props.error as { name?: string; data?: { message?: string } } | undefined;
      // An abort the user (or the memory guard) asked for is not a turn error of its own.
      if (error?.name === 'MessageAbortedError') return null;
      const message =
        [error?.name, error?.data?.message].filter(Boolean).join(': ') || 'OpenCode session error';
      return { opencodeSessionId: sessionId, state: 'error', message };
    }
    default:
      return null;
  }
}

/** How often the follower looks for a runtime while there is none (OpenCode still starting). */
const NO_RUNTIME_POLL_MS = 100;

export interface EventFollowerOptions {
  logger: Logger;
  tracker: TurnTracker;
  /** The runtime to follow; asked again on every (re)connect so a reload swap is picked up. */
  client: () => OpencodeClient | null;
  backoff: BackoffOptions;
  /** Reconnect when nothing (not even a heartbeat) arrived for this long. @default 60_000 */
  staleAfterMs?: number;
  onEvent?: (event: OpencodeEvent) => void;
}

/**
 * Follows GET /global/event with a capped-backoff reconnect loop. While there is no runtime to
 * follow it polls briefly instead of backing off, and `reconnect()` also cuts a wait short, so the
 * stream connects the moment OpenCode becomes healthy: a turn started before the stream connected
 * would go unseen.
 */
export class EventFollower {
  private readonly stopping = new AbortController();
  private current: AbortController | null = null;
  private wake = new AbortController();
  private readonly log: Logger;
  private readonly backoff: Backoff;
  private loop: Promise<void> | null = null;
  /** Base URL of the runtime the open stream follows (null: none connected). */
  private connectedTo: string | null = null;
  private readonly waiters = new Set<{ baseUrl: string; resolve: () => void }>();
  connections = 0;

  constructor(private readonly options: EventFollowerOptions) {
    this.log = options.logger.child({ module: 'events' });
    this.backoff = new Backoff(options.backoff);
  }

  start(): void {
    this.loop ??= this.run();
  }

  /** Drops the current stream (or a wait); the loop reconnects to whatever `client()` returns now. */
  reconnect(): void {
    this.current?.abort();
    this.wake.abort();
  }

  /**
   * Resolves once a stream to `client` is connected, or after `timeoutMs` (a stream that cannot
   * connect must not hold the runtime back for ever; the turn tracker reconciles when it does).
   */
  connected(client: OpencodeClient, timeoutMs = 10_000): Promise<void> {
    if (this.connectedTo === client.baseUrl) return Promise.resolve();
    return new Promise((resolve) => {
      const waiter = { baseUrl: client.baseUrl, resolve: () => done() };
      const timer = setTimeout(() => done(), timeoutMs);
      timer.unref();
      const done = (): void => {
        clearTimeout(timer);
        this.waiters.delete(waiter);
        resolve();
      };
      this.waiters.add(waiter);
    });
  }

  async stop(): Promise<void> {
    this.stopping.abort();
    this.current?.abort();
    this.wake.abort();
    await this.loop;
    for (const waiter of [...this.waiters]) waiter.resolve();
  }

  /** Sleeps `ms` unless stopped or woken by reconnect() (also one asked for since the last pause). */
  private async pause(ms: number): Promise<void> {
    if (!this.wake.signal.aborted) {
      await sleep(ms, AbortSignal.any([this.stopping.signal, this.wake.signal]));
    }
    this.wake = new AbortController();
  }

  private async run(): Promise<void> {
    while (!this.stopping.signal.aborted) {
      const client = this.options.client();
      if (!client) {
        await this.pause(NO_RUNTIME_POLL_MS);
        continue;
      }
      try {
        await this.follow(client);
      } catch (error) {
        if (!this.stopping.signal.aborted)
          this.log.debug({ err: (error as Error).message }, 'event stream dropped');
      }
      if (this.stopping.signal.aborted) break;
      await this.pause(this.backoff.next());
    }
  }

  private async follow(client: OpencodeClient): Promise<void> {
    const controller = new AbortController();
    this.current = controller;
    const staleAfterMs = this.options.staleAfterMs ?? 60_000;
    let staleTimer = setTimeout(() => controller.abort(), staleAfterMs);
    try {
      const response = await request(`${client.baseUrl}/global/event`, {
        headers: { accept: 'text/event-stream' },
        signal: controller.signal,
      });
      if (!response.ok) {
        response.body.destroy();
        throw new Error(`GET /event: HTTP ${response.status}`);
      }
      this.connections += 1;
      this.connectedTo = client.baseUrl;
      for (const waiter of [...this.waiters]) if (waiter.baseUrl === client.baseUrl) waiter.resolve();
      this.log.debug({ baseUrl: client.baseUrl }, 'event stream connected');
      // Events missed while disconnected: the status endpoint says which turns are still running.
      this.options.tracker.reconcile(await client.sessionStatus().catch(() => ({})));
      this.backoff.reset();
      const decoder = new TextDecoder();
      let buffer = '';
      for await (const chunk of response.body as AsyncIterable<Uint8Array>) {
        clearTimeout(staleTimer);
        staleTimer = setTimeout(() => controller.abort(), staleAfterMs);
        buffer += decoder.decode(chunk, { stream: true });
        let index = buffer.indexOf('\n\n');
        while (index !== -1) {
          this.handleFrame(buffer.slice(0, index));
          buffer = buffer.slice(index + 2);
          index = buffer.indexOf('\n\n');
        }
      }
    } finally {
      clearTimeout(staleTimer);
      if (this.current === controller) this.current = null;
      // Only this stream's own mark: a reconnect to the same port may already have replaced it.
      if (this.current === null && this.connectedTo === client.baseUrl) this.connectedTo = null;
    }
  }

  private handleFrame(frame: string): void {
    const data = frame
      .split('\n')
      .filter((line) => line.startsWith('data:'))
      .map((line) => line.slice(5).trimStart())
      .join('\n');
    if (!data) return;
    let event: OpencodeEvent;
    try {
      const parsed = JSON.parse(data) as OpencodeEvent | { payload?: OpencodeEvent };
      event = 'payload' in parsed && parsed.payload ? parsed.payload : (parsed as OpencodeEvent);
    } catch {
      return;
    }
    // The global stream also carries each change as a `sync` record for OpenCode's own clients.
    if (typeof event?.type !== 'string' || event.type === 'sync') return;
    this.options.onEvent?.(event);
    const update = turnUpdateFrom(event);
    if (update) this.options.tracker.set(update.opencodeSessionId, update.state, update.message);
  }
}
