// How the server reaches a sandbox's daemon: its serviceUrl plus the access headers the provider's
// edge requires there (Daytona's preview token for private sandboxes). Adapters return both on
// create and start; the headers are stored encrypted with the sandbox and replaced on every start,
// since the provider renews them. Every server→daemon request (reload, the preview proxy) builds
// its headers with `daemonRequestHeaders`.
import { decrypt, encrypt } from '../auth/crypto';
import type { ProviderSandbox } from './types';

/** Columns of the Sandbox row that carry the access of one (re)start. */
export interface ServiceAccessColumns {
  serviceUrl: string | null;
  serviceHeadersEnc: string | null;
  expiresAt: Date | null;
}

/** What to store after create or start: the URL, the headers encrypted (null when none), expiry. */
export function serviceAccessColumns(key: Buffer, sandbox: ProviderSandbox): ServiceAccessColumns {
  const headers = sandbox.serviceHeaders ?? {};
  return {
    serviceUrl: sandbox.serviceUrl,
    serviceHeadersEnc: Object.keys(headers).length > 0 ? encrypt(key, JSON.stringify(headers)) : null,
    expiresAt: sandbox.expiresAt ?? null,
  };
}

/** The stored provider headers for requests to the sandbox's serviceUrl ({} when none are needed). */
export function storedServiceHeaders(
  key: Buffer,
  sandbox: { serviceHeadersEnc: string | null },
): Record<string, string> {
  if (!sandbox.serviceHeadersEnc) return {};
  const parsed: unknown = JSON.parse(decrypt(key, sandbox.serviceHeadersEnc));
  if (!parsed || typeof parsed !== 'object') return {};
  return Object.fromEntries(
    Object.entries(parsed as Record<string, unknown>).filter(
      (entry): entry is [string, string] => typeof entry[1] === 'string',
    ),
  );
}

/**
 * Headers of one server→daemon request: the provider's access headers first, then the caller's
 * own (which win on a clash, so a provider header can never replace our user-context signature).
 */
export function daemonRequestHeaders(
  key: Buffer,
  sandbox: { serviceHeadersEnc: string | null },
  own: Record<string, string> = {},
): Record<string, string> {
  return { ...storedServiceHeaders(key, sandbox), ...own };
}
