// The GraphQL fast path: a POST /graphql that asks nothing of yoga but to run a document yoga has
// already accepted runs it straight from node:http. Such a request skips the fetch-API adapter
// (Request and Response objects, header copies, body streams) and yoga's per-request plugin chain,
// which together cost more than the execution of a small query; it gets the same answer,
// byte for byte, with the same status and headers.
//
// What "asks nothing of yoga" means, checked before the body is read: JSON body with a declared
// length (the body limit is checked before), no Origin (CORS is yoga's), no query string, and an
// Accept header yoga answers with JSON. After it is read: `query`, `variables` and `operationName`
// only, and a query text whose document yoga parsed, validated (depth, cost and the other limits)
// and started executing before, with one operation that runs compiled and no introspection.
// Anything else, and any request that cannot be decided without yoga (a token that does not
// authenticate, several Authorization headers, variables that do not coerce), is handed to yoga
// with the body already read.
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { DocumentNode, ExecutionResult, GraphQLError, OperationDefinitionNode } from 'graphql';
import type { CompiledQuery } from 'graphql-jit';
import { type Plugin, createLRUCache, processRegularResult } from 'graphql-yoga';
import type { Context } from '../../schema/builder';
import type { Services } from '../../resolvers/services';
import { type QueryCompiler, operationToCompile, runCompiled } from './compiled-execution';
import { readBody } from '../body-limit';
import { httpContext } from '../context';
import { introspects } from '../graphql-guards';

/** Query texts kept ready to run, by their text. */
const PREPARED_DOCUMENTS = 1_000;

/** The Accept headers answered here, with the media type yoga answers each with. */
const MEDIA_TYPES = new Map<string | undefined, string>([
  [undefined, 'application/json'],
  ['*/*', 'application/json'],
  ['application/json', 'application/json'],
  ['application/graphql-response+json', 'application/graphql-response+json'],
  ['application/graphql-response+json, application/json', 'application/graphql-response+json'],
]);

const JSON_CONTENT_TYPES = new Set(['application/json', 'application/json; charset=utf-8']);
const PARAMS = new Set(['query', 'variables', 'operationName']);

interface Prepared {
  document: DocumentNode;
  operation: OperationDefinitionNode;
  compiled: CompiledQuery;
}

interface Params {
  query: string;
  variables?: Record<string, unknown> | null;
  operationName?: string | null;
}

/** The Response constructor processRegularResult is given: it keeps the body and the init. */
class Captured {
  constructor(
    readonly body: string,
    readonly init: { status: number; headers: Record<string, string> },
  ) {}
}
const CAPTURE = { Response: Captured } as unknown as Parameters<typeof processRegularResult>[1];

/** Marks a compiled execution that refused its variables (see runCompiled): yoga answers those. */
const REFUSED: unique symbol = Symbol('refused variables');

function isParams(value: unknown): value is Params {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return false;
  const params = value as Record<string, unknown>;
  for (const key of Object.keys(params)) if (!PARAMS.has(key)) return false;
  const { query, variables, operationName } = params;
  return (
    typeof query === 'string' &&
    (variables == null || (typeof variables === 'object' && !Array.isArray(variables))) &&
    (operationName == null || typeof operationName === 'string')
  );
}

/** What the fast path needs of yoga: its fetch-API handler, for the requests it hands over. */
export interface YogaHandler {
  handleRequest(
    request: Request,
    context: { req: IncomingMessage; res: ServerResponse },
  ): Response | Promise<Response>;
}

export interface GraphqlFastPathOptions {
  services: Services;
  compiler: QueryCompiler;
  /** The masker yoga is given (`maskedErrors.maskError`), with yoga's message. */
  maskError: (error: unknown, message: string, isDev?: boolean) => Error;
  errorMessage: string;
  startOperation: (document: DocumentNode) => () => void;
  /** Called once per request read: answered here, or handed to yoga. */
  onOutcome?: (outcome: 'answered' | 'handed_over') => void;
}

export type GraphqlFastPath = ReturnType<typeof createGraphqlFastPath>;

export function createGraphqlFastPath(options: GraphqlFastPathOptions) {
  const { services, compiler } = options;
  const prepared = createLRUCache<Prepared>({ max: PREPARED_DOCUMENTS });

  /** Hands a request whose body is read to yoga, and writes yoga's answer. */
  async function handOver(
    yoga: YogaHandler,
    req: IncomingMessage,
    res: ServerResponse,
    text: string,
  ): Promise<void> {
    options.onOutcome?.('handed_over');
    const headers = new Headers();
    for (let i = 0; i < req.rawHeaders.length; i += 2)
      headers.append(req.rawHeaders[i]!, req.rawHeaders[i + 1]!);
    const request = new Request(`http://${req.headers.host ?? 'localhost'}${req.url ?? '/graphql'}`, {
      method: 'POST',
      headers,
      body: text,
    });
    const response = await yoga.handleRequest(request, { req, res });
    const answer = Buffer.from(await response.arrayBuffer());
    res.writeHead(response.status, Object.fromEntries(response.headers));
    res.end(answer);
  }

  return {
    /** Records each document yoga runs that the fast path can run the next time its text comes. */
    plugin(): Plugin {
      return {
        onExecute({ args }) {
          const query = (args.contextValue as { params?: { query?: unknown } }).params?.query;
          if (typeof query !== 'string' || prepared.get(query)) return;
          const operation = operationToCompile(args.document);
          if (!operation || introspects(args.document)) return;
          const compiled = compiler.compile(args.document);
          if (compiled) prepared.set(query, { document: args.document, operation, compiled });
        },
      };
    },

    /** Whether the request may be answered here; decided from its line and headers alone. */
    accepts(req: IncomingMessage, path: string): boolean {
      const h = req.headers;
      return (
        req.method === 'POST' &&
        path === '/graphql' &&
        req.url === path &&
        h.origin === undefined &&
        h['transfer-encoding'] === undefined &&
        h['content-length'] !== undefined &&
        /^\d+$/.test(h['content-length']) &&
        JSON_CONTENT_TYPES.has(h['content-type']?.toLowerCase() ?? '') &&
        MEDIA_TYPES.has(h.accept)
      );
    },

    /** Answers a request `accepts` admitted: here, or by yoga (`yoga`) when only yoga can. */
    async handle(req: IncomingMessage, res: ServerResponse, yoga: YogaHandler): Promise<void> {
      const body = (await readBody(req)).toString('utf8');
      let params: unknown;
      try {
        params = JSON.parse(body);
      } catch {
        return handOver(yoga, req, res, body);
      }
      if (!isParams(params)) return handOver(yoga, req, res, body);
      const entry = prepared.get(params.query);
      if (!entry) return handOver(yoga, req, res, body);
      if (params.operationName != null && params.operationName !== entry.operation.name?.value) {
        return handOver(yoga, req, res, body);
      }
      // Node keeps the first of several Authorization headers, yoga would read them joined.
      if ((req.headersDistinct.authorization?.length ?? 0) > 1) return handOver(yoga, req, res, body);
      let contextValue: Context;
      try {
        contextValue = await httpContext(services, req.headers.authorization ?? null);
      } catch {
        return handOver(yoga, req, res, body); // yoga answers with the authentication error
      }
      const done = options.startOperation(entry.document);
      const result = await runCompiled<typeof REFUSED>(
        entry.compiled,
        { rootValue: undefined, contextValue, variableValues: params.variables ?? undefined },
        () => REFUSED,
      );
      if (result === REFUSED) return handOver(yoga, req, res, body);
      done();
      options.onOutcome?.('answered');
      const masked: ExecutionResult = result.errors
        ? {
            ...result,
            errors: result.errors.map(
              (e) => options.maskError(e, options.errorMessage, false) as GraphQLError,
            ),
          }
        : result;
      const answer = processRegularResult(
        masked,
        CAPTURE,
        MEDIA_TYPES.get(req.headers.accept)!,
      ) as unknown as Captured;
      const headers: Record<string, string | number> = { 'content-length': Buffer.byteLength(answer.body) };
      for (const [name, value] of Object.entries(answer.init.headers)) headers[name.toLowerCase()] = value;
      res.writeHead(answer.init.status, headers);
      res.end(answer.body);
    },
  };
}
