// Fitting a hardware spec to one provider before anything is sent: its configured per-sandbox caps
// (R-SBX-4: clamp down with a warning), then its own shape rules (fitSpec). Provisioning and the
// adapters' own snapshot builds use the same function, so a spec never reaches a provider's API in
// a form it refuses with a 400/403.
import { applyProviderCaps } from '../../image/spec';
import type { FittedSpec, HardwareSpec, SandboxProvider } from './types';

export function fitSpecToProvider(
  provider: Pick<SandboxProvider, 'name' | 'caps' | 'fitSpec'>,
  spec: Readonly<HardwareSpec>,
): FittedSpec {
  const capped = applyProviderCaps(spec, provider.caps, provider.name);
  if (!provider.fitSpec) return capped;
  const shaped = provider.fitSpec(capped.spec);
  return { spec: shaped.spec, warnings: [...capped.warnings, ...shaped.warnings] };
}

/** Reads `{cpu, memoryGiB, diskGiB}` caps from optional configured numbers, falling back per field. */
export function capsFrom(
  configured: Partial<HardwareSpec> | undefined,
  defaults: HardwareSpec,
): HardwareSpec {
  return {
    cpu: configured?.cpu ?? defaults.cpu,
    memoryGiB: configured?.memoryGiB ?? defaults.memoryGiB,
    diskGiB: configured?.diskGiB ?? defaults.diskGiB,
  };
}
