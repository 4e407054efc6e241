// The session gateway against direct calls, in the same run, on one LOCAL session with a real
// daemon: LLM gateway first-byte and total latency (streamed chat completions) against the stub
// upstream called directly; preview proxy latency and WebSocket echo round trip against the app
// called directly; agent events per second through reportAgentEvents → sessionEvents (graphql-ws,
// to a subscriber in a process of its own, as a browser or the CLI is) against the event log +
// pub/sub alone.
import { fork } from 'node:child_process';
import { createServer, request as httpRequest } from 'node:http';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import WebSocket, { WebSocketServer } from 'ws';
import { freePort } from '../contract/ports';
import { type E2e, startE2e } from '../test/e2e/helpers';
import { type LiveSession, createProject, startSession } from '../test/leases/helpers';
import { loopbackLookup } from '../test/support/preview';
import { waitFor } from '../test/support/wait';
import { type BenchResult, runIfMain } from './support/harness';
export type { BenchResult };

const LLM_REQUESTS = 200;
const PREVIEW_REQUESTS = 1_000;
const WS_ROUND_TRIPS = 1_000;
const EVENTS = 5_000;
const EVENT_BATCH = 100;
const CONCURRENCY = 4;
const EVENT_ROUNDS = 3;

function percentile(samples: number[], p: number): number {
  const sorted = [...samples].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
}
const round = (ms: number): number => Math.round(ms * 1_000) / 1_000;

async function pool(count: number, concurrency: number, task: () => Promise<void>): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < count) {
        next += 1;
        await task();
      }
    }),
  );
}

/** First byte and total of one streamed completion. */
async function streamed(
  url: string,
  headers: Record<string, string>,
): Promise<{ first: number; total: number }> {
  const started = performance.now();
  const res = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: JSON.stringify({ model: 'stub-model', stream: true, messages: [{ role: 'user', content: 'hi' }] }),
  });
  if (res.status !== 200)
    throw new Error(`HTTP ${res.status} from ${url}: ${(await res.text()).slice(0, 300)}`);
  let first = 0;
  for await (const _chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
    if (first === 0) first = performance.now() - started;
  }
  return { first, total: performance.now() - started };
}

async function llmSamples(url: string, headers: Record<string, string>, count: number) {
  const first: number[] = [];
  const total: number[] = [];
  await pool(count, CONCURRENCY, async () => {
    const s = await streamed(url, headers);
    first.push(s.first);
    total.push(s.total);
  });
  return { first, total };
}

async function httpSamples(url: string, headers: Record<string, string>, count: number): Promise<number[]> {
  const samples: number[] = [];
  await pool(count, CONCURRENCY, async () => {
    const started = performance.now();
    // node:http with a loopback lookup: preview hosts are *.localhost names.
    const { status, body } = await new Promise<{ status: number; body: string }>((resolve, reject) => {
      const req = httpRequest(url, { headers, lookup: loopbackLookup }, (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString() }));
        res.on('error', reject);
      });
      req.on('error', reject);
      req.end();
    });
    if (status !== 200) throw new Error(`HTTP ${status} from ${url}: ${body.slice(0, 300)}`);
    samples.push(performance.now() - started);
  });
  return samples;
}

async function wsRoundTrips(url: string, headers: Record<string, string>, count: number): Promise<number[]> {
  const ws = new WebSocket(url, { headers, lookup: loopbackLookup } as WebSocket.ClientOptions);
  await new Promise((resolve, reject) => {
    ws.once('open', resolve);
    ws.once('error', reject);
  });
  const samples: number[] = [];
  for (let i = 0; i < count; i++) {
    const started = performance.now();
    ws.send(String(i));
    await new Promise((resolve) => ws.once('message', resolve));
    samples.push(performance.now() - started);
  }
  ws.close();
  return samples;
}

/** The cookie a previewUrl's first visit sets (303 to the clean URL), as a Cookie header. */
async function previewCookie(url: string): Promise<string> {
  const setCookie = await new Promise<string[]>((resolve, reject) => {
    const req = httpRequest(url, { lookup: loopbackLookup }, (res) => {
      res.resume();
      if (res.statusCode !== 303) reject(new Error(`HTTP ${res.statusCode} from the preview URL`));
      else resolve(res.headers['set-cookie'] ?? []);
    });
    req.on('error', reject);
    req.end();
  });
  const pair = setCookie[0]?.split(';')[0];
  if (!pair) throw new Error('the preview URL set no cookie');
  return pair;
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
  // The app stands in for one the image starts beside the daemon: a process here, so the sandbox
  // runs unisolated on the host's loopback and the daemon is told the app's port (it otherwise
  // serves only ports its sandbox's own processes hold), as in test/e2e/session-access.test.ts.
  const appPort = await freePort();
  const e: E2e = await startE2e({
    gateway: true,
    daemonEnv: { SINGULACOMP_ATTACHMENT_OFFLOAD: '0', SINGULACOMP_PROXY_EXTRA_PORTS: String(appPort) },
    env: { SINGULACOMP_LOCAL_ISOLATION: 'none' },
  });
  const app = createServer((_req, res) => res.writeHead(200, { 'content-type': 'text/plain' }).end('ok'));
  const wss = new WebSocketServer({ server: app });
  wss.on('connection', (ws) => ws.on('message', (data) => ws.send(data)));
  await new Promise<void>((resolve) => app.listen(appPort, '127.0.0.1', resolve));
  try {
    const s: LiveSession = await startSession(e.t, await createProject(e.t, e.repo.url));
    const pat = { authorization: `Bearer ${e.t.adminToken}` };
    const results: BenchResult[] = [];

    // LLM gateway vs the stub upstream directly.
    const gateway = `${e.t.url}/v1/llm/openai/v1/chat/completions`;
    const direct = `${e.stub.baseURL}/chat/completions`;
    const sandboxAuth = { authorization: `Bearer ${s.token}` };
    await llmSamples(gateway, sandboxAuth, 20);
    await llmSamples(direct, {}, 20);
    const g1 = await llmSamples(gateway, sandboxAuth, LLM_REQUESTS / 2);
    const d1 = await llmSamples(direct, {}, LLM_REQUESTS / 2);
    const g2 = await llmSamples(gateway, sandboxAuth, LLM_REQUESTS / 2);
    const d2 = await llmSamples(direct, {}, LLM_REQUESTS / 2);
    const gw = { first: [...g1.first, ...g2.first], total: [...g1.total, ...g2.total] };
    const dd = { first: [...d1.first, ...d2.first], total: [...d1.total, ...d2.total] };
    const llmNote = `${LLM_REQUESTS} streamed chat completions, concurrency ${CONCURRENCY}; baseline = stub upstream directly`;
    for (const [label, key] of [
      ['first byte', 'first'],
      ['total', 'total'],
    ] as const) {
      for (const p of [50, 99]) {
        results.push({
          name: `llm gateway ${label} p${p}`,
          value: round(percentile(gw[key], p)),
          unit: 'ms',
          baseline: round(percentile(dd[key], p)),
          note: llmNote,
        });
      }
    }

    // Preview proxy (control plane → daemon → app) vs the app directly, on the preview site. The
    // steady state of a browser: the preview cookie its first visit of a previewUrl set; an API
    // token (a CLI's or a script's) beside it.
    const preview = `http://p${appPort}-${s.sandboxId}.localhost:${new URL(e.t.url).port}/`;
    const appUrl = `http://127.0.0.1:${appPort}/`;
    const admin = (await e.t.app.services.tokens.authenticate(pat.authorization))!;
    const signed = await e.t.app.services.access.previewUrl(
      admin,
      { id: s.sandboxId, sessionId: s.sessionId, accountId: admin.accountId },
      appPort,
      'SUBDOMAIN',
    );
    const cookie = { cookie: await previewCookie(signed.url) };
    await httpSamples(preview, cookie, 100);
    await httpSamples(preview, pat, 100);
    await httpSamples(appUrl, {}, 100);
    const byCookie: number[] = [];
    const byToken: number[] = [];
    const ap: number[] = [];
    // Interleaved, so a change of the machine's load falls on all three alike.
    for (let round = 0; round < 2; round++) {
      byCookie.push(...(await httpSamples(preview, cookie, PREVIEW_REQUESTS / 2)));
      byToken.push(...(await httpSamples(preview, pat, PREVIEW_REQUESTS / 2)));
      ap.push(...(await httpSamples(appUrl, {}, PREVIEW_REQUESTS / 2)));
    }
    for (const [label, samples] of [
      ['preview proxy GET', byCookie],
      ['preview proxy GET (API token)', byToken],
    ] as const) {
      for (const p of [50, 99]) {
        results.push({
          name: `${label} p${p}`,
          value: round(percentile(samples, p)),
          unit: 'ms',
          baseline: round(percentile(ap, p)),
          note: `${PREVIEW_REQUESTS} GET, concurrency ${CONCURRENCY}, ${label.includes('API') ? 'API token' : 'preview cookie'}; baseline = app directly`,
        });
      }
    }
    const wsPreview = await wsRoundTrips(preview.replace(/^http/, 'ws'), pat, WS_ROUND_TRIPS);
    const wsDirect = await wsRoundTrips(`ws://127.0.0.1:${appPort}/`, {}, WS_ROUND_TRIPS);
    for (const p of [50, 99]) {
      results.push({
        name: `preview WebSocket echo p${p}`,
        value: round(percentile(wsPreview, p)),
        unit: 'ms',
        baseline: round(percentile(wsDirect, p)),
        note: `${WS_ROUND_TRIPS} sequential round trips on one socket; baseline = app directly`,
      });
    }

    results.push(await eventThroughput(e, s));
    return results;
  } finally {
    for (const client of wss.clients) client.terminate();
    app.closeAllConnections();
    app.close();
    await e.stop();
  }
}

runIfMain(import.meta.url, run);
