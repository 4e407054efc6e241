// The session gateway against direct calls, in the same run, on one LOCAL session with a real
// daemon: LLM gateway first-byte and total latency (streamed chat completions) against the stub
// upstream called directly; preview proxy latency and WebSocket echo round trip against the app
// called directly. Agent events per second (reportAgentEvents → sessionEvents) are measured by
// bench/session-events.ts. The gateway's and the preview's clients, the stub upstream and the app
// run in a process of their own (bench/support/gateway-load.ts), as callers and upstreams of a
// deployed server do: this process holds the server under test. Beside each direct baseline a
// second row compares with bare node:http proxies on the same hops (bench/support/bare-proxy.ts):
// what the hops cost on this machine before any work of ours.
import { fork } from 'node:child_process';
import { join } from 'node:path';
import { freePort } from '../contract/ports';
import { type E2e, startE2e } from '../test/e2e/helpers';
import { type LiveSession, createProject, startSession } from '../test/leases/helpers';
import { type BareProxy, forkBareProxy, startBareProxy } from './support/bare-proxy';
import type { LoadMessage, LoadTask } from './support/gateway-load';
import {
  type BenchResult,
  childExecArgv,
  describeWarmUp,
  runIfMain,
  warmUntilSteady,
} from './support/harness';
export type { BenchResult };

const LLM_REQUESTS = 200;
const PREVIEW_REQUESTS = 1_000;
const WS_ROUND_TRIPS = 1_000;
const CONCURRENCY = 4;

function percentile(samples: number[], p: number): number {
  const sorted = [...samples].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
}
const round = (ms: number): number => Math.round(ms * 1_000) / 1_000;

/** The forked load process (bench/support/gateway-load.ts). */
interface Load {
  /** The stub upstream's base URL (`…/v1`). */
  upstream: string;
  llm(
    url: string,
    headers: Record<string, string>,
    count: number,
  ): Promise<{ first: number[]; total: number[] }>;
  http(url: string, headers: Record<string, string>, count: number): Promise<number[]>;
  ws(url: string, headers: Record<string, string>, count: number): Promise<number[]>;
  cookie(url: string): Promise<string>;
  stop(): void;
}

async function forkLoad(appPort: number): Promise<Load> {
  const child = fork(join(import.meta.dirname, 'support/gateway-load.ts'), [String(appPort)], {
    execArgv: childExecArgv(),
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  const pending = new Map<number, { resolve: (value: unknown) => void; reject: (error: Error) => void }>();
  let nextId = 0;
  let exited: Error | null = null;
  const upstream = new Promise<string>((resolve, reject) => {
    child.on('message', (message: LoadMessage) => {
      if ('ready' in message) return resolve(message.ready.upstream);
      const waiting = pending.get(message.id);
      pending.delete(message.id);
      if ('failed' in message) waiting?.reject(new Error(`gateway load: ${message.failed}`));
      else waiting?.resolve(message.result);
    });
    child.once('exit', (code) => {
      exited = new Error(`the gateway load process exited with ${code}`);
      reject(exited);
      for (const waiting of pending.values()) waiting.reject(exited);
      pending.clear();
    });
  });
  const ask = <T>(task: LoadTask): Promise<T> =>
    new Promise<T>((resolve, reject) => {
      if (exited) return reject(exited);
      nextId += 1;
      pending.set(nextId, { resolve: resolve as (value: unknown) => void, reject });
      child.send({ id: nextId, task });
    });
  return {
    upstream: await upstream,
    llm: (url, headers, count) => ask({ kind: 'llm', url, headers, count, concurrency: CONCURRENCY }),
    http: (url, headers, count) => ask({ kind: 'http', url, headers, count, concurrency: CONCURRENCY }),
    ws: (url, headers, count) => ask({ kind: 'ws', url, headers, count }),
    cookie: (url) => ask({ kind: 'cookie', url }),
    stop: () => {
      if (child.connected) child.send({ stop: true });
      else child.kill();
    },
  };
}

export async function run(): Promise<BenchResult[]> {
  // The app stands in for one the image starts beside the daemon: a process of the bench's (the
  // load process), so the sandbox runs unisolated on the host's loopback and the daemon is told
  // the app's port (it otherwise serves only ports its sandbox's own processes hold), as in
  // test/e2e/session-access.test.ts.
  const appPort = await freePort();
  const load = await forkLoad(appPort);
  let e: E2e | null = null;
  let bareProxy: BareProxy | null = null;
  let bareDaemon: BareProxy | null = null;
  let barePreview: BareProxy | null = null;
  try {
    // The floors: a bare node:http reverse proxy in this process (where the server runs) in front
    // of the stub, and for the preview one more in a process of its own (where the daemon runs) in
    // front of the app (bench/support/bare-proxy.ts).
    bareProxy = await startBareProxy(load.upstream);
    bareDaemon = await forkBareProxy(`http://127.0.0.1:${appPort}`);
    barePreview = await startBareProxy(bareDaemon.url);
    const bareTwoUrl = `${barePreview.url}/`;
    e = await startE2e({
      gateway: true,
      daemonEnv: { SINGULACOMP_ATTACHMENT_OFFLOAD: '0', SINGULACOMP_PROXY_EXTRA_PORTS: String(appPort) },
      // The upstream is the load process's stub, not the one startE2e starts in this process.
      env: { SINGULACOMP_LOCAL_ISOLATION: 'none', SINGULACOMP_LLM_OPENAI_BASE_URL: load.upstream },
    });
    const s: LiveSession = await startSession(e.t, await createProject(e.t, e.repo.url));
    const pat = { authorization: `Bearer ${e.t.adminToken}` };
    const results: BenchResult[] = [];

    // LLM gateway vs the stub upstream directly; preview proxy (control plane → daemon → app) vs
    // the app directly, on the preview site: the steady state of a browser, the preview cookie its
    // first visit of a previewUrl set, and an API token (a CLI's or a script's) beside it.
    const gateway = `${e.t.url}/v1/llm/openai/v1/chat/completions`;
    const direct = `${load.upstream}/chat/completions`;
    const sandboxAuth = { authorization: `Bearer ${s.token}` };
    const preview = `http://p${appPort}-${s.sandboxId}.localhost:${new URL(e.t.url).port}/`;
    const appUrl = `http://127.0.0.1:${appPort}/`;
    const admin = (await e.t.app.services.tokens.authenticate(pat.authorization))!;
    const signed = await e.t.app.services.access.previewUrl(
      admin,
      { id: s.sandboxId, sessionId: s.sessionId, accountId: admin.accountId },
      appPort,
      'SUBDOMAIN',
    );
    const cookie = { cookie: await load.cookie(signed.url) };
    const bare = `${bareProxy.url}/chat/completions`;

    // Warm-up rounds of every path until the server's CPU per round has settled; the first round's
    // p50s are kept for the notes (a server just started).
    let cold: { llm: number; llmDirect: number; preview: number; app: number } | null = null;
    const warm = await warmUntilSteady(async () => {
      const cpu = process.cpuUsage();
      const g = await load.llm(gateway, sandboxAuth, LLM_REQUESTS / 4);
      const d = await load.llm(direct, {}, LLM_REQUESTS / 4);
      const c = await load.http(preview, cookie, PREVIEW_REQUESTS / 2);
      await load.http(preview, pat, PREVIEW_REQUESTS / 2);
      const a = await load.http(appUrl, {}, PREVIEW_REQUESTS / 2);
      await load.llm(bare, {}, LLM_REQUESTS / 4);
      await load.http(bareTwoUrl, {}, PREVIEW_REQUESTS / 2);
      const used = process.cpuUsage(cpu);
      cold ??= {
        llm: percentile(g.first, 50),
        llmDirect: percentile(d.first, 50),
        preview: percentile(c, 50),
        app: percentile(a, 50),
      };
      // Per request through this process: the server's and the in-process bare proxy's.
      return (used.user + used.system) / (LLM_REQUESTS / 2 + PREVIEW_REQUESTS * 1.5);
    });
    const first = cold!;
    const warmNote = `after ${describeWarmUp(warm, 'µs/request', "the server's process's CPU")}`;

    const g1 = await load.llm(gateway, sandboxAuth, LLM_REQUESTS / 2);
    const d1 = await load.llm(direct, {}, LLM_REQUESTS / 2);
    const b1 = await load.llm(bare, {}, LLM_REQUESTS / 2);
    const g2 = await load.llm(gateway, sandboxAuth, LLM_REQUESTS / 2);
    const d2 = await load.llm(direct, {}, LLM_REQUESTS / 2);
    const b2 = await load.llm(bare, {}, LLM_REQUESTS / 2);
    const gw = { first: [...g1.first, ...g2.first], total: [...g1.total, ...g2.total] };
    const dd = { first: [...d1.first, ...d2.first], total: [...d1.total, ...d2.total] };
    const bp = [...b1.first, ...b2.first];
    const llmNote = `${LLM_REQUESTS} streamed chat completions, concurrency ${CONCURRENCY}, clients and stub in a process of their own, ${warmNote}; first byte p50 in the first round after start ${round(first.llm)} vs ${round(first.llmDirect)} ms; baseline = stub upstream directly`;
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

    results.push({
      name: 'llm gateway first byte p50 vs a bare node:http proxy',
      value: round(percentile(gw.first, 50)),
      unit: 'ms',
      baseline: round(percentile(bp, 50)),
      note: `the same completions; baseline = a bare node:http reverse proxy in the server's process (the two extra hops with no work of ours), in the same alternated rounds: ${round(percentile(bp, 50) - percentile(dd.first, 50))} ms over the upstream directly`,
    });

    const byCookie: number[] = [];
    const byToken: number[] = [];
    const ap: number[] = [];
    const bareTwo: number[] = [];
    // Interleaved, so a change of the machine's load falls on all four alike.
    for (let round = 0; round < 2; round++) {
      byCookie.push(...(await load.http(preview, cookie, PREVIEW_REQUESTS / 2)));
      byToken.push(...(await load.http(preview, pat, PREVIEW_REQUESTS / 2)));
      ap.push(...(await load.http(appUrl, {}, PREVIEW_REQUESTS / 2)));
      bareTwo.push(...(await load.http(bareTwoUrl, {}, PREVIEW_REQUESTS / 2)));
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
          note: `${PREVIEW_REQUESTS} GET, concurrency ${CONCURRENCY}, ${label.includes('API') ? 'API token' : `preview cookie (p50 in the first round after start ${round(first.preview)} vs ${round(first.app)} ms)`}, clients and app in a process of their own, ${warmNote}; baseline = app directly`,
        });
      }
    }
    results.push({
      name: 'preview proxy GET p50 vs two bare node:http proxies',
      value: round(percentile(byCookie, 50)),
      unit: 'ms',
      baseline: round(percentile(bareTwo, 50)),
      note: `the same GETs (preview cookie); baseline = two bare node:http reverse proxies in a row, the first in the server's process and the second in a process of its own (where the daemon is), in the same interleaved rounds: ${round(percentile(bareTwo, 50) - percentile(ap, 50))} ms over the app directly`,
    });
    const wsPreview = await load.ws(preview.replace(/^http/, 'ws'), pat, WS_ROUND_TRIPS);
    const wsDirect = await load.ws(`ws://127.0.0.1:${appPort}/`, {}, WS_ROUND_TRIPS);
    for (const p of [50, 99]) {
      results.push({
        name: `preview WebSocket echo p${p}`,
        value: round(percentile(wsPreview, p)),
        unit: 'ms',
        baseline: round(percentile(wsDirect, p)),
        note: `${WS_ROUND_TRIPS} sequential round trips on one socket, client and app in a process of their own; baseline = app directly`,
      });
    }

    return results;
  } finally {
    bareProxy?.close();
    barePreview?.close();
    bareDaemon?.close();
    load.stop();
    await e?.stop();
  }
}

runIfMain(import.meta.url, run);
