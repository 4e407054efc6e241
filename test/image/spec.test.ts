import { describe, expect, test } from 'vitest';
import { applyProviderCaps, DEFAULT_HARDWARE_SPEC, resolveHardwareSpec } from '../../image/spec';

/** Caps of an example provider account (adapters configure their own). */
const CAPS = { cpu: 16, memoryGiB: 32, diskGiB: 256 };

describe('resolveHardwareSpec', () => {
  test('an empty input gives the defaults 2 vCPU, 4 GiB memory, 20 GiB disk', () => {
    expect(resolveHardwareSpec({})).toEqual({
      spec: { cpu: 2, memoryGiB: 4, diskGiB: 20 },
      warnings: [],
      errors: [],
    });
    expect(DEFAULT_HARDWARE_SPEC).toEqual({ cpu: 2, memoryGiB: 4, diskGiB: 20 });
  });

  test('the limits themselves are accepted unchanged', () => {
    expect(resolveHardwareSpec({ cpu: 32, memory: 128, disk: 500 }).spec).toEqual({
      cpu: 32,
      memoryGiB: 128,
      diskGiB: 500,
    });
    expect(resolveHardwareSpec({ cpu: 1, memory: 1, disk: 1 }).spec).toEqual({
      cpu: 1,
      memoryGiB: 1,
      diskGiB: 1,
    });
  });

  test('values one above each limit are clamped with one warning each', () => {
    const result = resolveHardwareSpec({ cpu: 33, memory: 129, disk: 501 }, ['t']);
    expect(result.spec).toEqual({ cpu: 32, memoryGiB: 128, diskGiB: 500 });
    expect(result.warnings).toEqual([
      't.cpu: 33 vCPU is above the platform maximum of 32; clamped to 32',
      't.memory: 129 GiB is above the platform maximum of 128; clamped to 128',
      't.disk: 501 GiB is above the platform maximum of 500; clamped to 500',
    ]);
    expect(result.errors).toEqual([]);
  });

  test('negative, NaN, boolean and null values are errors with their field path', () => {
    const result = resolveHardwareSpec({ cpu: -1, memory: Number.NaN, disk: true }, ['x']);
    expect(result.errors.map((error) => error.field)).toEqual([
      ['x', 'cpu'],
      ['x', 'memory'],
      ['x', 'disk'],
    ]);
  });
});

describe('applyProviderCaps', () => {
  test('caps of 16 / 32 / 256 clamp 32 vCPU / 128 GiB / 500 GiB and the warnings name the provider', () => {
    const result = applyProviderCaps({ cpu: 32, memoryGiB: 128, diskGiB: 500 }, CAPS, 'Daytona');
    expect(result.spec).toEqual({ cpu: 16, memoryGiB: 32, diskGiB: 256 });
    expect(result.warnings).toEqual([
      'cpu: 32 vCPU exceeds the Daytona cap of 16; clamped to 16',
      'memoryGiB: 128 GiB exceeds the Daytona cap of 32; clamped to 32',
      'diskGiB: 500 GiB exceeds the Daytona cap of 256; clamped to 256',
    ]);
  });

  test('a spec within the caps is returned unchanged and without warnings', () => {
    expect(applyProviderCaps({ cpu: 2, memoryGiB: 4, diskGiB: 20 }, CAPS, 'Daytona')).toEqual({
      spec: { cpu: 2, memoryGiB: 4, diskGiB: 20 },
      warnings: [],
    });
  });

  test('a provider without caps leaves the spec alone', () => {
    expect(applyProviderCaps({ cpu: 32, memoryGiB: 128, diskGiB: 500 }, undefined, 'LOCAL').warnings).toEqual(
      [],
    );
  });
});
