// Request-level rules of the GraphQL endpoint that no schema field can enforce: who may introspect,
// and which transport may carry a subscription.
import { type DocumentNode, getOperationAST, parse, visit } from 'graphql';
import { type Plugin, createGraphQLError } from 'graphql-yoga';
import type { Context } from '../schema/builder';

/** Whether a document asks for the schema (`__schema` or `__type`; `__typename` is no introspection). */
export function introspects(document: DocumentNode): boolean {
  let found = false;
  visit(document, {
    Field(node) {
      if (node.name.value === '__schema' || node.name.value === '__type') found = true;
    },
  });
  return found;
}

/**
 * Introspection for anonymous callers only where the instance allows it (off in production by
 * default): the schema is no secret, but it maps the attack surface for whoever has no token.
 */
export function useIntrospectionGate(mode: 'all' | 'authenticated'): Plugin<Context> {
  return {
    onExecute({ args }) {
      if (mode === 'all' || (args.contextValue as Context).principal) return;
      if (introspects(args.document)) {
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
  return {
    onParams({ params }) {
      // A subscription operation starts with the keyword, which no escape can spell: a text
      // without it is none, and is not parsed twice (yoga parses, and caches, what it executes).
      if (typeof params.query !== 'string' || !params.query.includes('subscription')) return;
      let operation: string | undefined;
      try {
        operation = getOperationAST(
          parse(params.query, { maxTokens: 4_000 }),
          params.operationName,
        )?.operation;
      } catch {
        return; // yoga reports the syntax error itself
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
