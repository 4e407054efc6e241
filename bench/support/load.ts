// HTTP load generator, run as its own process so the server under test does not share its event
// loop: `tsx bench/support/load.ts '<LoadConfig JSON>'` prints one LoadResult JSON line.
// Keep-alive connections, a fixed number of concurrent callers, POST with a fixed body (or GET).
import { Agent, request } from 'node:http';
import { performance } from 'node:perf_hooks';
import { pathToFileURL } from 'node:url';

export interface LoadConfig {
  url: string;
  /** @default 'POST' */
  method?: 'GET' | 'POST';
  /** The POST body; a GET sends none. */
  body?: string;
  headers?: Record<string, string>;
  concurrency: number;
  /** Stop after this long (ms)… */
  durationMs?: number;
  /** …or after this many requests. */
  count?: number;
  /** Unmeasured requests first (per caller). @default 0 */
  warmupPerCaller?: number;
  /** Return every measured latency too. @default false */
  keepSamples?: boolean;
}

export interface LoadResult {
  requests: number;
  /** Responses with a status other than 200 or a body carrying "errors". */
  failures: number;
  firstFailure: string | null;
  elapsedMs: number;
  requestsPerSecond: number;
  p50Ms: number;
  p99Ms: number;
  /** Every measured latency (ms), when `keepSamples` was set. */
  samples?: number[];
}

export function percentile(samples: number[], p: number): number {
  if (samples.length === 0) return Number.NaN;
  const sorted = [...samples].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]!;
}

function send(
  url: URL,
  body: string | null,
  headers: Record<string, string>,
  agent: Agent,
): Promise<{ status: number; text: string }> {
  return new Promise((resolve, reject) => {
    const req = request(
      {
        host: url.hostname,
        port: url.port,
        path: url.pathname + url.search,
        method: body === null ? 'GET' : 'POST',
        agent,
        headers:
          body === null
            ? headers
            : { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body), ...headers },
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, text: Buffer.concat(chunks).toString() }));
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    if (body === null) req.end();
    else req.end(body);
  });
}

export async function generateLoad(config: LoadConfig): Promise<LoadResult> {
  const url = new URL(config.url);
  const agent = new Agent({ keepAlive: true, maxSockets: config.concurrency });
  const headers = config.headers ?? {};
  const body = config.method === 'GET' ? null : (config.body ?? '');
  const samples: number[] = [];
  let failures = 0;
  let firstFailure: string | null = null;
  const check = (r: { status: number; text: string }) => {
    if (r.status !== 200 || r.text.includes('"errors"')) {
      failures++;
      firstFailure ??= `${r.status} ${r.text.slice(0, 300)}`;
    }
  };
  await Promise.all(
    Array.from({ length: config.concurrency }, async () => {
      for (let i = 0; i < (config.warmupPerCaller ?? 0); i++) check(await send(url, body, headers, agent));
    }),
  );
  failures = 0;
  firstFailure = null;
  const started = performance.now();
  const deadline = config.durationMs ? started + config.durationMs : Number.POSITIVE_INFINITY;
  let issued = 0;
  await Promise.all(
    Array.from({ length: config.concurrency }, async () => {
      while (performance.now() < deadline && (config.count === undefined || issued < config.count)) {
        issued++;
        const t0 = performance.now();
        const response = await send(url, body, headers, agent);
        samples.push(performance.now() - t0);
        check(response);
      }
    }),
  );
  const elapsedMs = performance.now() - started;
  agent.destroy();
  return {
    requests: samples.length,
    failures,
    firstFailure,
    elapsedMs,
    requestsPerSecond: (samples.length / elapsedMs) * 1_000,
    p50Ms: percentile(samples, 50),
    p99Ms: percentile(samples, 99),
    ...(config.keepSamples ? { samples } : {}),
  };
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  generateLoad(JSON.parse(process.argv[2] ?? '{}') as LoadConfig).then(
    (result) => process.stdout.write(`${JSON.stringify(result)}\n`),
    (error: unknown) => {
      console.error(error);
      process.exit(1);
    },
  );
}
