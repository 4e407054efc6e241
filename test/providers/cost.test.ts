import { describe, expect, it } from 'vitest';
import {
  costMicroUsd,
  costUsd,
  DEFAULT_RATES,
  hourlyRateUsd,
  intervalsCostUsd,
  resolveRates,
  runningSeconds,
} from '../../resolvers/billing/cost';

const DEFAULT_SPEC = { cpu: 2, memoryGiB: 4, diskGiB: 20 };

describe('sandbox cost metering', () => {
  it('prices the default spec at $0.10 per hour on Daytona and twice that on E2B and Platinum', () => {
    expect(hourlyRateUsd('DAYTONA', DEFAULT_SPEC)).toBe(0.1);
    expect(hourlyRateUsd('E2B', DEFAULT_SPEC)).toBe(0.2);
    expect(hourlyRateUsd('PLATINUM', DEFAULT_SPEC)).toBe(0.2);
    expect(hourlyRateUsd('LOCAL', DEFAULT_SPEC)).toBe(0);
  });

  it('charges 90 seconds of the default spec $0.0025 on Daytona and $0.005 on E2B', () => {
    expect(costUsd({ provider: 'DAYTONA', spec: DEFAULT_SPEC, seconds: 90 }).toFixed(4)).toBe('0.0025');
    expect(costMicroUsd({ provider: 'DAYTONA', spec: DEFAULT_SPEC, seconds: 90 })).toBe(2_500);
    expect(costUsd({ provider: 'E2B', spec: DEFAULT_SPEC, seconds: 90 }).toFixed(4)).toBe('0.0050');
    expect(costMicroUsd({ provider: 'E2B', spec: DEFAULT_SPEC, seconds: 90 })).toBe(5_000);
    expect(costUsd({ provider: 'PLATINUM', spec: DEFAULT_SPEC, seconds: 90 })).toBe(0.005);
    expect(costUsd({ provider: 'LOCAL', spec: DEFAULT_SPEC, seconds: 90 })).toBe(0);
  });

  it('scales each resource by its own rate', () => {
    // 1 vCPU-hour, 1 GiB-hour of memory, 1 GiB-hour of disk on Daytona.
    expect(costUsd({ provider: 'DAYTONA', spec: { cpu: 1, memoryGiB: 0, diskGiB: 0 }, seconds: 3600 })).toBe(
      0.03,
    );
    expect(costUsd({ provider: 'DAYTONA', spec: { cpu: 0, memoryGiB: 1, diskGiB: 0 }, seconds: 3600 })).toBe(
      0.0075,
    );
    expect(costUsd({ provider: 'DAYTONA', spec: { cpu: 0, memoryGiB: 0, diskGiB: 1 }, seconds: 3600 })).toBe(
      0.0005,
    );
  });

  it('meters per started second', () => {
    expect(costMicroUsd({ provider: 'DAYTONA', spec: DEFAULT_SPEC, seconds: 0.2 })).toBe(28); // 1 s = 27.78 µ$
    expect(costMicroUsd({ provider: 'DAYTONA', spec: DEFAULT_SPEC, seconds: 0 })).toBe(0);
  });

  it('adds no floating-point drift over a long run', () => {
    expect(costUsd({ provider: 'DAYTONA', spec: DEFAULT_SPEC, seconds: 30 * 24 * 3600 })).toBe(72);
  });

  it('takes overridden rates from the config object', () => {
    const rates = resolveRates({ DAYTONA: { cpuPerHourUsd: 0.05 }, LOCAL: { cpuPerHourUsd: 0.01 } });
    expect(rates.DAYTONA).toEqual({
      cpuPerHourUsd: 0.05,
      memoryGiBPerHourUsd: 0.0075,
      diskGiBPerHourUsd: 0.0005,
    });
    expect(rates.E2B).toEqual(DEFAULT_RATES.E2B);
    expect(costUsd({ provider: 'DAYTONA', spec: DEFAULT_SPEC, seconds: 3600, rates })).toBe(0.14);
    expect(costUsd({ provider: 'LOCAL', spec: DEFAULT_SPEC, seconds: 3600, rates })).toBe(0.02);
  });

  it('sums running intervals, metering an open one up to now', () => {
    const t0 = new Date('2026-01-01T00:00:00Z');
    const at = (s: number) => new Date(t0.getTime() + s * 1000);
    const intervals = [
      { startedAt: t0, stoppedAt: at(60) },
      { startedAt: at(100), stoppedAt: at(120.5) },
      { startedAt: at(200), stoppedAt: null },
    ];
    expect(runningSeconds(intervals, at(209))).toBe(60 + 21 + 9);
    expect(intervalsCostUsd({ provider: 'DAYTONA', spec: DEFAULT_SPEC, intervals, now: at(209) })).toBe(
      0.0025,
    );
  });
});
