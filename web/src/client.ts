// One urql client per signed-in token: queries and mutations over HTTP POST, subscriptions over
// graphql-ws on the same /graphql path (the server refuses subscriptions over HTTP).
import { Client, fetchExchange, subscriptionExchange } from '@urql/core';
import { createClient as createWsClient } from 'graphql-ws';

const TOKEN_KEY = 'singulacomp.token';

export function storedToken(): string | null {
  return sessionStorage.getItem(TOKEN_KEY);
}

export function storeToken(token: string | null): void {
  if (token) sessionStorage.setItem(TOKEN_KEY, token);
  else sessionStorage.removeItem(TOKEN_KEY);
}

export interface ApiClient {
  urql: Client;
  /** Called on every (re)connection of the WebSocket, so views can refetch what they may have missed. */
  onConnected(listener: () => void): () => void;
  dispose(): void;
}

export function createApiClient(token: string): ApiClient {
  const listeners = new Set<() => void>();
  const wsUrl = `${location.protocol === 'https:' ? 'wss:' : 'ws:'}//${location.host}/graphql`;
  const ws = createWsClient({
    url: wsUrl,
    connectionParams: { authorization: `Bearer ${token}` },
    // Reconnect with backoff (graphql-ws's default) after a network drop or a server restart.
    retryAttempts: Number.POSITIVE_INFINITY,
    shouldRetry: () => true,
    on: {
      connected: () => {
        for (const listener of listeners) listener();
      },
    },
  });
  const urql = new Client({
    url: '/graphql',
    // POST only: the server's CSRF prevention refuses a GET without a preflight header.
    preferGetMethod: false,
    requestPolicy: 'cache-and-network',
    fetchOptions: () => ({ headers: { authorization: `Bearer ${token}` } }),
    exchanges: [
      fetchExchange,
      subscriptionExchange({
        forwardSubscription: (request) => ({
          subscribe: (sink) => ({
            unsubscribe: ws.subscribe({ ...request, query: request.query ?? '' }, sink),
          }),
        }),
      }),
    ],
  });
  return {
    urql,
    onConnected(listener) {
      listeners.add(listener);
      return () => listeners.delete(listener);
    },
    dispose() {
      void ws.dispose();
    },
  };
}
