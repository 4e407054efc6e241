// The conformance suite's contract checks against the real providers. Each provider runs only when
// its API key and URL are in the environment (docs/providers/README.md); without them its block is
// reported as skipped. A provider joins by adding one entry to REAL_PROVIDERS.
import { afterAll, beforeAll, describe } from 'vitest';
import { DaytonaProvider } from '../../resolvers/providers/daytona';
import { E2BProvider } from '../../resolvers/providers/e2b';
import { sandboxRequest } from '../emulators/request';
import { type Adapter, type ContractProfile, contractChecks, type ContractTarget } from './adapter-suite';

/**
 * Entry command for a real sandbox, whose image has no platform daemon: a stand-in that answers
 * `GET /singulacomp/health` with the session id on SINGULACOMP_SERVICE_PORT, using the python3 that
 * Daytona's default snapshot and E2B's base template carry.
 */
const STAND_IN_DAEMON = [
  'sh -c \'d=$(mktemp -d) && mkdir -p "$d/singulacomp"',
  'printf "{\\"ok\\":true,\\"sessionId\\":\\"%s\\"}" "$SINGULACOMP_SESSION_ID" > "$d/singulacomp/health"',
  'cd "$d" && exec python3 -m http.server "$SINGULACOMP_SERVICE_PORT"\'',
].join(' && ');

/** Real runs boot and build for minutes. */
const REAL_TIMEOUT_MS = 15 * 60_000;

interface RealProvider {
  name: string;
  /** Environment variables that must all be set: the first is the API key. */
  env: readonly string[];
  make(env: Record<string, string>, apiKey: string): Adapter;
  profile: ContractProfile;
}

const REAL_PROVIDERS: RealProvider[] = [
  {
    name: 'DAYTONA',
    env: ['DAYTONA_CONFORMANCE_API_KEY', 'DAYTONA_CONFORMANCE_API_URL'],
    make: (env, apiKey) =>
      new DaytonaProvider({
        apiKey,
        apiUrl: env.DAYTONA_CONFORMANCE_API_URL as string,
        ...(env.DAYTONA_CONFORMANCE_TARGET ? { target: env.DAYTONA_CONFORMANCE_TARGET } : {}),
        entryCommand: STAND_IN_DAEMON,
        entryGraceMs: 5_000,
      }),
    profile: {
      apiKey: { envVar: 'DAYTONA_API_KEY', wrong: 'dtn_conformance_wrong_key' },
      stoppedState: 'STOPPED',
      serviceAccess: { refusedStatus: 307 },
      accountMax: { cpu: 4, memoryGiB: 8, diskGiB: 10 },
      unknownSnapshotRef: 'singulacomp-conformance-never-built',
      timeoutMs: REAL_TIMEOUT_MS,
    },
  },
  {
    name: 'E2B',
    env: ['E2B_CONFORMANCE_API_KEY', 'E2B_CONFORMANCE_API_URL'],
    make: (env, apiKey) =>
      new E2BProvider({
        apiKey,
        apiUrl: env.E2B_CONFORMANCE_API_URL as string,
        ...(env.E2B_CONFORMANCE_DOMAIN ? { domain: env.E2B_CONFORMANCE_DOMAIN } : {}),
        plan: env.E2B_CONFORMANCE_PLAN === 'pro' ? 'pro' : 'hobby',
        entryCommand: STAND_IN_DAEMON,
      }),
    profile: {
      apiKey: { envVar: 'E2B_API_KEY', wrong: 'e2b_conformance_wrong_key' },
      stoppedState: 'HIBERNATED',
      serviceAccess: null,
      accountMax: { cpu: 8, memoryGiB: 8, diskGiB: 10 },
      unknownSnapshotRef: 'singulacomp-conformance-never-built',
      timeoutMs: REAL_TIMEOUT_MS,
    },
  },
];

/** The provider's variables when every one of them is set, else null. */
function credentials(env: readonly string[]): Record<string, string> | null {
  const values = Object.fromEntries(env.map((name) => [name, process.env[name] ?? '']));
  if (Object.values(values).some((value) => value === '')) return null;
  return { ...process.env, ...values } as Record<string, string>;
}

for (const real of REAL_PROVIDERS) {
  const env = credentials(real.env);
  describe.runIf(env !== null)(`conformance against the real ${real.name} (${real.env.join(', ')})`, () => {
    let provider: Adapter;
    const target: ContractTarget = {
      get provider() {
        return provider;
      },
      make: ({ apiKey }) => real.make(env ?? {}, apiKey),
      request: () => sandboxRequest({ labels: { 'singulacomp.conformance': 'true' } }),
    };
    beforeAll(() => {
      provider = real.make(env ?? {}, env?.[real.env[0] as string] ?? '');
    });
    afterAll(async () => {
      await provider?.close?.();
    });
    contractChecks(() => target, real.profile);
  });
}
