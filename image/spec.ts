// Hardware spec defaults and clamping (R-SBX-4). The platform limits apply first; a provider with
// tighter caps of its own clamps further and names itself in the warning. Provider caps live with
// their adapters (resolvers/providers/*), configured per account.

/** The resources a template asks for; the spec belongs to the template's snapshot (R-SBX-4). */
export interface HardwareSpec {
  cpu: number;
  memoryGiB: number;
  diskGiB: number;
}

/** A problem with one field of user input: `field` is its path, `message` says how to fix it. */
export interface FieldError {
  field: string[];
  message: string;
}

interface Limit {
  min: number;
  max: number;
  default: number;
  unit: string;
}

export const HARDWARE_LIMITS = {
  cpu: { min: 1, max: 32, default: 2, unit: 'vCPU' },
  memoryGiB: { min: 1, max: 128, default: 4, unit: 'GiB' },
  diskGiB: { min: 1, max: 500, default: 20, unit: 'GiB' },
} as const satisfies Record<keyof HardwareSpec, Limit>;

export const DEFAULT_HARDWARE_SPEC: Readonly<HardwareSpec> = Object.freeze({
  cpu: HARDWARE_LIMITS.cpu.default,
  memoryGiB: HARDWARE_LIMITS.memoryGiB.default,
  diskGiB: HARDWARE_LIMITS.diskGiB.default,
});

/** Manifest key → spec field; the manifest says `memory`/`disk`, the spec carries the unit. */
const MANIFEST_KEYS = [
  ['cpu', 'cpu'],
  ['memory', 'memoryGiB'],
  ['disk', 'diskGiB'],
] as const satisfies ReadonlyArray<readonly [string, keyof HardwareSpec]>;

export const HARDWARE_SPEC_KEYS: readonly string[] = [...MANIFEST_KEYS.map(([key]) => key), 'gpu'];

export interface ResolvedHardwareSpec {
  spec: HardwareSpec;
  warnings: string[];
  errors: FieldError[];
}

function describe(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'a list';
  if (typeof value === 'string') return `the string ${JSON.stringify(value.slice(0, 40))}`;
  if (typeof value === 'object') return 'a mapping';
  return String(value);
}

/**
 * Reads `cpu`, `memory` (GiB) and `disk` (GiB) from a template-like object, filling defaults.
 * Values above the platform limit are clamped down with a warning; anything that is not an
 * integer at or above the minimum is an error at `[...path, key]`. A `gpu` key is a warning: no
 * provider we run on offers GPUs, and refusing the manifest for it would be unhelpful.
 */
export function resolveHardwareSpec(
  input: Readonly<Record<string, unknown>>,
  path: readonly string[] = [],
): ResolvedHardwareSpec {
  const spec: HardwareSpec = { ...DEFAULT_HARDWARE_SPEC };
  const warnings: string[] = [];
  const errors: FieldError[] = [];
  for (const [key, specKey] of MANIFEST_KEYS) {
    if (!Object.hasOwn(input, key) || input[key] === undefined) continue;
    const value = input[key];
    const limit: Limit = HARDWARE_LIMITS[specKey];
    const field = [...path, key];
    const range = `an integer from ${limit.min} to ${limit.max} (${limit.unit})`;
    if (typeof value !== 'number' || !Number.isFinite(value)) {
      errors.push({
        field,
        message: `${key} must be ${range}, e.g. ${key}: ${limit.default}; got ${describe(value)}`,
      });
      continue;
    }
    if (!Number.isInteger(value)) {
      errors.push({ field, message: `${key} must be a whole number, ${range}; got ${value}` });
      continue;
    }
    if (value < limit.min) {
      errors.push({ field, message: `${key} must be at least ${limit.min} ${limit.unit}; got ${value}` });
      continue;
    }
    if (value > limit.max) {
      warnings.push(
        `${field.join('.')}: ${value} ${limit.unit} is above the platform maximum of ${limit.max}; clamped to ${limit.max}`,
      );
      spec[specKey] = limit.max;
      continue;
    }
    spec[specKey] = value;
  }
  if (Object.hasOwn(input, 'gpu')) {
    warnings.push(`${[...path, 'gpu'].join('.')}: GPUs are not supported; the key is ignored`);
  }
  return { spec, warnings, errors };
}

/** Clamps a platform-valid spec to a provider's tighter caps, one warning per clamped field. */
export function applyProviderCaps(
  spec: Readonly<HardwareSpec>,
  caps: Readonly<Partial<HardwareSpec>> | undefined,
  providerName: string,
): { spec: HardwareSpec; warnings: string[] } {
  const result: HardwareSpec = { ...spec };
  const warnings: string[] = [];
  if (!caps) return { spec: result, warnings };
  for (const [, specKey] of MANIFEST_KEYS) {
    const cap = caps[specKey];
    if (cap === undefined || result[specKey] <= cap) continue;
    warnings.push(
      `${specKey}: ${result[specKey]} ${HARDWARE_LIMITS[specKey].unit} exceeds the ${providerName} cap of ${cap}; clamped to ${cap}`,
    );
    result[specKey] = cap;
  }
  return { spec: result, warnings };
}
