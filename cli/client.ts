// GraphQL over HTTP and graphql-ws for the CLI, with the typed documents from contract/generated.
import type { TypedDocumentNode } from '@graphql-typed-document-node/core';
import { print } from 'graphql';
import { createClient } from 'graphql-ws';
import WebSocket from 'ws';
import type { ResolvedConfig } from './config';

/** A failure the API reported: a top-level GraphQL error (with its code) or a payload Error. */
export class ApiError extends Error {
  override name = 'ApiError';
  constructor(
    message: string,
    readonly code: string | null,
  ) {
    super(code ? `${code}: ${message}` : message);
  }
}

export interface ApiClient {
  request<T, V>(doc: TypedDocumentNode<T, V>, variables: V): Promise<T>;
  /**
   * Calls `onNext` per event until it returns true (done) or the server completes the stream.
   * `onConnected` runs once the socket is up and the subscription sent (a failure ends it).
   */
  subscribe<T, V>(
    doc: TypedDocumentNode<T, V>,
    variables: V,
    onNext: (data: T) => boolean,
    onConnected?: () => Promise<void>,
  ): Promise<void>;
}

export function createApiClient(config: ResolvedConfig): ApiClient {
  return {
    async request(doc, variables) {
      let response: Response;
      try {
        response = await fetch(`${config.apiUrl}/graphql`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', authorization: `Bearer ${config.token}` },
          body: JSON.stringify({ query: print(doc), variables }),
        });
      } catch (error) {
        const cause = (error as { cause?: { code?: string } }).cause?.code;
        throw new ApiError(`cannot reach ${config.apiUrl} (${cause ?? (error as Error).message})`, null);
      }
      const body = (await response.json().catch(() => null)) as {
        data?: unknown;
        errors?: Array<{ message: string; extensions?: { code?: string } }>;
      } | null;
      const first = body?.errors?.[0];
      if (first) throw new ApiError(first.message, first.extensions?.code ?? null);
      if (!body?.data) throw new ApiError(`unexpected answer (HTTP ${response.status})`, null);
      return body.data as never;
    },

    subscribe(doc, variables, onNext, onConnected) {
      let connected: (() => void) | null = null;
      const client = createClient({
        url: `${config.apiUrl.replace(/^http/, 'ws')}/graphql`,
        webSocketImpl: WebSocket,
        connectionParams: { authorization: `Bearer ${config.token}` },
        retryAttempts: 3,
        on: { connected: () => connected?.() },
      });
      return new Promise<void>((resolve, reject) => {
        let unsubscribe = () => {};
        let done = false;
        const finish = (error?: unknown) => {
          if (done) return;
          done = true;
          unsubscribe();
          void client.dispose();
          if (error) reject(error);
          else resolve();
        };
        if (onConnected) {
          connected = () => {
            connected = null;
            // After this turn, once the subscribe message is on its way.
            setImmediate(() => onConnected().catch(finish));
          };
        }
        unsubscribe = client.subscribe(
          { query: print(doc), variables: variables as Record<string, unknown> },
          {
            next: (value) => {
              const first = value.errors?.[0];
              if (first) {
                finish(new ApiError(first.message, (first.extensions?.code as string | undefined) ?? null));
                return;
              }
              if (value.data && onNext(value.data as never)) finish();
            },
            error: (error) =>
              finish(
                error instanceof Error
                  ? error
                  : new ApiError(
                      Array.isArray(error)
                        ? ((error[0] as { message?: string })?.message ?? 'subscription failed')
                        : `connection closed (${(error as { code?: number }).code ?? 'unknown'})`,
                      null,
                    ),
              ),
            complete: () => finish(),
          },
        );
      });
    },
  };
}

/** Unwraps a mutation payload union: the success member, or an ApiError for an `Error` member. */
export function unwrap<T extends { __typename: string }, S extends string>(
  payload: T,
  success: S,
): Extract<T, { __typename: S }> {
  if (payload.__typename === success) return payload as Extract<T, { __typename: S }>;
  const error = payload as unknown as { code?: string; message?: string };
  throw new ApiError(error.message ?? payload.__typename, error.code ?? payload.__typename);
}
