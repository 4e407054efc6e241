// One SQL statement for a findMany whose selection reaches only scalars and to-one relations: the
// rows come back with their to-one relations LEFT JOINed, shaped as Prisma returns them (the same
// keys, Dates, null for a missing relation). For a page of a hundred sessions with four relations,
// Prisma's query building and result mapping cost several times the statement itself (bench/api.ts);
// a list field whose selection fits runs this, and anything else runs on Prisma: to-many relations,
// relation filters or counts, filters beyond equality, backward pages, BigInt, Decimal and Bytes.
//
// It relies on three properties of prisma/schema.prisma, checked by test/core/find-many-sql.test.ts:
// tables and columns carry the model's and field's names (no @map), every relation references its
// target's id, and every DateTime is a plain timestamp(3) holding UTC (no @db.Timestamptz).
//
// Services never import it: server/app.ts hands them `findManySql` (resolvers/platform.ts's
// FindManySql) unless SINGULACOMP_FAST_PATHS turns it off, and they read with Prisma without it.
import { getDatamodel } from '../../prisma/generated/pothos-types';
import type { FindMany, FindManySql, RawSql } from '../../resolvers/platform';

export type { FilterValue, FindMany } from '../../resolvers/platform';

type Models = ReturnType<typeof getDatamodel>['datamodel']['models'];
type Model = Models[string];
type Field = Model['fields'][number];

const models: Models = getDatamodel().datamodel.models;

/** Scalar types whose PostgreSQL value both drivers return as Prisma does (DateTime: see column()). */
const SCALARS = new Set(['String', 'Int', 'Float', 'Boolean', 'DateTime']);

export interface CompiledFindMany {
  text: string;
  values: unknown[];
  /** Runs the statement and shapes its rows. */
  run(sql: Pick<RawSql, 'queryArrays'>): Promise<Record<string, unknown>[]>;
}

interface Column {
  /** Position in the row. */
  index: number;
  key: string;
  date: boolean;
  /** A scalar list: Prisma reads NULL as an empty list. */
  list: boolean;
  /** Selected only to tell a missing relation (its id is null) from a present one. */
  hidden: boolean;
}

interface Shape {
  key: string;
  /** Position of the relation's id column, null when the relation is missing; null for the root. */
  present: number | null;
  columns: Column[];
  relations: Shape[];
}

function fieldOf(model: Model, name: string): Field | undefined {
  return model.fields.find((f) => f.name === name);
}

function idOf(model: Model): Field | null {
  if (model.primaryKey) return null;
  const ids = model.fields.filter((f) => f.isId);
  return ids.length === 1 ? ids[0]! : null;
}

const quote = (name: string) => `"${name}"`;

function isColumn(field: Field): boolean {
  if (field.kind === 'enum') return !field.isList; // enum arrays come back as unparsed text
  if (field.kind !== 'scalar' || !SCALARS.has(field.type)) return false;
  return !field.isList || field.type === 'String';
}

class Compiler {
  readonly columns: string[] = [];
  readonly joins: string[] = [];
  private tables = 0;

  table(): string {
    return `t${this.tables++}`;
  }

  /**
   * Selects one column. A DateTime (timestamp(3), UTC) is read as its ISO text, as Prisma's adapters
   * read it: the drivers would take it for local time.
   */
  column(table: string, field: Field, key: string, hidden = false): Column {
    const ref = `${table}.${quote(field.name)}`;
    const date = field.type === 'DateTime';
    this.columns.push(date ? `${ref}::text` : ref);
    return { index: this.columns.length - 1, key, date, list: field.isList, hidden };
  }

  /**
   * The columns and relations a Prisma selection names. `selection` is `true` (every scalar), or an
   * object holding `include` or `select` and nothing else. Null when it reaches beyond what one
   * statement of LEFT JOINs returns as Prisma would.
   */
  shape(modelName: string, table: string, selection: unknown, key: string): Shape | null {
    const model = models[modelName];
    if (!model) return null;
    const allScalars = () => model.fields.filter((f) => f.kind !== 'object');
    let scalars: Field[];
    const related: [Field, unknown][] = [];
    if (selection === true) {
      scalars = allScalars();
    } else if (typeof selection === 'object' && selection !== null) {
      const { include, select, ...rest } = selection as { include?: unknown; select?: unknown };
      if (Object.keys(rest).length > 0 || (include && select)) return null;
      const entries = Object.entries((select ?? include ?? {}) as Record<string, unknown>);
      scalars = select ? [] : allScalars();
      for (const [name, value] of entries) {
        if (value === false || value === undefined) continue;
        const field = fieldOf(model, name);
        if (!field) return null;
        if (field.kind === 'object') related.push([field, value]);
        else if (select && value === true) scalars.push(field);
        else return null;
      }
    } else {
      return null;
    }
    if (!scalars.every(isColumn)) return null;
    const shape: Shape = {
      key,
      present: null,
      columns: scalars.map((f) => this.column(table, f, f.name)),
      relations: [],
    };
    for (const [field, value] of related) {
      const relation = this.join(model, table, field, value);
      if (!relation) return null;
      shape.relations.push(relation);
    }
    return shape;
  }

  /** A to-one relation as a LEFT JOIN on the target's id, or on the target's unique back-reference. */
  private join(model: Model, table: string, field: Field, selection: unknown): Shape | null {
    const target = models[field.type];
    const targetId = target && idOf(target);
    if (!target || !targetId || field.isList) return null;
    const alias = this.table();
    const from = field.relationFromFields ?? [];
    if (from.length === 1) {
      this.joins.push(
        `LEFT JOIN ${quote(field.type)} ${alias} ON ${alias}.${quote(targetId.name)} = ${table}.${quote(from[0]!)}`,
      );
    } else if (from.length === 0) {
      // The foreign key is on the target's side; unique, or the join would repeat the row.
      const back = target.fields.find(
        (f) => f.relationName === field.relationName && f.kind === 'object' && f !== field,
      );
      const column =
        back?.relationFromFields?.length === 1 ? fieldOf(target, back.relationFromFields[0]!) : undefined;
      const ownId = idOf(model);
      if (!column || !(column.isUnique || column.isId) || !ownId) return null;
      this.joins.push(
        `LEFT JOIN ${quote(field.type)} ${alias} ON ${alias}.${quote(column.name)} = ${table}.${quote(ownId.name)}`,
      );
    } else {
      return null;
    }
    const shape = this.shape(field.type, alias, selection, field.name);
    if (!shape) return null;
    // A missing relation reads as a null id: the selected id column, or one selected for that alone.
    const id =
      shape.columns.find((c) => c.key === targetId.name) ?? this.column(alias, targetId, targetId.name, true);
    if (id.hidden) shape.columns.push(id);
    shape.present = id.index;
    return shape;
  }
}

const digits = (text: string, from: number, to: number) => {
  let value = 0;
  for (let i = from; i < to; i++) value = value * 10 + text.charCodeAt(i) - 48;
  return value;
};

const TIMESTAMP = /^(\d+)-(\d\d)-(\d\d) (\d\d):(\d\d):(\d\d)(?:\.(\d{1,3}))?$/;

/**
 * PostgreSQL's ISO text of a timestamp(3) ("2026-12-04 12:55:21.1") as the UTC instant it stores.
 * Read by position, since this runs for every date of every row of a page; years before 100 or
 * after 9999 go through a pattern (Date.UTC reads 0–99 as 1900–1999). BC dates are refused.
 */
export function utcFromText(text: string): Date {
  const length = text.length;
  const fraction = length > 19 && text.charCodeAt(19) === 46; // '.'
  const year = digits(text, 0, 4);
  if (
    year >= 100 &&
    text.charCodeAt(4) === 45 && // '-'
    text.charCodeAt(10) === 32 && // ' '
    (length === 19 || (fraction && length <= 23))
  ) {
    const ms = fraction ? digits(text, 20, length) * 10 ** (23 - length) : 0;
    return new Date(
      Date.UTC(
        year,
        digits(text, 5, 7) - 1,
        digits(text, 8, 10),
        digits(text, 11, 13),
        digits(text, 14, 16),
        digits(text, 17, 19),
        ms,
      ),
    );
  }
  const m = TIMESTAMP.exec(text);
  if (!m) throw new Error(`Not a timestamp(3) in PostgreSQL's ISO form: ${text}`);
  const date = new Date(
    Date.UTC(2000, Number(m[2]) - 1, Number(m[3]), Number(m[4]), Number(m[5]), Number(m[6])),
  );
  date.setUTCFullYear(Number(m[1]));
  date.setUTCMilliseconds(m[7] ? Number(m[7].padEnd(3, '0')) : 0);
  return date;
}

/** The object literal one row becomes, as source: V8 gives every row's object the same layout. */
function literal(shape: Shape): string {
  const properties = shape.columns
    .filter((c) => !c.hidden)
    .map((c) => {
      const value = `row[${c.index}]`;
      const read = c.list ? `${value} ?? []` : c.date ? `${value} === null ? null : utc(${value})` : value;
      return `${JSON.stringify(c.key)}: ${read}`;
    });
  for (const r of shape.relations) {
    properties.push(`${JSON.stringify(r.key)}: row[${r.present}] === null ? null : ${literal(r)}`);
  }
  return `{ ${properties.join(', ')} }`;
}

/**
 * The function that shapes a row, generated once per statement (as graphql-jit does for queries).
 * The keys are the datamodel's field names, quoted; nothing of a request enters the source.
 */
function rowBuilder(shape: Shape): (row: unknown[]) => Record<string, unknown> {
  return new Function('utc', `return (row) => (${literal(shape)});`)(utcFromText);
}

/** Row builders by statement text; the text determines the shape. Bounded: selections vary by client. */
const BUILDERS = 200;
const builders = new Map<string, (row: unknown[]) => Record<string, unknown>>();

function builderFor(text: string, shape: Shape): (row: unknown[]) => Record<string, unknown> {
  let build = builders.get(text);
  if (!build) {
    build = rowBuilder(shape);
    if (builders.size >= BUILDERS) builders.delete(builders.keys().next().value!);
    builders.set(text, build);
  }
  return build;
}

const isCount = (n: unknown): n is number => Number.isInteger(n) && (n as number) >= 0;

/** The statement for `find`, or null when Prisma must run it (see the top of this file). */
export function compileFindMany(modelName: string, find: FindMany): CompiledFindMany | null {
  const model = models[modelName];
  if (!model) return null;
  const { include, select, take, skip, cursor, ...rest } = find.query as {
    include?: unknown;
    select?: unknown;
    take?: unknown;
    skip?: unknown;
    cursor?: unknown;
  };
  if (Object.keys(rest).length > 0) return null;
  if (take !== undefined && !isCount(take)) return null; // a negative take reads backwards
  if (skip !== undefined && !isCount(skip)) return null;

  const compiler = new Compiler();
  const root = compiler.table();
  const selection =
    include || select ? { ...(include ? { include } : {}), ...(select ? { select } : {}) } : true;
  const shape = compiler.shape(modelName, root, selection, '');
  if (!shape) return null;

  const values: unknown[] = [];
  const param = (value: unknown) => {
    values.push(value);
    return `$${values.length}`;
  };
  const scalar = (name: string) => {
    const field = fieldOf(model, name);
    return field && field.kind !== 'object' && !field.isList ? field : null;
  };
  const conditions: string[] = [];
  for (const [name, value] of Object.entries(find.where)) {
    if (value === undefined) continue;
    if (!scalar(name) || value === null || typeof value === 'object') return null;
    conditions.push(`${root}.${quote(name)} = ${param(value)}`);
  }
  const order: [Field, 'asc' | 'desc'][] = [];
  for (const entry of find.orderBy) {
    const [name, direction, ...more] = Object.entries(entry).flat() as string[];
    const field = name ? scalar(name) : null;
    if (!field?.isRequired || more.length > 0 || (direction !== 'asc' && direction !== 'desc')) return null;
    order.push([field, direction]);
  }
  if (cursor !== undefined) {
    // Prisma's cursor: the rows at or after the cursor row in the order (skip: 1 leaves it out).
    const [name, value, ...more] = Object.entries(cursor as object).flat() as [string, unknown];
    const field = name ? scalar(name) : null;
    if (!field || !(field.isId || field.isUnique) || more.length > 0 || order.length === 0) return null;
    const at = param(value);
    const cursorValue = (f: Field) =>
      `(SELECT ${quote(f.name)} FROM ${quote(modelName)} WHERE ${quote(field.name)} = ${at})`;
    const branches = order.map(([f, direction], i) => {
      const equal = order.slice(0, i).map(([e]) => `${root}.${quote(e.name)} = ${cursorValue(e)}`);
      const last = i === order.length - 1;
      const op = direction === 'desc' ? (last ? '<=' : '<') : last ? '>=' : '>';
      return [...equal, `${root}.${quote(f.name)} ${op} ${cursorValue(f)}`].join(' AND ');
    });
    conditions.push(`(${branches.map((b) => `(${b})`).join(' OR ')})`);
  }

  const text = [
    `SELECT ${compiler.columns.join(', ')}`,
    `FROM ${quote(modelName)} ${root}`,
    ...compiler.joins,
    conditions.length > 0 ? `WHERE ${conditions.join(' AND ')}` : '',
    order.length > 0
      ? `ORDER BY ${order.map(([f, d]) => `${root}.${quote(f.name)} ${d.toUpperCase()}`).join(', ')}`
      : '',
    take !== undefined ? `LIMIT ${param(take)}` : '',
    skip ? `OFFSET ${param(skip)}` : '',
  ]
    .filter(Boolean)
    .join(' ');
  const build = builderFor(text, shape);
  return {
    text,
    values,
    async run(sql) {
      const rows = await sql.queryArrays(text, values);
      return rows.map(build);
    },
  };
}

/** The reader services are given (see the top of this file): one statement on `sql`, or null. */
export function findManySql(sql: Pick<RawSql, 'queryArrays'>): FindManySql {
  return (modelName, find) => compileFindMany(modelName, find)?.run(sql) ?? null;
}
