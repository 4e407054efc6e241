// Platinum adapter: plain fetch against the contract in docs/providers/platinum.md. The daemon is
// the sandbox's `entrypoint`, which Platinum runs on every boot, so start needs no relaunch; create
// carries our sandbox id as its Idempotency-Key, so retrying it never duplicates a sandbox.
import {
  DEFAULT_ENTRY_COMMAND,
  errorContext,
  idTags,
  LABEL_INSTALLATION_ID,
  LABEL_KEYS,
  LABEL_SANDBOX_ID,
  SERVICE_PORT,
  taggedSandbox,
} from './common';
import {
  ProviderHttpError,
  ProviderNotFoundError,
  ProviderSnapshotUnusableError,
  type ProviderErrorContext,
  ProviderValidationError,
  type RetryOptions,
  withProviderRetry,
} from './errors';
import { fitSpecToProvider } from './limits';
import type {
  CreateSandboxRequest,
  HardwareSpec,
  ProviderSandbox,
  SandboxProvider,
  SandboxState,
  SnapshotBuildRequest,
  TaggedSandbox,
} from './types';

export {
  DEFAULT_ENTRY_COMMAND,
  LABEL_PROJECT_ID,
  LABEL_SANDBOX_ID,
  LABEL_SESSION_ID,
  SERVICE_PORT,
} from './common';

/** Platinum's documented per-sandbox limits (docs/providers/platinum.md, R-SBX-4). */
export const PLATINUM_CAPS: HardwareSpec = { cpu: 32, memoryGiB: 64, diskGiB: 200 };

export type PlatinumState =
  | 'provisioning'
  | 'starting'
  | 'running'
  | 'stopping'
  | 'stopped'
  | 'hibernated'
  | 'deleting'
  | 'deleted'
  | 'failed';

/** Every Platinum state onto ours (R-SBX-1). */
export const PLATINUM_STATE_MAP: Record<PlatinumState, SandboxState> = {
  provisioning: 'CREATING',
  starting: 'STARTING',
  running: 'STARTED',
  stopping: 'STOPPING',
  stopped: 'STOPPED',
  hibernated: 'HIBERNATED',
  deleting: 'DESTROYED',
  deleted: 'DESTROYED',
  failed: 'ERROR',
};

export function mapPlatinumState(state: string | undefined): SandboxState {
  return (state && PLATINUM_STATE_MAP[state as PlatinumState]) || 'ERROR';
}

interface PlatinumSandbox {
  id: string;
  state: string;
  labels?: Record<string, string>;
  serviceUrl: string | null;
  errorReason?: string | null;
}

export interface PlatinumProviderOptions {
  apiKey: string;
  /** API base without `/v1`. */
  apiUrl: string;
  /** Long-lived entry process, run by Platinum on every boot. @default '/usr/local/bin/singulacomp-entrypoint' */
  entryCommand?: string;
  /** Daemon port inside the sandbox. @default 8000 */
  servicePort?: number;
  /** Platinum's idle timer; keepAlive resets it. @default 1_800 */
  idleTimeoutSeconds?: number;
  /** Per-request deadline. @default 30_000 */
  requestTimeoutMs?: number;
  /** Interval between state polls. @default 500 */
  pollIntervalMs?: number;
  /** Longest wait for a state to settle. @default 120_000 */
  operationTimeoutMs?: number;
  /** Name of the env var holding the key, for auth error messages. @default 'PLATINUM_API_KEY' */
  apiKeyEnvVar?: string;
  retry?: RetryOptions;
  fetch?: typeof fetch;
}

export class PlatinumProvider implements SandboxProvider {
  readonly name = 'PLATINUM' as const;
  readonly caps: Partial<HardwareSpec> = PLATINUM_CAPS;
  private readonly base: string;
  private readonly fetch: typeof fetch;

  constructor(private readonly options: PlatinumProviderOptions) {
    this.base = `${options.apiUrl.replace(/\/+$/, '')}/v1`;
    this.fetch = options.fetch ?? fetch;
  }

  private context(operation: string): ProviderErrorContext {
    return errorContext(this.name, operation, this.options.apiKeyEnvVar);
  }

  /** One HTTP call; non-2xx become ProviderHttpError for the mapping table. */
  private async call<T>(method: string, path: string, body?: unknown, headers: Record<string, string> = {}) {
    const response = await this.fetch(`${this.base}${path}`, {
      method,
      headers: {
        authorization: `Bearer ${this.options.apiKey}`,
        ...(body === undefined ? {} : { 'content-type': 'application/json' }),
        ...headers,
      },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      signal: AbortSignal.timeout(this.options.requestTimeoutMs ?? 30_000),
    });
    const text = await response.text();
    if (!response.ok) {
      let message = text || response.statusText;
      try {
        message = (JSON.parse(text) as { error?: { message?: string } }).error?.message ?? message;
      } catch {
        // Not JSON: keep the raw text.
      }
      throw new ProviderHttpError(response.status, message, response.headers.get('retry-after'));
    }
    return (text ? JSON.parse(text) : undefined) as T;
  }

  private request<T>(
    operation: string,
    method: string,
    path: string,
    body?: unknown,
    headers?: Record<string, string>,
  ): Promise<T> {
    return withProviderRetry(
      () => this.call<T>(method, path, body, headers),
      this.context(operation),
      this.options.retry,
    );
  }

  /** Polls until the sandbox leaves the transitional states given. */
  private async settle(id: string, transitional: string[], operation: string): Promise<PlatinumSandbox> {
    const deadline = Date.now() + (this.options.operationTimeoutMs ?? 120_000);
    for (;;) {
      const sandbox = await this.request<PlatinumSandbox>(operation, 'GET', `/sandboxes/${id}`);
      if (!transitional.includes(sandbox.state)) return sandbox;
      if (Date.now() > deadline) {
        throw new Error(`Platinum sandbox ${id} still ${sandbox.state} after the ${operation} deadline`);
      }
      await new Promise((resolve) => setTimeout(resolve, this.options.pollIntervalMs ?? 500));
    }
  }

  private expectRunning(sandbox: PlatinumSandbox, operation: string): ProviderSandbox {
    if (sandbox.state !== 'running') {
      throw new Error(
        `Platinum sandbox ${sandbox.id} ended ${sandbox.state} during ${operation}: ${sandbox.errorReason ?? 'no reason given'}`,
      );
    }
    return { providerSandboxId: sandbox.id, state: 'STARTED', serviceUrl: sandbox.serviceUrl };
  }

  async create(request: CreateSandboxRequest): Promise<ProviderSandbox> {
    const body = {
      image: request.snapshotRef,
      // Fitted here too: a caller that skipped provisioning's clamp must not get a 400.
      ...fitSpecToProvider(this, request.spec).spec,
      env: request.env,
      labels: idTags(request, LABEL_KEYS),
      entrypoint: ['/bin/sh', '-c', this.options.entryCommand ?? DEFAULT_ENTRY_COMMAND],
      servicePort: this.options.servicePort ?? SERVICE_PORT,
      idleTimeoutSeconds: this.options.idleTimeoutSeconds ?? 1_800,
    };
    let id: string | null = null;
    try {
      const created = await this.request<PlatinumSandbox>('create', 'POST', '/sandboxes', body, {
        'idempotency-key': request.sandboxId,
      }).catch((error: unknown) => {
        // 404 for an unknown image: the stored snapshot cannot boot, provisioning rebuilds it.
        if (request.snapshotRef && error instanceof ProviderNotFoundError) {
          throw new ProviderSnapshotUnusableError(
            errorContext(this.name, 'create', this.options.apiKeyEnvVar),
            request.snapshotRef,
            'missing',
            'Platinum does not know the image',
            { cause: error },
          );
        }
        throw error;
      });
      id = created.id;
      const settled = await this.settle(created.id, ['provisioning', 'starting'], 'create');
      return this.expectRunning(settled, 'create');
    } catch (error) {
      await this.removeTagged(request.sandboxId, id);
      throw error;
    }
  }

  /** Deletes the half-created sandbox (by id, or by our label when the create reply was lost). */
  private async removeTagged(sandboxId: string, id: string | null): Promise<void> {
    try {
      const ids = id
        ? [id]
        : (
            await this.call<{ items: PlatinumSandbox[] }>(
              'GET',
              `/sandboxes?label=${encodeURIComponent(`${LABEL_SANDBOX_ID}=${sandboxId}`)}`,
            )
          ).items.map((s) => s.id);
      for (const each of ids) await this.destroy(each);
    } catch {
      // Still failing: the label lets a later sweep find it.
    }
  }

  async start(providerSandboxId: string): Promise<ProviderSandbox> {
    await this.request('start', 'POST', `/sandboxes/${providerSandboxId}/start`);
    const settled = await this.settle(providerSandboxId, ['starting', 'provisioning'], 'start');
    return this.expectRunning(settled, 'start');
  }

  async stop(providerSandboxId: string): Promise<ProviderSandbox> {
    await this.request('stop', 'POST', `/sandboxes/${providerSandboxId}/stop`);
    const settled = await this.settle(providerSandboxId, ['stopping'], 'stop');
    return { providerSandboxId, state: mapPlatinumState(settled.state), serviceUrl: null };
  }

  /** Deletes and waits until Platinum answers 404, so the sandbox has really stopped billing. */
  async destroy(providerSandboxId: string): Promise<void> {
    try {
      await this.request('destroy', 'DELETE', `/sandboxes/${providerSandboxId}`);
      await this.settle(providerSandboxId, ['deleting', 'stopping'], 'destroy');
    } catch (error) {
      if (!(error instanceof ProviderNotFoundError)) throw error;
    }
  }

  async keepAlive(providerSandboxId: string): Promise<void> {
    await this.request('keepAlive', 'POST', `/sandboxes/${providerSandboxId}/keepalive`);
  }

  async status(providerSandboxId: string): Promise<SandboxState> {
    try {
      const sandbox = await this.request<PlatinumSandbox>('status', 'GET', `/sandboxes/${providerSandboxId}`);
      return mapPlatinumState(sandbox.state);
    } catch (error) {
      if (error instanceof ProviderNotFoundError) return 'DESTROYED';
      throw error;
    }
  }

  /** `GET /v1/sandboxes?label=<key>=<value>`. */
  async listTagged(installationId: string): Promise<TaggedSandbox[]> {
    const { items } = await this.request<{ items: PlatinumSandbox[] }>(
      'list',
      'GET',
      `/sandboxes?label=${encodeURIComponent(`${LABEL_INSTALLATION_ID}=${installationId}`)}`,
    );
    return items.flatMap((s) => {
      const tagged = taggedSandbox(s.id, mapPlatinumState(s.state), s.labels, LABEL_KEYS, installationId);
      return tagged ? [tagged] : [];
    });
  }

  async previewHost(providerSandboxId: string, port: number): Promise<string> {
    const reply = await this.request<{ host: string }>(
      'previewHost',
      'GET',
      `/sandboxes/${providerSandboxId}/ports/${port}`,
    );
    return reply.host;
  }

  /** Builds (or reuses) an image named after the content key. */
  async buildSnapshot(request: SnapshotBuildRequest): Promise<string> {
    const name = `singulacomp-${request.key}`;
    try {
      await this.request('buildSnapshot', 'POST', '/images', {
        name,
        dockerfile: request.dockerfile,
        ...fitSpecToProvider(this, request.spec).spec,
      });
    } catch (error) {
      // 409: the name exists; its state below tells whether it is usable.
      const conflict =
        error instanceof ProviderValidationError &&
        error.cause instanceof ProviderHttpError &&
        error.cause.status === 409;
      if (!conflict) throw error;
    }
    const deadline = Date.now() + (this.options.operationTimeoutMs ?? 120_000) * 10;
    for (;;) {
      const image = await this.request<{ state: string; errorReason: string | null }>(
        'buildSnapshot',
        'GET',
        `/images/${name}`,
      );
      if (image.state === 'ready') return name;
      if (image.state === 'failed') throw new Error(`Platinum image ${name} failed: ${image.errorReason}`);
      if (Date.now() > deadline) throw new Error(`Platinum image ${name} still ${image.state}`);
      await new Promise((resolve) => setTimeout(resolve, this.options.pollIntervalMs ?? 500));
    }
  }
}
