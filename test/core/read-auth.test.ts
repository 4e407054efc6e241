// The type-level read check (schema/read-auth.ts) on a schema of its own, executed both ways the
// server executes: compiled by graphql-jit and by graphql-js. The real types' checks are probed in
// security/node-access.test.ts; here, what the plugin itself promises: one check per object per
// request however many fields are read, a refusal or a thrown error on every field of that object
// only, async checks, and nothing cached across requests.
import SchemaBuilder from '@pothos/core';
import { type ExecutionResult, GraphQLError, execute, parse } from 'graphql';
import { compileQuery, isCompiledQuery } from 'graphql-jit';
import { describe, expect, test } from 'vitest';
import ReadAuthPlugin from '../../schema/read-auth';

interface Row {
  id: string;
  name: string;
  child: Row | null;
}
interface Context {
  principal: string | null;
  asked: string[];
}

// The global option types ask for the options of every plugin this repository registers (prisma,
// scopeAuth); this schema uses one plugin.
const builder = new SchemaBuilder<{ Context: Context; DefaultFieldNullability: false }>({
  plugins: [ReadAuthPlugin],
  defaultFieldNullability: false,
  readAuth: {
    refused: (ctx: Context, typeName: string) =>
      new GraphQLError(`refused ${typeName}`, {
        extensions: { code: ctx.principal ? 'FORBIDDEN' : 'UNAUTHENTICATED' },
      }),
  },
} as never);

const RowRef = builder.objectRef<Row>('Row');
RowRef.implement({
  readAuth: (row, ctx) => {
    ctx.asked.push(row.id);
    if (!ctx.principal) return false;
    if (row.id.startsWith('boom')) throw new GraphQLError(`check failed for ${row.id}`);
    // A check written in plain JavaScript may answer neither true nor false.
    if (row.id.startsWith('vague'))
      return (row.id.endsWith('-promise') ? Promise.resolve('yes') : 1) as never;
    if (row.id.startsWith('later')) return Promise.resolve(!row.id.endsWith('-no'));
    return !row.id.endsWith('-no');
  },
  fields: (t) => ({
    id: t.exposeString('id'),
    name: t.exposeString('name'),
    upper: t.string({ resolve: (row) => row.name.toUpperCase() }),
    child: t.field({ type: RowRef, nullable: true, resolve: (row) => row.child }),
  }),
});

const row = (id: string, child: Row | null = null): Row => ({ id, name: `name of ${id}`, child });
let rows: Row[] = [];
builder.queryType({
  fields: (t) => ({
    rows: t.field({ type: [RowRef], nullable: { list: false, items: true }, resolve: () => rows }),
  }),
});
const schema = builder.toSchema();

const QUERY = parse('{ rows { id name upper child { id name upper } } }');
const compiled = compileQuery(schema, QUERY);
if (!isCompiledQuery(compiled)) throw new Error('the test query does not compile');

const executors = {
  'graphql-jit': (ctx: Context) => compiled.query(undefined, ctx, {}) as Promise<ExecutionResult>,
  'graphql-js': (ctx: Context) =>
    execute({ schema, document: QUERY, contextValue: ctx }) as Promise<ExecutionResult>,
};

/** The object an error is about: its path without the field that was read. */
const objectOf = (e: GraphQLError) => e.path?.slice(0, -1).join('.');

describe.each(Object.entries(executors))('read checks, executed by %s', (_name, run) => {
  const ask = (principal: string | null = 'reader') => {
    const ctx: Context = { principal, asked: [] };
    return { ctx, result: Promise.resolve(run(ctx)) };
  };

  test('each object is checked once per request, however many of its fields are read', async () => {
    rows = [row('a', row('a1')), row('b', row('b1')), row('c')];
    const { ctx, result } = ask();
    const { data, errors } = await result;
    expect(errors).toBeUndefined();
    expect(data).toEqual({
      rows: [
        {
          id: 'a',
          name: 'name of a',
          upper: 'NAME OF A',
          child: { id: 'a1', name: 'name of a1', upper: 'NAME OF A1' },
        },
        {
          id: 'b',
          name: 'name of b',
          upper: 'NAME OF B',
          child: { id: 'b1', name: 'name of b1', upper: 'NAME OF B1' },
        },
        { id: 'c', name: 'name of c', upper: 'NAME OF C', child: null },
      ],
    });
    expect(ctx.asked.sort()).toEqual(['a', 'a1', 'b', 'b1', 'c']);

    // The next request asks again: nothing is cached beyond the request.
    const again = ask();
    await again.result;
    expect(again.ctx.asked.sort()).toEqual(['a', 'a1', 'b', 'b1', 'c']);
  });

  test('a refused object answers null with the refusal; its siblings and their children are read', async () => {
    rows = [row('a'), row('b-no'), row('c', row('c1-no'))];
    const { ctx, result } = ask();
    const { data, errors } = await result;
    expect(data).toEqual({
      rows: [
        { id: 'a', name: 'name of a', upper: 'NAME OF A', child: null },
        null,
        {
          id: 'c',
          name: 'name of c',
          upper: 'NAME OF C',
          child: null,
        },
      ],
    });
    expect(new Set(errors?.map((e) => `${e.message} ${e.extensions?.code}`))).toEqual(
      new Set(['refused Row FORBIDDEN']),
    );
    expect(new Set(errors?.map(objectOf))).toEqual(new Set(['rows.1', 'rows.2.child']));
    expect(JSON.stringify(data)).not.toContain('name of b-no');
    expect(ctx.asked.filter((id) => id === 'b-no')).toEqual(['b-no']);
  });

  test('without a principal the refusal is the error for an unknown caller', async () => {
    rows = [row('a')];
    const { data, errors } = await ask(null).result;
    expect(data).toEqual({ rows: [null] });
    expect(errors?.[0]?.extensions?.code).toBe('UNAUTHENTICATED');
  });

  test('only true allows: a check answering anything else refuses, as a value or a promise', async () => {
    rows = [row('vague-1'), row('vague-2-promise'), row('a')];
    const { data, errors } = await ask().result;
    expect(data).toEqual({
      rows: [null, null, { id: 'a', name: 'name of a', upper: 'NAME OF A', child: null }],
    });
    expect(new Set(errors?.map((e) => e.extensions?.code))).toEqual(new Set(['FORBIDDEN']));
    expect(new Set(errors?.map(objectOf))).toEqual(new Set(['rows.0', 'rows.1']));
  });

  test('an error thrown by the check is the answer for that object, once per request', async () => {
    rows = [row('boom-1'), row('a')];
    const { ctx, result } = ask();
    const { data, errors } = await result;
    expect(data).toEqual({ rows: [null, { id: 'a', name: 'name of a', upper: 'NAME OF A', child: null }] });
    // An error per field read of that object (graphql-jit reads them all, graphql-js stops at the
    // first non-null one), all of them the check's, all under that object.
    expect(new Set(errors?.map((e) => e.message))).toEqual(new Set(['check failed for boom-1']));
    expect(new Set(errors?.map(objectOf))).toEqual(new Set(['rows.0']));
    expect(ctx.asked.filter((id) => id === 'boom-1')).toEqual(['boom-1']);
  });

  test('an async check is awaited before any field of its object resolves', async () => {
    rows = [row('later-1', row('later-2-no')), row('later-3-no')];
    const { ctx, result } = ask();
    const { data, errors } = await result;
    expect(data).toEqual({
      rows: [{ id: 'later-1', name: 'name of later-1', upper: 'NAME OF LATER-1', child: null }, null],
    });
    expect(new Set(errors?.map((e) => e.extensions?.code))).toEqual(new Set(['FORBIDDEN']));
    expect(new Set(errors?.map(objectOf))).toEqual(new Set(['rows.0.child', 'rows.1']));
    expect(ctx.asked.sort()).toEqual(['later-1', 'later-2-no', 'later-3-no']);
  });
});
