// Builds the cloud adapters this server has credentials for (R-SBX-2). Only configured providers
// exist; a project or template naming another one fails its sessions with ProviderNotConfiguredError.
// Keys come from the server's environment and never reach a sandbox.
import { DaytonaProvider } from './daytona';
import { E2BProvider } from './e2b';
import type { RetryOptions } from './errors';
import { PlatinumProvider } from './platinum';
import type { ProviderName, SandboxProvider } from './types';

/** Credentials and endpoints of the cloud providers (server/env.ts reads them from the environment). */
export interface CloudProviderSettings {
  sandboxEntry: string | null;
  daytona: {
    apiKey: string;
    apiUrl: string;
    target: string | null;
    /** Per-sandbox caps configured for this organization (unset fields: Daytona's defaults). */
    caps: { cpu?: number; memoryGiB?: number; diskGiB?: number };
    defaultImage: string | null;
  } | null;
  e2b: {
    apiKey: string;
    apiUrl: string | null;
    domain: string | null;
    sandboxUrl: string | null;
    caps: { cpu?: number; memoryGiB?: number };
    /** The team's plan (disk cap, sandbox length, create rate). @default 'hobby' */
    plan?: 'hobby' | 'pro';
    /** The plan's maximum sandbox length (hobby 1 h, pro 24 h). */
    maxSandboxLifetimeMs: number;
  } | null;
  platinum: { apiKey: string; apiUrl: string } | null;
}

export interface CloudProvidersOptions {
  /** Entry command of every cloud sandbox. @default env.sandboxEntry, else the image's entrypoint */
  entryCommand?: string;
  retry?: RetryOptions;
}

/** Cloud adapters for every provider whose API key is set in `env`. */
export function createCloudProviders(
  env: CloudProviderSettings,
  options: CloudProvidersOptions = {},
): SandboxProvider[] {
  const entry = options.entryCommand ?? env.sandboxEntry ?? undefined;
  const common = {
    ...(entry ? { entryCommand: entry } : {}),
    ...(options.retry ? { retry: options.retry } : {}),
  };
  const providers: SandboxProvider[] = [];
  if (env.daytona) {
    providers.push(
      new DaytonaProvider({
        apiKey: env.daytona.apiKey,
        apiUrl: env.daytona.apiUrl,
        ...(env.daytona.target ? { target: env.daytona.target } : {}),
        caps: env.daytona.caps,
        ...(env.daytona.defaultImage ? { defaultImage: env.daytona.defaultImage } : {}),
        ...common,
      }),
    );
  }
  if (env.e2b) {
    providers.push(
      new E2BProvider({
        apiKey: env.e2b.apiKey,
        ...(env.e2b.apiUrl ? { apiUrl: env.e2b.apiUrl } : {}),
        ...(env.e2b.domain ? { domain: env.e2b.domain } : {}),
        ...(env.e2b.sandboxUrl ? { sandboxUrl: env.e2b.sandboxUrl } : {}),
        caps: env.e2b.caps,
        ...(env.e2b.plan ? { plan: env.e2b.plan } : {}),
        maxSandboxLifetimeMs: env.e2b.maxSandboxLifetimeMs,
        ...common,
      }),
    );
  }
  if (env.platinum) {
    providers.push(
      new PlatinumProvider({ apiKey: env.platinum.apiKey, apiUrl: env.platinum.apiUrl, ...common }),
    );
  }
  return providers;
}

/**
 * The adapters a server runs: env-built ones, replaced by any injected adapter of the same name
 * (tests point injected adapters at emulators).
 */
export function mergeProviders(
  fromEnv: SandboxProvider[],
  injected: SandboxProvider[] = [],
): SandboxProvider[] {
  const names = new Set<ProviderName>(injected.map((p) => p.name));
  return [...fromEnv.filter((p) => !names.has(p.name)), ...injected];
}
