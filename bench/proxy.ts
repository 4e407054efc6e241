// Latency through the daemon's reverse proxy (user-context check + node:http pipe) against the same
// requests sent straight to OpenCode, in the same run: a few thousand GET /global/health with
// bounded concurrency over keep-alive connections.
import { Agent as HttpAgent, request } from 'node:http';
import { performance } from 'node:perf_hooks';
import { startTestAgent } from '../test/agent/harness';
import { type BenchResult, runIfMain } from './support/harness';
export type { BenchResult };

const REQUESTS = 3_000;
const CONCURRENCY = 8;
const WARMUP = 200;

function get(port: number, path: string, headers: Record<string, string>, agent: HttpAgent): Promise<number> {
  return new Promise((resolve, reject) => {
    const started = performance.now();
    const req = request({ host: '127.0.0.1', port, path, headers, agent }, (res) => {
      res.resume();
      res.on('end', () => {
        if (res.statusCode !== 200) reject(new Error(`HTTP ${res.statusCode}`));
        else resolve(performance.now() - started);
      });
    });
    req.on('error', reject);
    req.end();
  });
}

async function measure(
  port: number,
  headers: () => Record<string, string>,
  count: number,
): Promise<number[]> {
  const agent = new HttpAgent({ keepAlive: true, maxSockets: CONCURRENCY });
  const samples: number[] = [];
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < count) {
      next += 1;
      samples.push(await get(port, '/global/health', headers(), agent));
    }
  };
  await Promise.all(Array.from({ length: CONCURRENCY }, worker));
  agent.destroy();
  return samples;
}

function percentile(samples: number[], p: number): number {
  const sorted = [...samples].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
}

const round = (ms: number): number => Math.round(ms * 1_000) / 1_000;

export async function run(): Promise<BenchResult[]> {
  const h = await startTestAgent();
  try {
    const direct = h.agent.supervisor.current!.port;
    const proxied = h.agent.servicePort;
    const header = h.userContext({ ttlSeconds: 300 });
    const viaProxy = () => ({ 'x-singulacomp-user-context': header });
    await measure(direct, () => ({}), WARMUP);
    await measure(proxied, viaProxy, WARMUP);
    // Interleave halves so drift on a shared machine hits both sides alike.
    const d1 = await measure(direct, () => ({}), REQUESTS / 2);
    const p1 = await measure(proxied, viaProxy, REQUESTS / 2);
    const d2 = await measure(direct, () => ({}), REQUESTS / 2);
    const p2 = await measure(proxied, viaProxy, REQUESTS / 2);
    const directSamples = [...d1, ...d2];
    const proxySamples = [...p1, ...p2];
    const note = `${REQUESTS} GET /global/health, concurrency ${CONCURRENCY}, keep-alive; baseline = direct to OpenCode`;
    return [
      {
        name: 'daemon proxy p50 latency',
        value: round(percentile(proxySamples, 50)),
        unit: 'ms',
        baseline: round(percentile(directSamples, 50)),
        note,
      },
      {
        name: 'daemon proxy p99 latency',
        value: round(percentile(proxySamples, 99)),
        unit: 'ms',
        baseline: round(percentile(directSamples, 99)),
        note,
      },
    ];
  } finally {
    await h.stop();
  }
}

runIfMain(import.meta.url, run);
