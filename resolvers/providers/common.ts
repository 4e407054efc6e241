// What the cloud adapters share: the default entry process and service port of every sandbox, the
// keys that tag provider resources with our ids (so orphans can be found), and the error context
// each adapter hands to withProviderRetry.
import type { ProviderErrorContext } from './errors';
import type { CreateSandboxRequest, ProviderName, SandboxState, TaggedSandbox } from './types';

export const DEFAULT_ENTRY_COMMAND = '/usr/local/bin/singulacomp-entrypoint';
export const SERVICE_PORT = 8000;

/** Label keys carrying our ids on Daytona and Platinum resources. */
export const LABEL_SANDBOX_ID = 'singulacomp.sandbox-id';
export const LABEL_SESSION_ID = 'singulacomp.session-id';
export const LABEL_PROJECT_ID = 'singulacomp.project-id';
/** The installation (one database and its fleet) that created the resource; see installation.ts. */
export const LABEL_INSTALLATION_ID = 'singulacomp.installation-id';

/** The same ids as E2B sandbox metadata keys. */
export const METADATA_SANDBOX_ID = 'singulacomp.sandboxId';
export const METADATA_SESSION_ID = 'singulacomp.sessionId';
export const METADATA_PROJECT_ID = 'singulacomp.projectId';
export const METADATA_INSTALLATION_ID = 'singulacomp.installationId';

export interface IdTagKeys {
  sandboxId: string;
  sessionId: string;
  projectId: string;
  installationId: string;
}

export const LABEL_KEYS: IdTagKeys = {
  sandboxId: LABEL_SANDBOX_ID,
  sessionId: LABEL_SESSION_ID,
  projectId: LABEL_PROJECT_ID,
  installationId: LABEL_INSTALLATION_ID,
};

export const METADATA_KEYS: IdTagKeys = {
  sandboxId: METADATA_SANDBOX_ID,
  sessionId: METADATA_SESSION_ID,
  projectId: METADATA_PROJECT_ID,
  installationId: METADATA_INSTALLATION_ID,
};

/** The request's own labels plus our ids under `keys` (ours win on a clash). */
export function idTags(request: CreateSandboxRequest, keys: IdTagKeys): Record<string, string> {
  return {
    ...request.labels,
    [keys.sandboxId]: request.sandboxId,
    [keys.sessionId]: request.sessionId,
    [keys.projectId]: request.projectId,
    ...(request.installationId ? { [keys.installationId]: request.installationId } : {}),
  };
}

/**
 * A listed provider sandbox as ours, or null when its tags do not name `installationId` (a
 * provider that ignored the list filter must never hand us another installation's sandbox).
 */
export function taggedSandbox(
  providerSandboxId: string,
  state: SandboxState,
  tags: Record<string, string> | undefined,
  keys: IdTagKeys,
  installationId: string,
): TaggedSandbox | null {
  if (!installationId || tags?.[keys.installationId] !== installationId) return null;
  return {
    providerSandboxId,
    state,
    sandboxId: tags[keys.sandboxId] ?? null,
    sessionId: tags[keys.sessionId] ?? null,
  };
}

/** Error context of one adapter operation; `apiKeyEnvVar` only when configured. */
export function errorContext(
  provider: ProviderName,
  operation: string,
  apiKeyEnvVar: string | undefined,
): ProviderErrorContext {
  return { provider, operation, ...(apiKeyEnvVar ? { apiKeyEnvVar } : {}) };
}
