// One urql client per signed-in token: queries and mutations over HTTP POST, subscriptions over
// graphql-ws on the same /graphql path (the server refuses subscriptions over HTTP). The tab keeps
// one token per signed-in account in session storage (a PAT belongs to one account): the active one
// under singulacomp.token, all of them under singulacomp.accounts.
import { Client, fetchExchange, subscriptionExchange } from '@urql/core';
import { createClient as createWsClient } from 'graphql-ws';

const TOKEN_KEY = 'singulacomp.token';
const ACCOUNTS_KEY = 'singulacomp.accounts';

export interface SignedInAccount {
  /** The account's global id. */
  accountId: string;
  name: string;
  tier: string;
  token: string;
}

export function storedAccounts(): SignedInAccount[] {
  try {
    const parsed: unknown = JSON.parse(sessionStorage.getItem(ACCOUNTS_KEY) ?? '[]');
    return Array.isArray(parsed)
      ? parsed.filter(
          (a): a is SignedInAccount =>
            typeof a?.accountId === 'string' && typeof a?.token === 'string' && typeof a?.name === 'string',
        )
      : [];
  } catch {
    return [];
  }
}

/** Adds the account, or replaces its token: a second token of the same account is not a second entry. */
export function rememberAccount(account: SignedInAccount): SignedInAccount[] {
  const all = storedAccounts();
  const index = all.findIndex((a) => a.accountId === account.accountId);
  if (index === -1) all.push(account);
  else all[index] = account;
  sessionStorage.setItem(ACCOUNTS_KEY, JSON.stringify(all));
  return all;
}

export function forgetAccount(token: string): SignedInAccount[] {
  const all = storedAccounts().filter((a) => a.token !== token);
  sessionStorage.setItem(ACCOUNTS_KEY, JSON.stringify(all));
  return all;
}

export function storedToken(): string | null {
  return sessionStorage.getItem(TOKEN_KEY);
}

export function storeToken(token: string | null): void {
  if (token) sessionStorage.setItem(TOKEN_KEY, token);
  else sessionStorage.removeItem(TOKEN_KEY);
}

export interface ApiClient {
  urql: Client;
  /** For what GraphQL does not carry: the agent route's HTTP calls and WebSockets (the terminal). */
  token: string;
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
    token,
    onConnected(listener) {
      listeners.add(listener);
      return () => listeners.delete(listener);
    },
    dispose() {
      void ws.dispose();
    },
  };
}
