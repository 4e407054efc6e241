// Sandbox provisioning latency (create → STARTED) through each provider adapter and its real SDK
// against the local emulators, with the emulator's own handling time (from its request log)
// reported beside it so the SDK + adapter overhead is visible. Also create → daemon answering
// health, which adds the entry process's start-up. `npx tsx bench/provisioning.ts` prints a table.
import { runIfMain } from './support/harness';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DaytonaProvider } from '../resolvers/providers/daytona';
import { E2BProvider } from '../resolvers/providers/e2b';
import { PlatinumProvider } from '../resolvers/providers/platinum';
import type { SandboxProvider } from '../resolvers/providers/types';
import { DaytonaEmulator } from '../test/emulators/daytona';
import { E2BEmulator } from '../test/emulators/e2b';
import { fakeDaemonCommand, type RequestRecord, waitForHealth } from '../test/emulators/harness';
import { PlatinumEmulator } from '../test/emulators/platinum';
import { sandboxRequest } from '../test/emulators/request';

const RUNS = 10;
/** Emulated boot time of Daytona and Platinum sandboxes (their state polling waits it out). */
const BOOT_DELAY_MS = 30;

interface Result {
  name: string;
  value: number;
  unit: string;
  baseline?: number;
  note?: string;
}

const median = (values: number[]): number => {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2
    ? (sorted[mid] as number)
    : ((sorted[mid - 1] as number) + (sorted[mid] as number)) / 2;
};

interface Target {
  label: string;
  provider: SandboxProvider;
  requests: RequestRecord[];
}

async function measure(target: Target): Promise<Result[]> {
  const toStarted: number[] = [];
  const emulatorMs: number[] = [];
  const requestCounts: number[] = [];
  const toHealthy: number[] = [];
  // One unmeasured warm-up run loads the SDK's lazy modules and opens keep-alive connections.
  for (let run = -1; run < RUNS; run++) {
    const from = target.requests.length;
    const started = performance.now();
    const sandbox = await target.provider.create(sandboxRequest());
    const createdAt = performance.now();
    const during = target.requests.slice(from);
    await waitForHealth(sandbox.serviceUrl as string, 10_000, sandbox.serviceHeaders);
    const healthyAt = performance.now();
    if (run >= 0) {
      toStarted.push(createdAt - started);
      toHealthy.push(healthyAt - started);
      emulatorMs.push(during.reduce((sum, r) => sum + r.durationMs, 0));
      requestCounts.push(during.length);
    }
    await target.provider.destroy(sandbox.providerSandboxId);
  }
  const ours = median(toStarted);
  const emulator = median(emulatorMs);
  const note = `median of ${RUNS}; ${median(requestCounts)} requests per create`;
  return [
    {
      name: `provisioning: ${target.label} create → STARTED (SDK + adapter + emulator)`,
      value: Number(ours.toFixed(1)),
      unit: 'ms',
      baseline: Number(emulator.toFixed(1)),
      note: `${note}; baseline = emulator-side handling time from its request log`,
    },
    {
      name: `provisioning: ${target.label} client-side share (create → STARTED minus emulator time)`,
      value: Number((ours - emulator).toFixed(1)),
      unit: 'ms',
      note:
        target.label === 'E2B'
          ? 'E2B create answers running at once: SDK request handling plus the envd stream start'
          : `includes waiting out the emulated ${BOOT_DELAY_MS} ms boot by state polling (Daytona SDK: every 100 ms; Platinum adapter: every 10 ms here)`,
    },
    {
      name: `provisioning: ${target.label} create → daemon answers /singulacomp/health`,
      value: Number(median(toHealthy).toFixed(1)),
      unit: 'ms',
      note: `${note}; the entry is a small node HTTP server (real process)`,
    },
  ];
}

export async function run(): Promise<Result[]> {
  const dir = mkdtempSync(join(tmpdir(), 'bench-provisioning-'));
  const entryCommand = fakeDaemonCommand(dir);
  const retry = { maxAttempts: 3, baseDelayMs: 20 };
  const results: Result[] = [];
  try {
    const daytona = await DaytonaEmulator.start({ bootDelayMs: BOOT_DELAY_MS });
    const daytonaProvider = new DaytonaProvider({
      apiKey: daytona.apiKey,
      apiUrl: daytona.apiUrl,
      entryCommand,
      retry,
    });
    try {
      results.push(
        ...(await measure({ label: 'Daytona', provider: daytonaProvider, requests: daytona.requests })),
      );
    } finally {
      await daytonaProvider.close();
      await daytona.close();
    }

    // Not paced to Hobby's one create a second: the bench measures our provisioning path.
    const e2b = await E2BEmulator.start({ createsPerSecond: 50 });
    try {
      results.push(
        ...(await measure({
          label: 'E2B',
          provider: new E2BProvider({
            apiKey: e2b.apiKey,
            apiUrl: e2b.url,
            sandboxUrl: e2b.url,
            domain: e2b.domain,
            hostToUrl: e2b.resolveHost,
            entryCommand,
            minCreateIntervalMs: 0,
            retry,
          }),
          requests: e2b.requests,
        })),
      );
    } finally {
      await e2b.close();
    }

    const platinum = await PlatinumEmulator.start({ bootDelayMs: BOOT_DELAY_MS });
    try {
      results.push(
        ...(await measure({
          label: 'Platinum',
          provider: new PlatinumProvider({
            apiKey: platinum.apiKey,
            apiUrl: platinum.url,
            entryCommand,
            pollIntervalMs: 10,
            retry,
          }),
          requests: platinum.requests,
        })),
      );
    } finally {
      await platinum.close();
    }
    return results;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

runIfMain(import.meta.url, run);
