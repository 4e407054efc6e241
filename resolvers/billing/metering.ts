// Cost of a sandbox (and so of its session) so far (R-SBX-5): finished running intervals plus the one in progress.
import { type RateTable, costUsd } from './cost';
import type { ProviderName } from '../providers/types';

export interface MeteredSandbox {
  provider: ProviderName;
  cpu: number;
  memoryGiB: number;
  diskGiB: number;
  runningSeconds: number;
  runningSince: Date | null;
}

export function sandboxSeconds(sandbox: MeteredSandbox, now = Date.now()): number {
  const current = sandbox.runningSince ? Math.max(0, (now - sandbox.runningSince.getTime()) / 1000) : 0;
  return sandbox.runningSeconds + current;
}

export function sandboxCostUsd(sandbox: MeteredSandbox | null, rates: RateTable, now = Date.now()): number {
  if (!sandbox) return 0;
  return costUsd({
    provider: sandbox.provider,
    spec: { cpu: sandbox.cpu, memoryGiB: sandbox.memoryGiB, diskGiB: sandbox.diskGiB },
    seconds: sandboxSeconds(sandbox, now),
    rates,
  });
}
