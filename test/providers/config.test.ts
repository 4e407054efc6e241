import { describe, expect, it } from 'vitest';
import { createCloudProviders } from '../../resolvers/providers/index';
import type { SandboxProvider } from '../../resolvers/providers/types';
import { parseEnv } from '../../server/env';

const base = { DAYTONA_API_KEY: 'dtn_x', E2B_API_KEY: 'e2b_x' };

async function providersFor(extra: Record<string, string>): Promise<Record<string, SandboxProvider>> {
  const providers = createCloudProviders(parseEnv({ ...base, ...extra }));
  const byName = Object.fromEntries(providers.map((p) => [p.name, p]));
  await Promise.all(providers.map((p) => p.close?.()));
  return byName;
}

describe('provider limits from configuration', () => {
  it('defaults to Daytona’s documented 4 vCPU / 8 GiB / 10 GiB, and E2B’s Hobby plan: 8 / 8 / 10 and one-hour sandboxes', async () => {
    const { DAYTONA, E2B } = await providersFor({});
    expect(DAYTONA?.caps).toEqual({ cpu: 4, memoryGiB: 8, diskGiB: 10 });
    expect(E2B?.caps).toEqual({ cpu: 8, memoryGiB: 8, diskGiB: 10 });
    expect(E2B?.maxSandboxLifetimeMs).toBe(3_600_000);
    expect(DAYTONA?.maxSandboxLifetimeMs).toBeUndefined();
  });

  it('takes per-account caps and the E2B plan from the environment', async () => {
    const { DAYTONA, E2B } = await providersFor({
      DAYTONA_MAX_CPU: '8',
      DAYTONA_MAX_DISK_GIB: '50',
      E2B_MAX_CPU: '4',
      E2B_PLAN: 'pro',
    });
    expect(DAYTONA?.caps).toEqual({ cpu: 8, memoryGiB: 8, diskGiB: 50 });
    expect(E2B?.caps).toEqual({ cpu: 4, memoryGiB: 8, diskGiB: 20 });
    expect(E2B?.maxSandboxLifetimeMs).toBe(86_400_000);
  });

  it('refuses a cap that is not a positive whole number', () => {
    expect(() => parseEnv({ ...base, DAYTONA_MAX_CPU: '0' })).toThrow(/DAYTONA_MAX_CPU/);
    expect(() => parseEnv({ ...base, E2B_PLAN: 'enterprise' })).toThrow(/E2B_PLAN/);
  });
});
