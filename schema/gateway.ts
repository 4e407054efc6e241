// Session.llmUsage (R-LLM-1), Sandbox.previewUrl, share links (R-PRV-1..3). Rules live in
// resolvers/gateway/.
import { builder } from './builder';
import { COMMON_ERRORS } from './errors';
import { assertCanReadShareLink } from '../resolvers/auth/authz';

const LlmUsage = builder
  .objectRef<{ requests: number; inputTokens: bigint; outputTokens: bigint }>('LlmUsage')
  .implement({
    description:
      "Token usage of a session's calls through the LLM gateway, from the upstream's usage fields.",
    fields: (t) => ({
      requests: t.exposeInt('requests'),
      inputTokens: t.float({ resolve: (u) => Number(u.inputTokens) }),
      outputTokens: t.float({ resolve: (u) => Number(u.outputTokens) }),
    }),
  });

builder.prismaObjectField('Session', 'llmUsage', (t) =>
  t.field({
    type: LlmUsage,
    select: { llmUsage: true },
    resolve: (session) => session.llmUsage ?? { requests: 0, inputTokens: 0n, outputTokens: 0n },
  }),
);

// --- previews and share links (R-PRV-1..5) --------------------------------------------------------

const PreviewFormEnum = builder.enumType('PreviewForm', {
  values: {
    PATH: {
      description: 'The same URL as SUBDOMAIN: previews are served only from the preview site.',
      deprecationReason: 'Path previews on the API origin are gone; every preview has its own origin.',
    },
    SUBDOMAIN: {
      description:
        'p<port>-<sandbox-id>.<preview domain> (SINGULACOMP_PREVIEW_DOMAIN, default *.localhost): an origin of its own; HTTP and WebSocket.',
    },
  } as const,
});

const PreviewUrl = builder.objectRef<{ url: string; expiresAt: Date }>('PreviewUrl').implement({
  description: 'A signed URL; opening it sets a cookie scoped to this preview, so a browser needs no token.',
  fields: (t) => ({
    url: t.exposeString('url'),
    expiresAt: t.expose('expiresAt', { type: 'DateTime', description: 'Open the URL before this instant.' }),
  }),
});

builder.prismaObjectField('Sandbox', 'previewUrl', (t) =>
  t.field({
    type: PreviewUrl,
    args: {
      port: t.arg.int(),
      form: t.arg({ type: PreviewFormEnum, required: false, description: 'Default: SUBDOMAIN.' }),
    },
    select: { id: true, sessionId: true, accountId: true },
    resolve: (sandbox, args, ctx) =>
      ctx.services.access.previewUrl(ctx.principal!, sandbox, args.port, args.form ?? 'SUBDOMAIN'),
  }),
);

const ShareLinkModeEnum = builder.enumType('ShareLinkMode', {
  values: {
    VIEW_ONLY: { description: 'GET and HEAD only, no WebSocket.' },
    INTERACTIVE: { description: 'Every method and WebSocket upgrades.' },
  } as const,
});

export const ShareLinkRef = builder.prismaNode('ShareLink', {
  id: { field: 'id' },
  readAuth: (link, ctx) => {
    if (!ctx.principal) return false;
    assertCanReadShareLink(ctx.principal, link);
    return true;
  },
  fields: (t) => ({
    port: t.exposeInt('port'),
    mode: t.expose('mode', { type: ShareLinkModeEnum }),
    expiresAt: t.expose('expiresAt', { type: 'DateTime' }),
    revokedAt: t.expose('revokedAt', { type: 'DateTime', nullable: true }),
    createdAt: t.expose('createdAt', { type: 'DateTime' }),
    active: t.boolean({
      resolve: (link, _args, ctx) => ctx.services.access.shareLinkActive(link),
    }),
  }),
});

builder.prismaObjectField('Sandbox', 'shareLinks', (t) =>
  t.relation('shareLinks', { query: { orderBy: [{ createdAt: 'desc' }, { id: 'desc' }] } }),
);

const CreateShareLinkInput = builder.inputType('CreateShareLinkInput', {
  fields: (t) => ({
    sandboxId: t.id({ description: 'Global id or UUID.' }),
    port: t.int(),
    mode: t.field({ type: ShareLinkModeEnum }),
    expiresAt: t.field({ type: 'DateTime' }),
  }),
});

builder.mutationField('createShareLink', (t) =>
  t.field({
    type: builder
      .objectRef<{ link: import('../prisma/generated/client/client').ShareLink; url: string }>(
        'CreateShareLinkSuccess',
      )
      .implement({
        fields: (f) => ({
          shareLink: f.field({ type: ShareLinkRef, resolve: (p) => p.link }),
          url: f.exposeString('url', {
            description: 'The public URL (shown once; only its hash is stored).',
          }),
        }),
      }),
    authScopes: { scope: 'sessions:write' },
    errors: { types: COMMON_ERRORS },
    args: { input: t.arg({ type: CreateShareLinkInput }) },
    resolve: (_root, { input }, ctx) =>
      ctx.services.access.createShareLink(ctx.principal!, { ...input, sandboxId: String(input.sandboxId) }),
  }),
);

const RevokeShareLinkInput = builder.inputType('RevokeShareLinkInput', {
  fields: (t) => ({ shareLinkId: t.id() }),
});

builder.mutationField('revokeShareLink', (t) =>
  t.field({
    type: builder
      .objectRef<{ link: import('../prisma/generated/client/client').ShareLink }>('RevokeShareLinkSuccess')
      .implement({
        fields: (f) => ({ shareLink: f.field({ type: ShareLinkRef, resolve: (p) => p.link }) }),
      }),
    authScopes: { scope: 'sessions:write' },
    errors: { types: COMMON_ERRORS },
    args: { input: t.arg({ type: RevokeShareLinkInput }) },
    resolve: async (_root, { input }, ctx) => ({
      link: await ctx.services.access.revokeShareLink(ctx.principal!, {
        shareLinkId: String(input.shareLinkId),
      }),
    }),
  }),
);
