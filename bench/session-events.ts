// Agent events per second through reportAgentEvents → sessionEvents, on one LOCAL session with a
// real daemon: the daemon's HTTP mutation → session record + event log → a graphql-ws subscriber in
// a process of its own (as a browser or the CLI is), against the event log + pub/sub alone in the
// same run, and against a bare HTTP + WebSocket relay on the same hops (bench/support/bare-events.ts).
// The reporter (the daemon's POSTs) runs in a process of its own too, as the daemon does.
// A module of its own (it was part of bench/session-gateway.ts) so it runs alone:
//   npm run bench -- session-events       (BENCH_EVENT_ROUNDS: rounds of each, default 5)
import { fork } from 'node:child_process';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { type E2e, startE2e } from '../test/e2e/helpers';
import { type LiveSession, createProject, startSession } from '../test/leases/helpers';
import { waitFor } from '../test/support/wait';
import { startBareEvents } from './support/bare-events';
import type { ReportRun, ReporterMessage } from './support/events-reporter';
import {
  type BenchResult,
  childExecArgv,
  describeWarmUp,
  percentile,
  runIfMain,
  warmUntilSteady,
} from './support/harness';
import { deltaEvent } from './support/opencode-events';

const EVENTS = 5_000;
const EVENT_BATCH = 100;
const EVENT_ROUNDS = Number(process.env.BENCH_EVENT_ROUNDS ?? 5);

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
    execArgv: childExecArgv(),
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

/** A forked reporter process (bench/support/events-reporter.ts). */
interface Reporter {
  /** Posts the run's batches; resolves with the wall-clock ms at which its first POST began. */
  run(run: ReportRun): Promise<number>;
  stop(): void;
}

function forkReporter(graphqlUrl: string, token: string, sessionId: string): Reporter {
  const child = fork(
    join(import.meta.dirname, 'support/events-reporter.ts'),
    [graphqlUrl, token, sessionId],
    {
      execArgv: childExecArgv(),
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    },
  );
  let waiting: { resolve: (startedAt: number) => void; reject: (error: Error) => void } | null = null;
  let failure: Error | null = null;
  const settle = (message: ReporterMessage) => {
    const w = waiting;
    waiting = null;
    if ('done' in message) w?.resolve(message.done.startedAt);
    else w?.reject(new Error(`reporter: ${message.failed}`));
  };
  child.on('message', settle);
  child.once('exit', (code) => {
    failure = new Error(`reporter exited with ${code}`);
    settle({ failed: failure.message });
  });
  return {
    run: (run) =>
      new Promise<number>((resolve, reject) => {
        if (failure) return reject(failure);
        waiting = { resolve, reject };
        child.send({ run });
      }),
    stop: () => {
      if (child.connected) child.send({ stop: true });
      child.kill();
    },
  };
}

/**
 * Agent events per second: the daemon's reportAgentEvents over HTTP from a process of its own →
 * session record → event log → a graphql-ws subscriber in another process (as a browser or the CLI
 * is one), against the event log + pub/sub alone with an in-process subscriber, and against the
 * same hops with no work of ours. Rounds of the three alternate, after warm-up rounds, so a change
 * of the machine's load falls on all alike; each figure is the median of its rounds.
 */
export async function eventThroughput(
  e: E2e,
  s: LiveSession,
  options: { events?: number; rounds?: number } = {},
): Promise<BenchResult[]> {
  const count = options.events ?? EVENTS;
  const rounds = options.rounds ?? EVENT_ROUNDS;
  const subscriber = forkSubscriber(e.t.wsUrl, e.t.adminToken, s.sessionId);
  const reporter = forkReporter(e.t.graphqlUrl, s.token, s.sessionId);
  // The same hops with no work of ours (bench/support/bare-events.ts), on a stream of its own.
  const bare = await startBareEvents(e.t.app.services.pubsub);
  const bareKey = `bench-bare-${Date.now()}`;
  const bareSubscriber = forkSubscriber(bare.wsUrl, 'none', bareKey);
  const bareReporter = forkReporter(bare.url, 'none', bareKey);
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
    await waitFor(async () => {
      if (bareSubscriber.ready()) return true;
      await pubsub.publishMany('sessionEvents', bareKey, [
        {
          sessionId: bareKey,
          accountId: bareKey,
          event: { kind: 'TEXT_DELTA' as const, opencodeSessionId: 'ses_bench', delta: 'w-1 ' },
        },
      ]);
      return false;
    }, 60_000);
    // The clock runs from the reporter's first POST to the subscriber seeing the last seq. The
    // server's CPU per event (this process's, the reporter's and the subscriber's not counted) is
    // steadier than the rate on a loaded machine.
    const cpuPerEvent: number[] = [];
    const viaApi = async (): Promise<number> => {
      const cpu = process.cpuUsage();
      const startedAt = await reporter.run({ from: 0, count, batch: EVENT_BATCH });
      await subscriber.until(await pubsub.currentSeq('sessionEvents', s.sessionId));
      const used = process.cpuUsage(cpu);
      cpuPerEvent.push((used.user + used.system) / count);
      return count / ((performance.timeOrigin + performance.now() - startedAt) / 1000);
    };
    const viaBare = async (): Promise<number> => {
      const startedAt = await bareReporter.run({ from: 0, count, batch: EVENT_BATCH });
      await bareSubscriber.until(await pubsub.currentSeq('sessionEvents', bareKey));
      return count / ((performance.timeOrigin + performance.now() - startedAt) / 1000);
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
    // Warm-up rounds of both until the server's CPU per event has settled; the first is kept.
    let cold: [number, number] | null = null;
    const warm = await warmUntilSteady(async () => {
      const pair: [number, number] = [await viaApi(), await alone()];
      await viaBare();
      cold ??= pair;
      return cpuPerEvent.at(-1)!;
    });
    cpuPerEvent.length = 0;
    const value: number[] = [];
    const baseline: number[] = [];
    const transport: number[] = [];
    for (let r = 0; r < rounds; r++) {
      value.push(await viaApi());
      baseline.push(await alone());
      transport.push(await viaBare());
    }
    const median = (xs: number[]) => percentile(xs, 50);
    return [
      {
        name: 'sessionEvents throughput',
        value: Math.round(median(value)),
        unit: 'events/s',
        baseline: Math.round(median(baseline)),
        note: `${count} deltas in batches of ${EVENT_BATCH} via reportAgentEvents, posted by a process of its own (as the daemon is), to a graphql-ws subscriber in its own process, median of ${rounds} rounds alternating with the baseline's after ${describeWarmUp(warm, 'µs/event')}, server CPU ${Math.round(median(cpuPerEvent))} µs/event; first round after start ${Math.round(cold![0])} vs ${Math.round(cold![1])}/s; baseline = event log + pub/sub alone, in-process subscriber`,
      },
      {
        name: 'sessionEvents throughput vs bare HTTP + WebSocket on the same hops',
        value: Math.round(median(value)),
        unit: 'events/s',
        baseline: Math.round(median(transport)),
        note: `the same rounds; baseline = the reporter's POSTs to a bare node:http endpoint in the server's process that appends and publishes each batch (the baseline's publishMany), each event to the same subscriber process as a graphql-ws frame over a bare WebSocket: no GraphQL, token, policy or session record; ${Math.round(median(transport))} vs ${Math.round(median(baseline))}/s for the in-process baseline`,
      },
    ];
  } finally {
    reporter.stop();
    subscriber.stop();
    bareReporter.stop();
    bareSubscriber.stop();
    bare.close();
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
    return await eventThroughput(e, s);
  } finally {
    await e.stop();
  }
}

runIfMain(import.meta.url, run);
