// Token; token mutations. Secrets are returned once, in the create payload.
import { errorTypeMap, wrapOrThrow } from '@pothos/plugin-errors';
import type { Token } from '../prisma/generated/client/client';
import { builder, successType } from './builder';
import { TokenKindEnum } from './enums';
import { COMMON_ERRORS } from './errors';
import { parseId } from '../resolvers/ids';
import { assertCanReadToken, assertScope } from '../resolvers/auth/authz';
import { authorize } from '../resolvers/auth/policy';
import { ConflictError, type DomainError, NotFoundError, ValidationError } from '../resolvers/errors';

const TokenRef = builder.prismaNode('Token', {
  id: { field: 'id' },
  readAuth: (token, ctx) => {
    if (!ctx.principal) return false;
    assertCanReadToken(ctx.principal, token);
    return true;
  },
  fields: (t) => ({
    kind: t.expose('kind', { type: TokenKindEnum }),
    name: t.exposeString('name'),
    prefix: t.exposeString('prefix'),
    scopes: t.exposeStringList('scopes'),
    createdAt: t.expose('createdAt', { type: 'DateTime' }),
    expiresAt: t.expose('expiresAt', { type: 'DateTime', nullable: true }),
    lastUsedAt: t.expose('lastUsedAt', { type: 'DateTime', nullable: true }),
    revokedAt: t.expose('revokedAt', { type: 'DateTime', nullable: true }),
  }),
});

const CreateTokenInput = builder.inputType('CreateTokenInput', {
  fields: (t) => ({
    name: t.string({ description: 'For service-account tokens, also the service account name.' }),
    scopes: t.stringList(),
    expiresAt: t.field({ type: 'DateTime', required: false }),
  }),
});

const CreateTokenSuccess = builder
  .objectRef<{ token: Token; secret: string }>('CreateTokenSuccess')
  .implement({
    fields: (t) => ({
      token: t.field({ type: TokenRef, resolve: (p) => p.token }),
      secret: t.exposeString('secret', {
        description: 'The token itself. Shown once; only its hash is stored.',
      }),
    }),
  });

// Both token mutations return the one CreateTokenPayload union (SPEC §11), so it is declared here
// rather than generated per field by the errors plugin.
const CreateTokenPayload = builder.unionType('CreateTokenPayload', {
  types: [CreateTokenSuccess, ...COMMON_ERRORS],
  // Errors arrive wrapped by wrapOrThrow (below); the wrapper remembers which error class it holds.
  resolveType: (value) => errorTypeMap.get(value as object)?.name ?? 'CreateTokenSuccess',
});

async function asPayload<T>(work: () => Promise<T>): Promise<T | DomainError> {
  try {
    return await work();
  } catch (error) {
    // graphql-js throws any Error instance a resolver returns, so a DomainError must travel wrapped,
    // exactly as the errors plugin does for the payloads it generates.
    return wrapOrThrow(error, [ValidationError, NotFoundError, ConflictError]) as DomainError;
  }
}

builder.mutationField('createPersonalAccessToken', (t) =>
  t.field({
    type: CreateTokenPayload,
    authScopes: { scope: 'tokens:write' },
    args: { input: t.arg({ type: CreateTokenInput }) },
    resolve: (_root, { input }, ctx) =>
      asPayload(() => {
        const p = ctx.principal!;
        assertScope(p, 'tokens:write');
        return ctx.services.tokens.createPersonalAccessToken(p, input);
      }),
  }),
);

builder.mutationField('createServiceAccountToken', (t) =>
  t.field({
    type: CreateTokenPayload,
    authScopes: { scope: 'tokens:write' },
    args: { input: t.arg({ type: CreateTokenInput }) },
    resolve: (_root, { input }, ctx) =>
      asPayload(() => {
        const p = ctx.principal!;
        assertScope(p, 'tokens:write');
        authorize(p, 'token.mint');
        return ctx.services.tokens.createServiceAccountToken(p, input);
      }),
  }),
);

const RevokeTokenInput = builder.inputType('RevokeTokenInput', {
  fields: (t) => ({ tokenId: t.id() }),
});

const RevokeTokenSuccess = successType('RevokeTokenSuccess', 'token', TokenRef);

builder.mutationField('revokeToken', (t) =>
  t.field({
    type: RevokeTokenSuccess,
    authScopes: { human: true },
    errors: { types: COMMON_ERRORS },
    args: { input: t.arg({ type: RevokeTokenInput }) },
    resolve: async (_root, { input }, ctx) => {
      const id = parseId(String(input.tokenId), 'Token', ['input', 'tokenId']);
      const token = await ctx.services.tokens.revokeAs(ctx.principal!, id);
      await ctx.services.events.tokenRevoked(id);
      return { token };
    },
  }),
);
