// Queries and mutations run on graphql-jit: each document is compiled once into a function that
// executes it (no per-request walk of the AST, per-field lookups or argument coercion from scratch)
// and the compiled function is cached. Subscriptions stay on graphql-js's subscribe.
import { useGraphQlJit } from '@envelop/graphql-jit';
import {
  type DocumentNode,
  type ExecutionArgs,
  type ExecutionResult,
  type GraphQLFieldResolver,
  type GraphQLResolveInfo,
  type GraphQLSchema,
  Kind,
  type OperationDefinitionNode,
  type ResponsePath,
  isObjectType,
} from 'graphql';
import { type Plugin, createLRUCache } from 'graphql-yoga';
import type { Logger } from './logger';

/** Compiled documents kept by their text, beside the parse cache's documents (weakly, by object). */
const COMPILED_DOCUMENTS = 1_000;

/**
 * The operation a document runs compiled: a query or a mutation, alone in its document. The plugin
 * caches a compiled query by document without its operation name, so a document of several
 * operations would run whichever of them was compiled first; those (rare) run on graphql-js.
 */
const compiledOperation = new WeakMap<DocumentNode, OperationDefinitionNode | null>();
function operationToCompile(document: DocumentNode): OperationDefinitionNode | null {
  let operation = compiledOperation.get(document);
  if (operation === undefined) {
    const operations = document.definitions.filter((d) => d.kind === Kind.OPERATION_DEFINITION);
    operation =
      operations.length === 1 && operations[0]!.operation !== 'subscription' ? operations[0]! : null;
    compiledOperation.set(document, operation);
  }
  return operation;
}

/** Whether a request runs compiled: a query or a mutation alone in its document. */
export function compilable(args: Pick<ExecutionArgs, 'document'>): boolean {
  return operationToCompile(args.document) !== null;
}

/**
 * graphql-jit answers a request whose variables do not coerce with errors and no `data`, before
 * any resolver runs. It words them in its own way (without the scalar's or enum's reason) and not
 * as a request error (HTTP 400), so such a request is answered again by graphql-js, as it always
 * has been. Checking variables up front instead would coerce every request's variables twice.
 */
function refusedVariables(result: unknown): boolean {
  return (
    typeof result === 'object' &&
    result !== null &&
    !('data' in result) &&
    Array.isArray((result as ExecutionResult).errors)
  );
}

/**
 * One response path link per position of one execution, as graphql-js gives them: the link a
 * field's resolver sees is the very `prev` of the links beneath it. `below` holds its children.
 */
class SharedPath implements ResponsePath {
  below: Map<string | number, SharedPath> | undefined;
  constructor(
    readonly prev: SharedPath | undefined,
    readonly key: string | number,
    readonly typename: string | undefined,
  ) {}
}

/** The root links of each execution, by its context (one per request or WebSocket operation). */
const executionPaths = new WeakMap<object, Map<string | number, SharedPath>>();

function sharedPath(roots: Map<string | number, SharedPath>, path: ResponsePath): SharedPath {
  const prev = path.prev ? sharedPath(roots, path.prev) : undefined;
  let level = prev ? prev.below : roots;
  if (!level) {
    level = new Map();
    prev!.below = level;
  }
  let shared = level.get(path.key);
  if (!shared) {
    shared = new SharedPath(prev, path.key, path.typename);
    level.set(path.key, shared);
  }
  return shared;
}

/** Set on the info graphql-jit builds (resolverInfoEnricher), never on graphql-js's. */
const COMPILED_INFO = 'executedCompiled';
const wrapped = new WeakSet<GraphQLSchema>();

/**
 * graphql-jit builds a fresh `info.path` chain for every resolver call, so a field's link is not
 * the `prev` its children see. The Prisma plugin keys what a planned query loaded by those links
 * (which rows and fields a plan covered, and where a nested connection's rows are); with fresh
 * links it finds none of it and loads again, or trusts a sibling's plan. Each compiled call's
 * path is swapped for the execution's shared link of the same position, as graphql-js passes.
 */
function shareResolvePaths(schema: GraphQLSchema): void {
  if (wrapped.has(schema)) return;
  wrapped.add(schema);
  for (const type of Object.values(schema.getTypeMap())) {
    if (!isObjectType(type) || type.name.startsWith('__')) continue;
    for (const field of Object.values(type.getFields())) {
      const resolve = field.resolve;
      if (!resolve) continue;
      field.resolve = ((parent, args, context: object, info: GraphQLResolveInfo) => {
        if ((info as unknown as Record<string, unknown>)[COMPILED_INFO]) {
          let roots = executionPaths.get(context);
          if (!roots) {
            roots = new Map();
            executionPaths.set(context, roots);
          }
          (info as { path: ResponsePath }).path = sharedPath(roots, info.path);
        }
        return resolve(parent, args, context, info);
      }) as GraphQLFieldResolver<unknown, object>;
    }
  }
}

export function useCompiledExecution(logger: Logger, schema: GraphQLSchema): Plugin {
  const log = logger.child({ module: 'graphql-jit' });
  shareResolvePaths(schema);
  const jit = useGraphQlJit(
    { resolverInfoEnricher: () => ({ [COMPILED_INFO]: true }) },
    {
      cache: createLRUCache({ max: COMPILED_DOCUMENTS }),
      // A document that does not compile answers with the compiler's errors (validation passed, so
      // this is a compiler limitation): logged, as it would otherwise go unnoticed.
      onError: (result) => log.error({ errors: result.errors }, 'query did not compile'),
    },
  );
  return {
    onExecute(payload) {
      if (!compilable(payload.args)) return;
      const graphqlJs = payload.executeFn;
      return jit.onExecute?.({
        ...payload,
        setExecuteFn: (compiled) =>
          payload.setExecuteFn((args) => {
            const answer = (result: Awaited<ReturnType<typeof compiled>>) =>
              refusedVariables(result) ? graphqlJs(args) : result;
            const result = compiled(args);
            return result instanceof Promise ? result.then(answer) : answer(result);
          }),
      });
    },
  } as Plugin;
}
