// Every API failure shown with its message and code: payload errors (the `Error` interface of a
// mutation's union), GraphQL errors (extensions.code), and the network's.
import type { CombinedError, OperationResult } from '@urql/core';
import { useCallback, useState } from 'react';

export interface ApiProblem {
  message: string;
  code: string;
  /** Seconds from the Retry-After header (429 CONCURRENT_SESSION_LIMIT). */
  retryAfterSeconds?: number;
}

export function problemFromError(error: CombinedError): ApiProblem {
  const first = error.graphQLErrors[0];
  const response = error.response as Response | undefined;
  const retryAfter = Number(response?.headers?.get?.('retry-after') ?? Number.NaN);
  if (first) {
    return {
      message: first.message,
      code: typeof first.extensions?.code === 'string' ? first.extensions.code : 'GRAPHQL_ERROR',
      ...(Number.isFinite(retryAfter) ? { retryAfterSeconds: retryAfter } : {}),
    };
  }
  return { message: error.networkError?.message ?? error.message, code: 'NETWORK_ERROR' };
}

/** A mutation payload: its success type, or one of its errors (with code and message). */
type Payload = { __typename: string; code?: string; message?: string };

/** A mutation payload that is not its success type, as a problem. */
export function problemFromPayload(payload: Payload) {
  return { message: payload.message ?? payload.__typename, code: payload.code ?? payload.__typename };
}

/**
 * The problem of a form's mutations, and `settle`, which clears it, awaits a mutation and returns its
 * payload when that is of the `success` type; otherwise it records the failure (network, GraphQL or
 * payload error) as the problem and returns null.
 */
export function useMutationProblem() {
  const [problem, setProblem] = useState<ApiProblem | null>(null);
  const settle = useCallback(
    async <Data, P extends Payload, S extends P['__typename']>(
      pending: Promise<OperationResult<Data>>,
      payloadOf: (data: Data) => P | null | undefined,
      success: S,
    ): Promise<Extract<P, { __typename: S }> | null> => {
      setProblem(null);
      const result = await pending;
      if (result.error) {
        setProblem(problemFromError(result.error));
        return null;
      }
      const payload = result.data ? payloadOf(result.data) : null;
      if (payload?.__typename === success) return payload as Extract<P, { __typename: S }>;
      if (payload) setProblem(problemFromPayload(payload));
      return null;
    },
    [],
  );
  return { problem, settle };
}

export function Problem({ problem, now = Date.now() }: { problem: ApiProblem | null; now?: number }) {
  if (!problem) return null;
  const retryAt =
    problem.retryAfterSeconds === undefined
      ? null
      : new Date(now + problem.retryAfterSeconds * 1000).toLocaleTimeString();
  return (
    <div role="alert" className="problem" data-code={problem.code}>
      <strong>{problem.code}</strong>: {problem.message}
      {retryAt && (
        <span className="retry">
          {' '}
          Retry after {problem.retryAfterSeconds} s (at {retryAt}).
        </span>
      )}
    </div>
  );
}
