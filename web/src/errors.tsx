// Every API failure shown with its message and code: payload errors (the `Error` interface of a
// mutation's union), GraphQL errors (extensions.code), and the network's.
import type { CombinedError } from '@urql/core';

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

/** A mutation payload that is not its success type, as a problem. */
export function problemFromPayload(payload: { __typename: string; code?: string; message?: string }) {
  return { message: payload.message ?? payload.__typename, code: payload.code ?? payload.__typename };
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
