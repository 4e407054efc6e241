// The `jit` fast path for subscriptions: each event of a subscription runs the document's compiled
// query (graphql-jit) instead of graphql-js's execute. The source stream (the field's subscribe,
// with its arguments) stays graphql-js's own. Wired in by server/realtime.ts only when `jit` is on
// (README.md).
import {
  type ExecutionArgs,
  type ExecutionResult,
  Kind,
  type OperationDefinitionNode,
  createSourceEventStream,
  subscribe as graphqlSubscribe,
} from 'graphql';
import type { CompiledQuery } from 'graphql-jit';
import type { QueryCompiler } from './compiled-execution';

export const isAsyncIterable = (value: unknown): value is AsyncIterable<unknown> =>
  typeof (value as { [Symbol.asyncIterator]?: unknown } | null)?.[Symbol.asyncIterator] === 'function';

/** graphql-js's subscribe, with each event run compiled when `compiler` is given and can. */
export async function subscribeWith(
  compiler: QueryCompiler | null,
  args: ExecutionArgs,
): Promise<ExecutionResult | AsyncIterableIterator<ExecutionResult>> {
  const compiled = compiler && soleSubscription(args) ? compiler.compile(args.document) : null;
  return compiled ? subscribeCompiled(compiled, args) : graphqlSubscribe(args);
}

/** A subscription alone in its document: its events can run compiled (one compiled query per document). */
function soleSubscription(args: ExecutionArgs): boolean {
  const operations = args.document.definitions.filter((d) => d.kind === Kind.OPERATION_DEFINITION);
  return operations.length === 1 && (operations[0] as OperationDefinitionNode).operation === 'subscription';
}

/**
 * graphql-js's subscribe with each event executed by the document's compiled query (graphql-jit)
 * instead of graphql-js's execute: the source stream (the field's subscribe, with its arguments)
 * is graphql-js's own. graphql-js walked the selection for every event; a session's text deltas
 * arrive by the hundred a second, and that walk was the largest part of delivering one.
 */
async function subscribeCompiled(
  compiled: CompiledQuery,
  args: ExecutionArgs,
): Promise<ExecutionResult | AsyncIterableIterator<ExecutionResult>> {
  const source = await createSourceEventStream(args);
  if (!isAsyncIterable(source)) return source as ExecutionResult;
  return new CompiledEvents(
    (source as AsyncIterable<unknown>)[Symbol.asyncIterator](),
    compiled,
    args.contextValue,
    args.variableValues ?? {},
  );
}

/** What a compiled query answers: the result, or a promise of it when a resolver was async. */
type Executed = ExecutionResult | Promise<ExecutionResult>;

const isPromise = (value: Executed): value is Promise<ExecutionResult> =>
  typeof (value as { then?: unknown }).then === 'function';

const nextOf = (value: ExecutionResult): IteratorResult<ExecutionResult> => ({ done: false, value });

/**
 * A subscription's events run through its compiled query; methods on the prototype (idle cost).
 * One promise per event: the source's `next` and the mapping in its `then` (a text delta's query
 * is synchronous). Two async functions awaiting each other cost three more promises and as many
 * microtask turns per event, at the hundreds of deltas a second a session streams.
 */
class CompiledEvents implements AsyncIterableIterator<ExecutionResult> {
  /** `map` bound to this stream, made on the first read: one closure per subscription, none per event. */
  private mapper:
    | ((
        step: IteratorResult<unknown>,
      ) => IteratorResult<ExecutionResult> | Promise<IteratorResult<ExecutionResult>>)
    | null = null;

  constructor(
    private readonly events: AsyncIterator<unknown>,
    private readonly compiled: CompiledQuery,
    private readonly contextValue: unknown,
    private readonly variables: { [name: string]: unknown },
  ) {}

  [Symbol.asyncIterator](): this {
    return this;
  }

  private map(
    step: IteratorResult<unknown>,
  ): IteratorResult<ExecutionResult> | Promise<IteratorResult<ExecutionResult>> {
    if (step.done) return step;
    const result = this.compiled.query(step.value, this.contextValue, this.variables) as Executed;
    return isPromise(result) ? result.then(nextOf) : nextOf(result);
  }

  next(): Promise<IteratorResult<ExecutionResult>> {
    this.mapper ??= (step) => this.map(step);
    return this.events.next().then(this.mapper);
  }

  async return(): Promise<IteratorResult<ExecutionResult>> {
    return this.events.return ? this.map(await this.events.return()) : { done: true, value: undefined };
  }

  async throw(error: unknown): Promise<IteratorResult<ExecutionResult>> {
    if (!this.events.throw) throw error;
    return this.map(await this.events.throw(error));
  }
}
