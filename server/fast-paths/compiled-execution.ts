// Queries and mutations run on graphql-jit: each document is compiled once into a function that
// executes it (no per-request walk of the AST, per-field lookups or argument coercion from scratch)
// and the compiled function is cached. Subscriptions take their source stream from graphql-js's
// subscribe and run each event compiled (server/realtime.ts).
import {
  type DocumentNode,
  type ExecutionArgs,
  type ExecutionResult,
  type GraphQLField,
  type GraphQLFieldResolver,
  type GraphQLResolveInfo,
  type GraphQLSchema,
  Kind,
  type OperationDefinitionNode,
  type ResponsePath,
  getNamedType,
  isLeafType,
  isObjectType,
} from 'graphql';
import { type CompiledQuery, compileQuery, isCompiledQuery } from 'graphql-jit';
import { type Plugin, createLRUCache } from 'graphql-yoga';
import type { Logger } from '../logger';

/** Compiled documents kept by their text, beside the parse cache's documents (weakly, by object). */
const COMPILED_DOCUMENTS = 1_000;

/**
 * The operation a document runs compiled: a query or a mutation, alone in its document. The plugin
 * caches a compiled query by document without its operation name, so a document of several
 * operations would run whichever of them was compiled first; those (rare) run on graphql-js.
 */
const compiledOperation = new WeakMap<DocumentNode, OperationDefinitionNode | null>();
export function operationToCompile(document: DocumentNode): OperationDefinitionNode | null {
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
 *
 * A leaf field (scalar or enum) has no children to look its link up, so its call keeps the fresh
 * path unless the Prisma plugin plans it (a field with its own `select` looks its ancestors up).
 * Anything else keyed by path (scope-auth's grants) keys by the path's text, which a fresh chain
 * spells the same. Most of a page's fields are leaves: the swap was a tenth of its server time.
 */
function sharesPath(field: GraphQLField<unknown, unknown>): boolean {
  return !isLeafType(getNamedType(field.type)) || Boolean(field.extensions.pothosPrismaSelect);
}

function shareResolvePaths(schema: GraphQLSchema): void {
  if (wrapped.has(schema)) return;
  wrapped.add(schema);
  for (const type of Object.values(schema.getTypeMap())) {
    if (!isObjectType(type) || type.name.startsWith('__')) continue;
    for (const field of Object.values(type.getFields())) {
      const resolve = field.resolve;
      if (!resolve || !sharesPath(field)) continue;
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

export interface QueryCompiler {
  /**
   * The compiled form of a document that runs compiled (see `compilable`), compiled once and cached
   * by the document object and by its text; null for one that does not compile (logged once).
   */
  compile(document: DocumentNode): CompiledQuery | null;
}

export function createQueryCompiler(logger: Logger, schema: GraphQLSchema): QueryCompiler {
  const log = logger.child({ module: 'graphql-jit' });
  shareResolvePaths(schema);
  const byDocument = new WeakMap<DocumentNode, CompiledQuery | null>();
  const byText = createLRUCache<{ compiled: CompiledQuery | null }>({ max: COMPILED_DOCUMENTS });
  return {
    compile(document) {
      let compiled = byDocument.get(document);
      if (compiled !== undefined) return compiled;
      const text = document.loc?.source.body;
      compiled = text === undefined ? undefined : byText.get(text)?.compiled;
      if (compiled === undefined) {
        const result = compileQuery(schema, document, undefined, {
          resolverInfoEnricher: () => ({ [COMPILED_INFO]: true }),
        });
        if (isCompiledQuery(result)) compiled = result;
        else {
          // Validation passed, so this is a compiler limitation: it runs on graphql-js instead.
          log.error({ errors: result.errors }, 'query did not compile');
          compiled = null;
        }
        if (text !== undefined) byText.set(text, { compiled });
      }
      byDocument.set(document, compiled);
      return compiled;
    },
  };
}

/**
 * Runs the result of a compiled query; a request whose variables the compiled query refused runs
 * on graphql-js (`fallback`) instead, as described at `refusedVariables`.
 */
export function runCompiled<T>(
  compiled: CompiledQuery,
  args: Pick<ExecutionArgs, 'rootValue' | 'contextValue' | 'variableValues'>,
  fallback: () => T,
): T | ExecutionResult | Promise<T | ExecutionResult> {
  const answer = (result: ExecutionResult): T | ExecutionResult => {
    if (refusedVariables(result)) return fallback();
    // yoga serializes the result with the query's compiled stringifier.
    (result as { stringify?: (value: unknown) => string }).stringify = compiled.stringify;
    return result;
  };
  const result = compiled.query(args.rootValue, args.contextValue, args.variableValues ?? {});
  return result instanceof Promise ? result.then(answer) : answer(result);
}

export function useCompiledExecution(compiler: QueryCompiler): Plugin {
  return {
    onExecute({ args, executeFn, setExecuteFn }) {
      if (!compilable(args)) return;
      const compiled = compiler.compile(args.document);
      if (!compiled) return;
      setExecuteFn((callArgs) => runCompiled(compiled, callArgs, () => executeFn(callArgs)));
    },
  } as Plugin;
}
