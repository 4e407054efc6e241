// Per-second sandbox cost metering (R-SBX-5). Rates are held as integer nano-dollars per unit-hour
// and every product is computed in BigInt, so results are exact before the final rounding to
// micro-dollars (well below the $0.0001 the API shows).
import type { HardwareSpec, ProviderName } from '../providers/types';

export interface ResourceRates {
  /** USD per vCPU-hour. */
  cpuPerHourUsd: number;
  /** USD per GiB-hour of memory. */
  memoryGiBPerHourUsd: number;
  /** USD per GiB-hour of disk. */
  diskGiBPerHourUsd: number;
}

export type RateTable = Record<ProviderName, ResourceRates>;
export type RateOverrides = Partial<Record<ProviderName, Partial<ResourceRates>>>;

const DAYTONA_RATES: ResourceRates = {
  cpuPerHourUsd: 0.03,
  memoryGiBPerHourUsd: 0.0075,
  diskGiBPerHourUsd: 0.0005,
};

const times = (rates: ResourceRates, factor: number): ResourceRates => ({
  cpuPerHourUsd: rates.cpuPerHourUsd * factor,
  memoryGiBPerHourUsd: rates.memoryGiBPerHourUsd * factor,
  diskGiBPerHourUsd: rates.diskGiBPerHourUsd * factor,
});

/**
 * Daytona's published rates; E2B and Platinum cost about twice as much; LOCAL is free, and so is
 * DOCKER until an operator prices their own hosts (SINGULACOMP_RATES, e.g. {"DOCKER":{"cpuPerHourUsd":0.01}}).
 */
export const DEFAULT_RATES: Readonly<RateTable> = Object.freeze({
  LOCAL: { cpuPerHourUsd: 0, memoryGiBPerHourUsd: 0, diskGiBPerHourUsd: 0 },
  DAYTONA: DAYTONA_RATES,
  E2B: times(DAYTONA_RATES, 2),
  PLATINUM: times(DAYTONA_RATES, 2),
  DOCKER: { cpuPerHourUsd: 0, memoryGiBPerHourUsd: 0, diskGiBPerHourUsd: 0 },
});

/** Merges configured overrides over the defaults (the config object of R-SBX-5). */
export function resolveRates(overrides: RateOverrides = {}): RateTable {
  const table = { ...DEFAULT_RATES } as RateTable;
  for (const provider of Object.keys(overrides) as ProviderName[]) {
    table[provider] = { ...DEFAULT_RATES[provider], ...overrides[provider] };
  }
  return table;
}

const NANO = 1_000_000_000;
const toNano = (usd: number): bigint => {
  if (!Number.isFinite(usd) || usd < 0)
    throw new RangeError(`rate must be a non-negative number, got ${usd}`);
  return BigInt(Math.round(usd * NANO));
};

/** Nano-dollars per hour for a spec; hardware amounts are whole units (R-SBX-4). */
function hourlyNano(spec: HardwareSpec, rates: ResourceRates): bigint {
  return (
    BigInt(Math.round(spec.cpu)) * toNano(rates.cpuPerHourUsd) +
    BigInt(Math.round(spec.memoryGiB)) * toNano(rates.memoryGiBPerHourUsd) +
    BigInt(Math.round(spec.diskGiB)) * toNano(rates.diskGiBPerHourUsd)
  );
}

/** Whole metered seconds: a started second is billed (providers meter per second). */
export const meteredSeconds = (seconds: number): number => (seconds <= 0 ? 0 : Math.ceil(seconds - 1e-9));

export interface CostInput {
  provider: ProviderName;
  spec: HardwareSpec;
  seconds: number;
  rates?: RateTable;
}

/** Cost in micro-dollars (integer), rounded half up. */
export function costMicroUsd({ provider, spec, seconds, rates = DEFAULT_RATES }: CostInput): number {
  const nano = hourlyNano(spec, rates[provider]) * BigInt(meteredSeconds(seconds));
  // nano-dollar-seconds / 3600 s/h / 1000 nano/micro, rounded half up.
  const divisor = 3_600_000n;
  return Number((nano + divisor / 2n) / divisor);
}

/** Cost in USD, exact to the micro-dollar. */
export function costUsd(input: CostInput): number {
  return costMicroUsd(input) / 1_000_000;
}

/** USD per hour for a spec on a provider. */
export function hourlyRateUsd(
  provider: ProviderName,
  spec: HardwareSpec,
  rates: RateTable = DEFAULT_RATES,
): number {
  return Number(hourlyNano(spec, rates[provider])) / NANO;
}

export interface RunningInterval {
  startedAt: Date;
  /** null while still running: metered up to `now`. */
  stoppedAt: Date | null;
}

/** Sum of metered seconds over running intervals (each interval rounded up to whole seconds). */
export function runningSeconds(intervals: readonly RunningInterval[], now: Date = new Date()): number {
  let total = 0;
  for (const interval of intervals) {
    const end = (interval.stoppedAt ?? now).getTime();
    total += meteredSeconds((end - interval.startedAt.getTime()) / 1000);
  }
  return total;
}

/** Cost of a sandbox's running intervals, in USD. */
export function intervalsCostUsd(input: {
  provider: ProviderName;
  spec: HardwareSpec;
  intervals: readonly RunningInterval[];
  now?: Date;
  rates?: RateTable;
}): number {
  return costUsd({
    provider: input.provider,
    spec: input.spec,
    seconds: runningSeconds(input.intervals, input.now),
    ...(input.rates ? { rates: input.rates } : {}),
  });
}
