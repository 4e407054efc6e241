// The Pothos builder: generics, plugins, scalars and root types. Domain types live in their own files;
// their resolvers call services (Context.services has no database) and never query themselves.
import SchemaBuilder, { RootFieldBuilder, completeValue } from '@pothos/core';
import ErrorsPlugin from '@pothos/plugin-errors';
import PrismaPlugin from '@pothos/plugin-prisma';
import RelayPlugin, { decodeGlobalID, encodeGlobalID } from '@pothos/plugin-relay';
import ScopeAuthPlugin from '@pothos/plugin-scope-auth';
import { GraphQLError, GraphQLScalarType, Kind } from 'graphql';
import { DateTimeResolver } from 'graphql-scalars';
import type PrismaTypes from '../prisma/generated/pothos-types';
import { getDatamodel } from '../prisma/generated/pothos-types';
import { badUserInput, forbidden, unauthenticated } from '../resolvers/errors';
import { isUuid } from '../resolvers/ids';
import type { Principal, Scope } from '../resolvers/auth/principal';
import { can } from '../resolvers/auth/policy';
import type { SchemaServices, Services } from '../resolvers/services';
import ReadAuthPlugin from './read-auth';

// The relay plugin resolves every `globalID` field (each Node's `id`) through an async function: one
// Promise per object, which makes the executor await every object of a page separately. This
// version is synchronous whenever the id is (always, for our Nodes) and encodes the same id.
(RootFieldBuilder.prototype as unknown as Record<string, unknown>).globalID = function globalID(
  this: {
    builder: { configStore: { getTypeConfig(ref: unknown): { name: string } } };
    field(options: object): unknown;
  },
  { resolve, ...options }: { resolve: (...args: unknown[]) => unknown },
) {
  return this.field({
    ...options,
    type: 'ID',
    resolve: (parent: unknown, args: unknown, context: unknown, info: unknown) =>
      completeValue(resolve(parent, args, context, info), (result) => {
        if (!result || typeof result !== 'object') return result;
        const { type, id } = result as { type: unknown; id: unknown };
        return encodeGlobalID(this.builder.configStore.getTypeConfig(type).name, String(id));
      }),
  });
};

/** What a subscription resolver may ask of its connection (absent for in-process execution). */
export interface ConnectionHandle {
  principal: Principal;
  /** Closes the socket with 4401 and throws when the token expired since it connected. */
  assertValid(): void;
  /** Records the seq of the event being delivered (sent as `extensions.seq`). */
  delivered(seq: number): void;
  slowConsumer(lastSeq: number): void;
  maxBufferedEvents: number;
}

export interface Context {
  principal: Principal | null;
  /**
   * Every service but the database: a resolver here calls a service, which holds the read and its
   * rules, and never queries on its own (test/core/layout.test.ts guards it).
   */
  services: SchemaServices;
  /** The WebSocket connection a subscription runs on (absent over HTTP and in-process execution). */
  connection?: ConnectionHandle;
}

/**
 * The context the server builds (server/context.ts): the schema's, with the whole Services behind it.
 * Only the prisma plugin's wiring below reads it, for the plugin's own queries (relations,
 * connections, node loads).
 */
export interface ServerContext extends Context {
  services: Services;
}

/** A refused read: FORBIDDEN for a caller we know, UNAUTHENTICATED for one we do not. */
function refusal(ctx: Context, message: string | undefined): GraphQLError {
  return ctx.principal ? forbidden(message) : unauthenticated();
}

/** Upper bound of `nodes(ids:)`. */
export const MAX_NODES_IDS = 100;

export const builder = new SchemaBuilder<{
  Context: Context;
  PrismaTypes: PrismaTypes;
  DefaultFieldNullability: false;
  DefaultInputFieldRequiredness: true;
  DefaultEdgesNullability: false;
  DefaultNodeNullability: false;
  Scalars: {
    DateTime: { Input: Date; Output: Date | string };
    ID: { Input: string; Output: string | number };
  };
  AuthScopes: {
    authenticated: boolean;
    /** A user or service-account credential (not a sandbox token). */
    human: boolean;
    /** The in-sandbox token. */
    sandbox: boolean;
    scope: Scope;
  };
}>({
  // readAuth first: an object's read check runs before any of its fields' own scopes.
  plugins: [ReadAuthPlugin, ScopeAuthPlugin, ErrorsPlugin, PrismaPlugin, RelayPlugin],
  defaultFieldNullability: false,
  defaultInputFieldRequiredness: true,
  scopeAuth: {
    authorizeOnSubscribe: true,
    authScopes: (ctx) => ({
      // Every scope asks the policy (resolvers/auth/policy.ts); `scope` is parameterised.
      authenticated: can(ctx.principal, 'api.call'),
      human: can(ctx.principal, 'api.human'),
      sandbox: can(ctx.principal, 'daemon.report'),
      scope: (scope) => can(ctx.principal, 'api.scope', { scope }),
    }),
    unauthorizedError: (_parent, ctx, _info, result) =>
      refusal(ctx, result.message === 'Unauthorized' ? undefined : result.message),
  },
  readAuth: {
    refused: (ctx, typeName) => refusal(ctx, `Not authorized to read fields for ${typeName}`),
  },
  prisma: {
    client: (ctx) => (ctx as ServerContext).services.db,
    dmmf: getDatamodel(),
    exposeDescriptions: false,
    filterConnectionTotalCount: true,
    onUnusedQuery: null,
  },
  relay: {
    clientMutationId: 'omit',
    cursorType: 'String',
    nodesOnConnection: false,
    edgesFieldOptions: { nullable: false },
    nodeFieldOptions: { nullable: false },
    // Each id is a lookup and a read check: a request may not fan out without bound.
    nodesQueryOptions: {
      description: `At most ${MAX_NODES_IDS} ids per request.`,
      resolve: (_root, args, _ctx, _info, resolveNodes) => {
        if (args.ids.length > MAX_NODES_IDS)
          throw badUserInput(`nodes(ids:) takes at most ${MAX_NODES_IDS} ids; split the request.`, ['ids']);
        return resolveNodes(args.ids);
      },
    },
    // Every Node here is keyed by a UUID: a malformed global id is the caller's error, and must not
    // reach PostgreSQL as an invalid uuid (that surfaced as a masked INTERNAL_SERVER_ERROR).
    decodeGlobalID: (globalID) => {
      let decoded: { typename: string; id: string } | null = null;
      try {
        decoded = globalID.length <= 200 ? decodeGlobalID(globalID) : null;
      } catch {
        decoded = null;
      }
      if (!decoded || !isUuid(decoded.id)) {
        throw badUserInput('Not a valid global id: pass an `id` the API returned.', ['id']);
      }
      return decoded;
    },
  },
  errors: {
    defaultTypes: [],
    directResult: true,
    defaultUnionOptions: {
      name: ({ fieldName }) => `${fieldName[0]!.toUpperCase()}${fieldName.slice(1)}Payload`,
    },
  },
});

// Input goes through graphql-scalars' RFC 3339 date-time: the offset is required, so
// "2026-01-31T12:00:00" is refused rather than read in the server's local time zone. Output stays
// `toISOString()` (UTC, milliseconds) for Dates and for the timestamps raw SQL hands back as strings.
builder.addScalarType(
  'DateTime',
  new GraphQLScalarType<Date, string>({
    name: 'DateTime',
    description:
      'An RFC 3339 instant, e.g. 2026-01-31T12:00:00Z. Input must carry its offset (Z or ±hh:mm); output is UTC with milliseconds, e.g. 2026-01-31T12:00:00.000Z.',
    serialize: (value) => {
      const date = value instanceof Date ? value : new Date(String(value));
      if (Number.isNaN(date.getTime())) throw new GraphQLError('DateTime cannot represent an invalid date.');
      return date.toISOString();
    },
    parseValue: (value) => parseDate(value),
    parseLiteral: (ast) => {
      if (ast.kind !== Kind.STRING) throw badUserInput('DateTime must be an RFC 3339 (ISO-8601) string.');
      return parseDate(ast.value);
    },
  }),
);

function parseDate(value: unknown): Date {
  if (typeof value !== 'string' || value.length > 40)
    throw badUserInput('DateTime must be an RFC 3339 (ISO-8601) string.');
  let date: unknown;
  try {
    date = DateTimeResolver.parseValue(value);
  } catch {
    date = null;
  }
  if (!(date instanceof Date) || Number.isNaN(date.getTime())) {
    throw badUserInput(
      `DateTime cannot represent "${value}": use ISO-8601 with an offset, e.g. 2026-01-31T12:00:00Z.`,
    );
  }
  return date;
}

builder.queryType({});
builder.mutationType({});
builder.subscriptionType({});

/** `<Op>Success` object carrying one resource under its own name (SPEC §11). */
export function successType<K extends string, T>(
  name: string,
  key: K,
  // biome-ignore lint/suspicious/noExplicitAny: any Pothos output ref whose shape is T
  ref: import('@pothos/core').ObjectRef<any, T>,
) {
  return builder.objectRef<Record<K, T>>(name).implement({
    fields: (t) => ({ [key]: t.field({ type: ref, resolve: (parent) => parent[key] as never }) }) as never,
  });
}
