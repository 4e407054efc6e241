// Request-level rules of the GraphQL endpoint that no schema field can enforce: who may introspect,
// and which transport may carry a subscription.
import { getOperationAST, parse, visit } from 'graphql';
import { type Plugin, createGraphQLError } from 'graphql-yoga';
import type { Context } from '../schema/builder';

/**
 * Introspection for anonymous callers only where the instance allows it (off in production by
 * default): the schema is no secret, but it maps the attack surface for whoever has no token.
 */
export function useIntrospectionGate(mode: 'all' | 'authenticated'): Plugin<Context> {
  return {
    onExecute({ args }) {
      if (mode === 'all' || (args.contextValue as Context).principal) return;
      let introspects = false;
      visit(args.document, {
        Field(node) {
          if (node.name.value === '__schema' || node.name.value === '__type') introspects = true;
        },
      });
      if (introspects) {
        throw createGraphQLError('Introspection needs a token on this instance.', {
          extensions: { code: 'UNAUTHENTICATED', http: { status: 401 } },
        });
      }
    },
  };
}

/**
 * Subscriptions are served over graphql-ws only. That transport tracks every connection for token
 * revocation, expiry and the per-token limit (server/realtime.ts); yoga's SSE transport would
 * bypass all three, so HTTP requests carrying a subscription are refused before execution.
 */
export function useWebSocketOnlySubscriptions(): Plugin {
  // The operation type of each recent (document, operationName): clients send the same few
  // documents over and over, and parsing one again per request is most of this guard's cost.
  const operations = new Map<string, string | undefined>();
  return {
    onParams({ params }) {
      if (typeof params.query !== 'string') return;
      const key = `${params.operationName ?? ''}\u0000${params.query}`;
      let operation = operations.get(key);
      if (operation === undefined && !operations.has(key)) {
        try {
          operation = getOperationAST(
            parse(params.query, { maxTokens: 4_000 }),
            params.operationName,
          )?.operation;
        } catch {
          return; // yoga reports the syntax error itself
        }
        if (operations.size >= 1_000) operations.delete(operations.keys().next().value as string);
        operations.set(key, operation);
      }
      if (operation === 'subscription') {
        throw createGraphQLError(
          'Subscriptions are served over WebSocket only (graphql-ws on /graphql, token in connection_init).',
          { extensions: { code: 'SUBSCRIPTIONS_OVER_WEBSOCKET_ONLY', http: { status: 400 } } },
        );
      }
    },
  };
}
