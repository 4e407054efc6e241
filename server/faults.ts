// How a request answers when a dependency fails: PostgreSQL or Redis unreachable is a retryable
// SERVICE_UNAVAILABLE (HTTP 503 + Retry-After); anything else unexpected is masked by yoga and
// logged exactly once here with the request id the client also receives.
import { randomUUID } from 'node:crypto';
import { GraphQLError } from 'graphql';
import { maskError } from 'graphql-yoga';
import { isUnavailable } from '../resolvers/unavailable';
import { currentRequestId, type Logger, withRequestId } from './logger';

export { currentRequestId, withRequestId };

const REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/;

/** The caller's X-Request-Id when it is sane, else a fresh one. */
export function requestIdFrom(header: string | string[] | undefined): string {
  const value = Array.isArray(header) ? header[0] : header;
  return value && REQUEST_ID.test(value) ? value : randomUUID();
}

export function serviceUnavailableError(retryAfterSeconds: number, requestId: string | null): GraphQLError {
  return new GraphQLError(
    'The service is temporarily unavailable (a dependency is not answering); retry shortly.',
    {
      extensions: {
        code: 'SERVICE_UNAVAILABLE',
        ...(requestId ? { requestId } : {}),
        http: { status: 503, headers: { 'Retry-After': String(retryAfterSeconds) } },
      },
    },
  );
}

export interface ErrorMaskerOptions {
  logger: Logger;
  retryAfterSeconds: number;
  /** Counts SERVICE_UNAVAILABLE answers and masked unexpected errors (metrics). */
  onFault?: (kind: 'unavailable' | 'unexpected') => void;
}

/** The message every masked (unexpected) error carries, over HTTP and WebSocket alike. */
export const UNEXPECTED_ERROR_MESSAGE = 'Unexpected error.';

/** yoga's maskError: unavailable → SERVICE_UNAVAILABLE; unexpected → masked, logged once with the request id. */
export function createErrorMasker(options: ErrorMaskerOptions) {
  const log = options.logger.child({ module: 'errors' });
  return (error: unknown, message: string, isDev?: boolean): Error => {
    const requestId = currentRequestId();
    const original = error instanceof GraphQLError && error.originalError ? error.originalError : error;
    if (!(original instanceof GraphQLError) && isUnavailable(original)) {
      options.onFault?.('unavailable');
      log.warn({ requestId, err: original }, 'dependency unavailable');
      const unavailable = serviceUnavailableError(options.retryAfterSeconds, requestId);
      return error instanceof GraphQLError
        ? new GraphQLError(unavailable.message, { path: error.path, extensions: unavailable.extensions })
        : unavailable;
    }
    const masked = maskError(error, message, isDev);
    if (masked === error) return masked;
    options.onFault?.('unexpected');
    log.error(
      { requestId, err: original, path: error instanceof GraphQLError ? error.path : undefined },
      'unexpected error',
    );
    if (!(masked instanceof GraphQLError) || !requestId) return masked;
    return new GraphQLError(masked.message, {
      nodes: masked.nodes,
      source: masked.source,
      positions: masked.positions,
      path: masked.path,
      extensions: { ...masked.extensions, requestId },
    });
  };
}
