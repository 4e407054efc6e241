// GraphQL client for the sandbox-token mutations of docs/agent-api.md.
import {
  ClaimBootstrapDocument,
  type ReloadPhaseName,
  type ReloadPhaseStatus,
  ReleaseLeaseDocument,
  RenewLeaseDocument,
  ReportAgentEventsDocument,
  ReportReloadPhaseDocument,
  ReportRuntimeStateDocument,
  ReportSandboxPortsDocument,
  type ReportTelemetryInput,
  ReportTelemetryDocument,
  type RuntimeState,
  type TelemetryReason,
  type TypedDocumentString,
} from '../contract/daemon-api';
import { retry } from '../contract/retry';
import { type HttpRequester, type HttpResponse, request } from './http';
import type { Logger } from './logger';

export type { ReloadPhaseName, ReloadPhaseStatus, RuntimeState, TelemetryReason };
/** What the daemon reports every interval and on state changes (R-AG-4). */
export type TelemetryInput = ReportTelemetryInput;

export interface Bootstrap {
  sessionId: string;
  sandboxId: string;
  prompt: string | null;
  turnLedgerId: string | null;
  agent: string | null;
  alreadyClaimed: boolean;
}

export interface LeaseInfo {
  generation: number;
  expiresAt?: string | null;
  releasedAt?: string | null;
}

/** Thrown when a mutation answers with one of its `Error` payload types (e.g. `LEASE_FENCED`). */
export class ApiPayloadError extends Error {
  override readonly name = 'ApiPayloadError';
  constructor(
    readonly operation: string,
    readonly code: string,
    message: string,
    readonly typename?: string,
  ) {
    super(`${operation}: ${code}: ${message}`);
  }
}

/** Thrown when the API answers with top-level GraphQL errors (auth, validation) or a 4xx. */
export class ApiRequestError extends Error {
  override readonly name = 'ApiRequestError';
  constructor(
    readonly operation: string,
    message: string,
    readonly status?: number,
    readonly code?: string,
  ) {
    super(`${operation}: ${message}`);
  }
}

export interface ApiClientOptions {
  apiUrl: string;
  token: string;
  logger: Logger;
  /** Attempts for network errors and 5xx before giving up. @default 5 */
  maxAttempts?: number;
  /** @default { initialMs: 200, maxMs: 5_000 } */
  backoff?: { initialMs?: number; maxMs?: number };
  /** Per-request timeout. @default 15_000 */
  requestTimeoutMs?: number;
  /** @default node:http (./http) */
  request?: HttpRequester;
}

const DOCUMENTS = {
  claimBootstrap: ClaimBootstrapDocument,
  renewLease: RenewLeaseDocument,
  releaseLease: ReleaseLeaseDocument,
  reportTelemetry: ReportTelemetryDocument,
  reportRuntimeState: ReportRuntimeStateDocument,
  reportReloadPhase: ReportReloadPhaseDocument,
  reportAgentEvents: ReportAgentEventsDocument,
  reportSandboxPorts: ReportSandboxPortsDocument,
} as const;

type Operation = keyof typeof DOCUMENTS;
/** The variables a document declares, as codegen typed them from schema.graphql. */
type VariablesOf<O extends Operation> =
  (typeof DOCUMENTS)[O] extends TypedDocumentString<unknown, infer V> ? V : never;

class RetryableError extends Error {}

export class ApiClient {
  private readonly endpoint: string;
  private readonly maxAttempts: number;
  private readonly requestTimeoutMs: number;
  private readonly request: HttpRequester;
  private readonly log: Logger;
  /** When the API last answered anything (performance.now()); the daemon's start counts as one. */
  lastContactAt = performance.now();

  constructor(private readonly options: ApiClientOptions) {
    this.endpoint = `${options.apiUrl.replace(/\/+$/, '')}/graphql`;
    this.maxAttempts = options.maxAttempts ?? 5;
    this.requestTimeoutMs = options.requestTimeoutMs ?? 15_000;
    this.request = options.request ?? request;
    this.log = options.logger.child({ module: 'api-client' });
  }

  async claimBootstrap(): Promise<Bootstrap> {
    const payload = await this.mutate('claimBootstrap', {});
    return {
      sessionId: String(payload.sessionId),
      sandboxId: String(payload.sandboxId),
      prompt: (payload.prompt as string | null | undefined) ?? null,
      turnLedgerId: (payload.turnLedgerId as string | null | undefined) ?? null,
      agent: (payload.agent as string | null | undefined) ?? null,
      alreadyClaimed: payload.alreadyClaimed === true,
    };
  }

  async renewLease(input: {
    sessionId: string;
    generation?: number;
    acquisition?: string;
  }): Promise<LeaseInfo> {
    const payload = await this.mutate('renewLease', { input });
    return payload.lease as LeaseInfo;
  }

  async releaseLease(input: { sessionId: string; generation: number }): Promise<LeaseInfo> {
    const payload = await this.mutate('releaseLease', { input });
    return payload.lease as LeaseInfo;
  }

  async reportTelemetry(input: TelemetryInput): Promise<void> {
    await this.mutate('reportTelemetry', { input });
  }

  async reportRuntimeState(input: {
    sessionId: string;
    state: RuntimeState;
    message?: string;
  }): Promise<void> {
    await this.mutate('reportRuntimeState', { input });
  }

  async reportReloadPhase(input: {
    reloadId: string;
    phase: ReloadPhaseName;
    status: ReloadPhaseStatus;
    message?: string;
  }): Promise<void> {
    await this.mutate('reportReloadPhase', { input });
  }

  /** Forwards OpenCode events (each JSON-encoded) in order; resolves once the API logged them. */
  async reportAgentEvents(input: { sessionId: string; events: string[] }): Promise<void> {
    await this.mutate('reportAgentEvents', { input });
  }

  /** Asks the API's /healthz once; any answer counts as contact. Never throws. */
  async ping(): Promise<void> {
    try {
      const response = await this.request(this.endpoint.replace(/\/graphql$/, '/healthz'), {
        signal: AbortSignal.timeout(this.requestTimeoutMs),
      });
      this.lastContactAt = performance.now();
      await response.text().catch(() => '');
    } catch {
      // unreachable: lastContactAt stays where it was
    }
  }

  /** The sandbox's listening ports (the full set) when they changed. */
  async reportSandboxPorts(input: { sandboxId: string; ports: number[] }): Promise<void> {
    await this.mutate('reportSandboxPorts', { input });
  }

  /** Runs one mutation; returns its Success payload or throws ApiPayloadError / ApiRequestError. */
  private async mutate<O extends Operation>(
    operation: O,
    variables: VariablesOf<O>,
  ): Promise<Record<string, unknown>> {
    return retry(
      async () => {
        const data = await this.post(operation, variables);
        const payload = data[operation] as Record<string, unknown> | null | undefined;
        if (!payload) throw new ApiRequestError(operation, 'empty payload');
        if (typeof payload.code === 'string' && !String(payload.__typename ?? '').endsWith('Success')) {
          throw new ApiPayloadError(
            operation,
            payload.code,
            String(payload.message ?? ''),
            payload.__typename as string | undefined,
          );
        }
        return payload;
      },
      {
        maxAttempts: this.maxAttempts,
        backoff: {
          initialMs: this.options.backoff?.initialMs ?? 200,
          maxMs: this.options.backoff?.maxMs ?? 5_000,
        },
        retryable: (error) => error instanceof RetryableError,
        exhausted: (error) => new ApiRequestError(operation, (error as Error).message),
        onRetry: ({ attempt, delayMs, error }) =>
          this.log.warn(
            { operation, attempt, delayMs, err: (error as Error).message },
            'api call failed; retrying',
          ),
      },
    );
  }

  private async post(operation: Operation, variables: unknown): Promise<Record<string, unknown>> {
    let response: HttpResponse;
    try {
      response = await this.request(this.endpoint, {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          accept: 'application/graphql-response+json, application/json',
          authorization: `Bearer ${this.options.token}`,
        },
        body: JSON.stringify({ query: DOCUMENTS[operation].toString(), variables }),
        signal: AbortSignal.timeout(this.requestTimeoutMs),
      });
    } catch (error) {
      throw new RetryableError(error instanceof Error ? error.message : String(error));
    }
    this.lastContactAt = performance.now();
    const text = await response.text().catch(() => '');
    if (response.status >= 500 || response.status === 429) {
      throw new RetryableError(`HTTP ${response.status}: ${text.slice(0, 200)}`);
    }
    let body: {
      data?: Record<string, unknown> | null;
      errors?: Array<{ message: string; extensions?: { code?: string } }>;
    };
    try {
      body = JSON.parse(text);
    } catch {
      throw new ApiRequestError(operation, `HTTP ${response.status}: not JSON`, response.status);
    }
    if (body.errors?.length) {
      const first = body.errors[0]!;
      throw new ApiRequestError(operation, first.message, response.status, first.extensions?.code);
    }
    if (!response.ok || !body.data) {
      throw new ApiRequestError(operation, `HTTP ${response.status}`, response.status);
    }
    return body.data;
  }
}
