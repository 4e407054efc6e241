// Latency through the daemon's reverse proxy (user-context check + node:http pipe) against the same
// requests sent straight to OpenCode, in the same run: a few thousand GET /global/health with
// bounded concurrency over keep-alive connections. The daemon runs as a sandbox runs it (the bundled
// file in its own process) and the load generator runs in a process of its own, so neither side
// shares an event loop with the client (the direct side never did: OpenCode is its own process).
import { signUserContext, USER_CONTEXT_HEADER } from '../contract/user-context';
import { BUNDLED_DAEMON, startDaemonWorld } from './support/daemon';
import { type BenchResult, percentile, runIfMain, runLoad } from './support/harness';
export type { BenchResult };

const REQUESTS = 3_000;
/** One caller shows what the proxy adds to a request; eight, what it does under load. */
const CONCURRENCIES = [1, 8];
const WARMUP_REQUESTS = 200;

const round = (ms: number): number => Math.round(ms * 1_000) / 1_000;

export async function run(): Promise<BenchResult[]> {
  const world = await startDaemonWorld();
  try {
    const daemon = await world.spawn(BUNDLED_DAEMON);
    const header = signUserContext(
      { sessionId: world.sessionId, userId: 'bench', audience: 'opencode', ttlSeconds: 300 },
      world.token,
    );
    const load = async (
      port: number,
      headers: Record<string, string>,
      concurrency: number,
    ): Promise<number[]> => {
      const result = await runLoad({
        url: `http://127.0.0.1:${port}/global/health`,
        method: 'GET',
        headers,
        concurrency,
        count: REQUESTS / 2,
        warmupPerCaller: WARMUP_REQUESTS / concurrency,
        keepSamples: true,
      });
      if (result.failures > 0) throw new Error(`${result.failures} failed: ${result.firstFailure}`);
      return result.samples ?? [];
    };
    const rows: BenchResult[] = [];
    for (const concurrency of CONCURRENCIES) {
      const direct = () => load(daemon.opencodePort, {}, concurrency);
      const proxied = () => load(daemon.servicePort, { [USER_CONTEXT_HEADER]: header }, concurrency);
      // Interleave halves so drift on a shared machine hits both sides alike.
      const directSamples = [...(await direct())];
      const proxySamples = [...(await proxied())];
      directSamples.push(...(await direct()));
      proxySamples.push(...(await proxied()));
      const note = `${REQUESTS} GET /global/health, ${concurrency === 1 ? 'one caller (latency added per request)' : `${concurrency} concurrent callers (three processes on two cores: queueing included)`}, keep-alive; baseline = direct to OpenCode`;
      for (const p of [50, 99]) {
        rows.push({
          name: `daemon proxy p${p} latency, concurrency ${concurrency}`,
          value: round(percentile(proxySamples, p)),
          unit: 'ms',
          baseline: round(percentile(directSamples, p)),
          note,
        });
      }
    }
    return rows;
  } finally {
    await world.close();
  }
}

runIfMain(import.meta.url, run);
