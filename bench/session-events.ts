// Agent events per second through reportAgentEvents → sessionEvents, on one LOCAL session with a
// real daemon: the daemon's HTTP mutation → session record + event log → a graphql-ws subscriber in
// a process of its own (as a browser or the CLI is), against the event log + pub/sub alone in the
// same run. A module of its own (it was part of bench/session-gateway.ts) so it runs alone:
//   npm run bench -- session-events       (BENCH_EVENT_ROUNDS: rounds of each, default 3)
import { fork } from 'node:child_process';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { type E2e, startE2e } from '../test/e2e/helpers';
import { type LiveSession, createProject, startSession } from '../test/leases/helpers';
import { waitFor } from '../test/support/wait';
import { type BenchResult, runIfMain } from './support/harness';

const EVENTS = 5_000;
const EVENT_BATCH = 100;
const EVENT_ROUNDS = Number(process.env.BENCH_EVENT_ROUNDS ?? 3);

function percentile(samples: number[], p: number): number {
  const sorted = [...samples].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
}

function deltaEvent(i: number): string {
  return JSON.stringify({
    type: 'message.part.delta',
    properties: {
      sessionID: 'ses_bench',
      messageID: 'msg_bench',
      partID: 'prt_bench',
      field: 'text',
      delta: `w${i} `,
    },
  });
}

/** A forked subscriber process (bench/support/events-subscriber.ts). */
interface Subscriber {
  /** Whether an event has reached the subscriber yet. */
  ready(): boolean;
  /** Resolves when the event of this seq has reached the subscriber. */
  until(seq: number): Promise<void>;
  stop(): void;
}

function forkSubscriber(wsUrl: string, token: string, sessionId: string): Subscriber {
  const child = fork(join(import.meta.dirname, 'support/events-subscriber.ts'), [wsUrl, token, sessionId], {
    // The bench's loader (tsx) without a profiler flag this process may have been started with.
    execArgv: process.execArgv.filter((arg) => !arg.startsWith('--cpu-prof')),
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  let ready = false;
  let failure: Error | null = null;
  let waiting: { seq: number; resolve: () => void; reject: (error: Error) => void } | null = null;
  const fail = (error: Error) => {
    failure ??= error;
    waiting?.reject(failure);
    waiting = null;
  };
  child.on('message', (message: { ready?: boolean; reached?: number; failed?: string }) => {
    if (message.ready) ready = true;
    if (message.failed) fail(new Error(`sessionEvents subscriber: ${message.failed}`));
    if (message.reached !== undefined && waiting && message.reached >= waiting.seq) {
      waiting.resolve();
      waiting = null;
    }
  });
  child.once('exit', (code) => fail(new Error(`sessionEvents subscriber exited with ${code}`)));
  return {
    ready: () => ready,
    until: (seq) =>
      new Promise<void>((resolve, reject) => {
        if (failure) return reject(failure);
        waiting = { seq, resolve, reject };
        child.send({ until: seq });
      }),
    stop: () => {
      if (child.connected) child.send({ stop: true });
      child.kill();
    },
  };
}

/**
 * Agent events per second: the daemon's reportAgentEvents over HTTP → session record → event log →
 * a graphql-ws subscriber in another process (as a browser or the CLI is one), against the event log
 * + pub/sub alone with an in-process subscriber. Rounds of each alternate, so a change of the
 * machine's load falls on both alike; each figure is the median of its rounds.
 */
export async function eventThroughput(
  e: E2e,
  s: LiveSession,
  options: { events?: number; rounds?: number } = {},
): Promise<BenchResult> {
  const count = options.events ?? EVENTS;
  const rounds = options.rounds ?? EVENT_ROUNDS;
  const sandboxAuth = { authorization: `Bearer ${s.token}` };
  const subscriber = forkSubscriber(e.t.wsUrl, e.t.adminToken, s.sessionId);
  try {
    // Events until one reaches the subscriber: its subscription is live before the clock starts.
    const daemon = await e.t.app.services.tokens.authenticate(`Bearer ${s.token}`);
    await waitFor(async () => {
      if (subscriber.ready()) return true;
      await e.t.app.services.conversation.report(daemon, {
        sessionId: s.sessionId,
        events: [deltaEvent(-1)],
      });
      return false;
    }, 60_000);
    const pubsub = e.t.app.services.pubsub;
    const viaApi = async (): Promise<number> => {
      const started = performance.now();
      for (let i = 0; i < count; i += EVENT_BATCH) {
        const events = Array.from({ length: EVENT_BATCH }, (_, j) => deltaEvent(i + j));
        const res = await fetch(e.t.graphqlUrl, {
          method: 'POST',
          headers: { 'content-type': 'application/json', ...sandboxAuth },
          body: JSON.stringify({
            query:
              'mutation($input: ReportAgentEventsInput!) { reportAgentEvents(input: $input) { __typename } }',
            variables: { input: { sessionId: s.sessionId, events } },
          }),
        });
        const body = await res.text();
        if (res.status !== 200 || body.includes('"errors"')) throw new Error(`reportAgentEvents: ${body}`);
      }
      await subscriber.until(await pubsub.currentSeq('sessionEvents', s.sessionId));
      return count / ((performance.now() - started) / 1000);
    };
    const alone = async (): Promise<number> => {
      const key = `bench-${Date.now()}`;
      const stream = pubsub.subscribe('sessionEvents', key, { after: null });
      const iterator = stream[Symbol.asyncIterator]();
      const started = performance.now();
      const received = (async () => {
        for (let n = 0; n < count; n++) await iterator.next();
      })();
      // The same calls reportAgentEvents makes: one append and broadcast per batch.
      for (let i = 0; i < count; i += EVENT_BATCH) {
        await pubsub.publishMany(
          'sessionEvents',
          key,
          Array.from({ length: EVENT_BATCH }, (_, j) => ({
            sessionId: key,
            accountId: key,
            event: { kind: 'TEXT_DELTA' as const, opencodeSessionId: 'ses_bench', delta: `w${i + j} ` },
          })),
        );
      }
      await received;
      const rate = count / ((performance.now() - started) / 1000);
      await iterator.return?.();
      return rate;
    };
    const value: number[] = [];
    const baseline: number[] = [];
    for (let r = 0; r < rounds; r++) {
      value.push(await viaApi());
      baseline.push(await alone());
    }
    const median = (xs: number[]) => percentile(xs, 50);
    return {
      name: 'sessionEvents throughput',
      value: Math.round(median(value)),
      unit: 'events/s',
      baseline: Math.round(median(baseline)),
      note: `${count} deltas in batches of ${EVENT_BATCH} via reportAgentEvents to a graphql-ws subscriber in its own process, median of ${rounds} rounds alternating with the baseline's; baseline = event log + pub/sub alone, in-process subscriber`,
    };
  } finally {
    subscriber.stop();
  }
}

export async function run(): Promise<BenchResult[]> {
  // The sandbox as bench/session-gateway.ts runs it (unisolated on the host's loopback).
  const e: E2e = await startE2e({
    gateway: true,
    daemonEnv: { SINGULACOMP_ATTACHMENT_OFFLOAD: '0' },
    env: { SINGULACOMP_LOCAL_ISOLATION: 'none' },
  });
  try {
    const s: LiveSession = await startSession(e.t, await createProject(e.t, e.repo.url));
    return [await eventThroughput(e, s)];
  } finally {
    await e.stop();
  }
}

runIfMain(import.meta.url, run);
