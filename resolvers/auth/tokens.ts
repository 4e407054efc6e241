// The three token families (R-AUTH-2, R-AUTH-3): personal access tokens, service-account tokens and
// the in-sandbox JWT. Secrets are shown once; only SHA-256 hashes are stored.
import { createHash, randomBytes, randomUUID } from 'node:crypto';
import { crc32 } from 'node:zlib';
import { SignJWT, jwtVerify } from 'jose';
import type { Db } from '../platform';
import type { Prisma, Token } from '../../prisma/generated/client/client';
import { NotFoundError, ValidationError, forbidden, unauthenticated } from '../errors';
import { assertCanReadTokens, assertCanRevokeToken } from './authz';
import { type HumanPrincipal, type Principal, SCOPES, type SandboxPrincipal } from './principal';
import { authorize, can } from './policy';

export const PAT_PREFIX = 'singulacomp_pat_';
export const SA_PREFIX = 'singulacomp_sa_';
/** Invitation tokens (one-time, redeemed by acceptInvitation; never a credential). */
export const INV_PREFIX = 'singulacomp_inv_';
const BASE62 = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';
const BODY_LENGTH = 32;
const CHECKSUM_LENGTH = 6;
const JWT_ISSUER = 'singulacomp';
const JWT_AUDIENCE = 'singulacomp-sandbox';

function base62(bytes: Buffer, length: number): string {
  let out = '';
  for (const b of bytes) {
    // Rejection sampling keeps the alphabet uniform.
    if (b < 248) out += BASE62[b % 62];
    if (out.length === length) break;
  }
  return out.length === length ? out : out + base62(randomBytes(length), length - out.length);
}

function encodeChecksum(value: number): string {
  let n = value >>> 0;
  let out = '';
  for (let i = 0; i < CHECKSUM_LENGTH; i++) {
    out = BASE62[n % 62] + out;
    n = Math.floor(n / 62);
  }
  return out;
}

function checksum(prefixAndBody: string): string {
  return encodeChecksum(crc32(prefixAndBody));
}

export function generateOpaqueToken(
  prefix: typeof PAT_PREFIX | typeof SA_PREFIX | typeof INV_PREFIX,
): string {
  const body = base62(randomBytes(48), BODY_LENGTH);
  return `${prefix}${body}${checksum(prefix + body)}`;
}

/**
 * A new personal access token of `owner`: its secret (shown once) and the row that stores only its
 * hash. Validation is the caller's (TokenService.createPersonalAccessToken, or the bootstrap admin).
 */
export function newPersonalAccessToken(
  owner: { accountId: string; userId: string },
  input: CreateTokenInput,
): { secret: string; data: Prisma.TokenUncheckedCreateInput } {
  const secret = generateOpaqueToken(PAT_PREFIX);
  return {
    secret,
    data: {
      kind: 'PERSONAL_ACCESS',
      name: input.name.trim(),
      prefix: displayPrefix(secret),
      hash: hashToken(secret),
      scopes: [...new Set(input.scopes)],
      accountId: owner.accountId,
      userId: owner.userId,
      expiresAt: input.expiresAt ?? null,
    },
  };
}

/** Structural check of an opaque credential (PAT or service-account token), including its checksum: no database involved. */
export function isWellFormedOpaqueToken(token: string): boolean {
  const prefix = token.startsWith(PAT_PREFIX) ? PAT_PREFIX : token.startsWith(SA_PREFIX) ? SA_PREFIX : null;
  return prefix !== null && hasValidBody(token, prefix);
}

/** Structural check of an invitation token. */
export function isWellFormedInvitationToken(token: string): boolean {
  return token.startsWith(INV_PREFIX) && hasValidBody(token, INV_PREFIX);
}

function hasValidBody(token: string, prefix: string): boolean {
  if (token.length !== prefix.length + BODY_LENGTH + CHECKSUM_LENGTH) return false;
  const body = token.slice(prefix.length, prefix.length + BODY_LENGTH);
  if (!/^[0-9A-Za-z]+$/.test(body)) return false;
  return token.slice(-CHECKSUM_LENGTH) === checksum(prefix + body);
}

export function hashToken(token: string): string {
  return createHash('sha256').update(token).digest('hex');
}

function displayPrefix(token: string): string {
  const family = token.startsWith(PAT_PREFIX) ? PAT_PREFIX : SA_PREFIX;
  return token.slice(0, family.length + 4);
}

interface CacheEntry {
  principal: Principal;
  cachedUntil: number;
}

export interface TokenServiceOptions {
  db: Db;
  jwtKey: Uint8Array;
  /** How long an authenticated token is trusted without re-reading its row. @default 5_000 */
  cacheTtlMs?: number;
  /** Minimum spacing of lastUsedAt writes per token. @default 60_000 */
  lastUsedResolutionMs?: number;
  now?: () => number;
}

export interface CreateTokenInput {
  name: string;
  scopes: string[];
  expiresAt?: Date | null;
}

export type TokenService = ReturnType<typeof createTokenService>;

export function createTokenService(options: TokenServiceOptions) {
  const { db, jwtKey } = options;
  const cacheTtlMs = options.cacheTtlMs ?? 5_000;
  const lastUsedResolutionMs = options.lastUsedResolutionMs ?? 60_000;
  const now = options.now ?? Date.now;
  const cache = new Map<string, CacheEntry>();
  const lastUsedWrites = new Map<string, number>();
  const revokedListeners = new Set<(tokenId: string) => void>();
  /** Bumped by every forget(): caches built on authentication (the gateway's) compare it. */
  let revocations = 0;

  function remember(key: string, principal: Principal): void {
    if (cache.size > 10_000) cache.delete(cache.keys().next().value as string);
    cache.set(key, { principal, cachedUntil: now() + cacheTtlMs });
  }

  function touch(tokenId: string): void {
    const last = lastUsedWrites.get(tokenId) ?? 0;
    if (now() - last < lastUsedResolutionMs) return;
    lastUsedWrites.set(tokenId, now());
    db.token.update({ where: { id: tokenId }, data: { lastUsedAt: new Date(now()) } }).catch(() => {
      lastUsedWrites.delete(tokenId);
    });
  }

  function validateCreate(caller: HumanPrincipal, input: CreateTokenInput): void {
    const name = input.name.trim();
    if (name.length < 1 || name.length > 100 || name.includes('\0')) {
      throw new ValidationError('Token name must be 1 to 100 characters, without NUL.', ['input', 'name']);
    }
    if (input.scopes.length === 0) {
      throw new ValidationError(`Give at least one scope: ${SCOPES.join(', ')}.`, ['input', 'scopes']);
    }
    const unknown = input.scopes.filter((s) => !(SCOPES as readonly string[]).includes(s));
    if (unknown.length > 0) {
      throw new ValidationError(`Unknown scope ${unknown.join(', ')}; valid: ${SCOPES.join(', ')}.`, [
        'input',
        'scopes',
      ]);
    }
    const notHeld = input.scopes.filter((s) => !caller.scopes.has(s));
    if (notHeld.length > 0)
      throw forbidden(`A token cannot grant scopes its creator lacks: ${notHeld.join(', ')}.`);
    if (input.expiresAt && input.expiresAt.getTime() <= now()) {
      throw new ValidationError('expiresAt must be in the future.', ['input', 'expiresAt']);
    }
  }

  return {
    onRevoked(listener: (tokenId: string) => void): () => void {
      revokedListeners.add(listener);
      return () => revokedListeners.delete(listener);
    },

    /**
     * Changes whenever a token is revoked, here or on another server process (forget). A cache of
     * anything a revoked token may have unlocked (a sandbox's daemon target) compares it on every
     * hit, so a revocation empties it at once.
     */
    revocationEpoch(): number {
      return revocations;
    },

    /** Drops cached state for a token revoked here or on another server process. */
    forget(tokenId: string): void {
      revocations++;
      for (const [key, entry] of cache) if (entry.principal.tokenId === tokenId) cache.delete(key);
    },

    async createPersonalAccessToken(caller: HumanPrincipal, input: CreateTokenInput) {
      authorize(caller, 'token.mintPersonal');
      if (caller.kind !== 'USER') throw forbidden('Only users hold personal access tokens.');
      validateCreate(caller, input);
      const { secret, data } = newPersonalAccessToken(caller, input);
      const token = await db.token.create({ data });
      return { token, secret };
    },

    async createServiceAccountToken(caller: HumanPrincipal, input: CreateTokenInput) {
      validateCreate(caller, input);
      const name = input.name.trim();
      const secret = generateOpaqueToken(SA_PREFIX);
      const token = await db.$transaction(async (tx) => {
        const account = await tx.serviceAccount.upsert({
          where: { accountId_name: { accountId: caller.accountId, name } },
          create: { accountId: caller.accountId, name },
          update: {},
        });
        return tx.token.create({
          data: {
            kind: 'SERVICE_ACCOUNT',
            name,
            prefix: displayPrefix(secret),
            hash: hashToken(secret),
            scopes: [...new Set(input.scopes)],
            accountId: caller.accountId,
            serviceAccountId: account.id,
            expiresAt: input.expiresAt ?? null,
          },
        });
      });
      return { token, secret };
    },

    /** Mints the in-sandbox JWT for a session (R-AUTH-3); its row makes it revocable. */
    async mintSandboxToken(claims: {
      accountId: string;
      userId: string | null;
      projectId: string;
      sessionId: string;
      sandboxId: string;
      agent: string;
    }): Promise<string> {
      const id = randomUUID();
      const jwt = await new SignJWT({
        acc: claims.accountId,
        prj: claims.projectId,
        sid: claims.sessionId,
        sbx: claims.sandboxId,
        agt: claims.agent,
      })
        .setProtectedHeader({ alg: 'HS256', typ: 'JWT' })
        .setIssuer(JWT_ISSUER)
        .setAudience(JWT_AUDIENCE)
        .setSubject(claims.userId ?? `session:${claims.sessionId}`)
        .setJti(id)
        .setIssuedAt()
        .sign(jwtKey);
      await db.token.create({
        data: {
          id,
          kind: 'SANDBOX',
          name: `sandbox ${claims.sessionId}`,
          prefix: jwt.slice(0, 12),
          hash: hashToken(jwt),
          scopes: ['sandbox'],
          accountId: claims.accountId,
          userId: claims.userId,
          sessionId: claims.sessionId,
        },
      });
      return jwt;
    },

    /** Revokes `tokenId` for `principal` (assertCanRevokeToken); not-found for other accounts' ids. */
    async revokeAs(principal: Principal, tokenId: string): Promise<Token> {
      const token = await db.token.findUnique({ where: { id: tokenId } });
      if (!token || principal.accountId !== token.accountId || token.kind === 'SANDBOX') {
        throw new NotFoundError('No token with that id in your account.', ['input', 'tokenId']);
      }
      assertCanRevokeToken(principal, token);
      await this.revoke(tokenId);
      return db.token.findUniqueOrThrow({ where: { id: tokenId } });
    },

    /** Which tokens `principal` may list (viewer.tokens): needs tokens:read. */
    visibleTokensWhere(principal: Principal, includeRevoked: boolean) {
      assertCanReadTokens(principal);
      const everyone = can(principal, 'token.readAll');
      return {
        accountId: principal.accountId,
        kind: { in: ['PERSONAL_ACCESS' as const, 'SERVICE_ACCOUNT' as const] },
        ...(everyone || principal.kind !== 'USER' ? {} : { userId: principal.userId }),
        ...(includeRevoked ? {} : { revokedAt: null }),
      };
    },

    /** viewer.tokens: the tokens `principal` may list, newest first (`query`: the GraphQL selection). */
    listVisible<Q extends object>(principal: Principal, includeRevoked: boolean, query?: Q) {
      return db.token.findMany({
        ...(query ?? {}),
        where: this.visibleTokensWhere(principal, includeRevoked),
        orderBy: [{ createdAt: 'desc' }, { id: 'desc' }],
      });
    },

    /**
     * The tokens that still authenticate now, as a filter: neither revoked nor past `expiresAt` on
     * this service's clock (`authenticate` refuses the others). ServiceAccount.activeTokenCount counts
     * a service account's tokens under it.
     */
    activeWhere() {
      return {
        revokedAt: null,
        OR: [{ expiresAt: null }, { expiresAt: { gt: new Date(now()) } }],
      } satisfies Prisma.TokenWhereInput;
    },

    /** Those of `tokenIds` that exist and are not revoked (a connection's safety net for lost revocations). */
    async unrevoked(tokenIds: readonly string[]): Promise<Set<string>> {
      const rows = await db.token.findMany({
        where: { id: { in: [...tokenIds] }, revokedAt: null },
        select: { id: true },
      });
      return new Set(rows.map((row) => row.id));
    },

    /** True once `principal`'s token is past its expiry on this service's clock. */
    expired(principal: Principal): boolean {
      return principal.expiresAt !== null && principal.expiresAt.getTime() <= now();
    },

    /** Milliseconds until `principal`'s token expires on this service's clock (null: it never does). */
    msUntilExpiry(principal: Principal): number | null {
      return principal.expiresAt === null ? null : principal.expiresAt.getTime() - now();
    },

    async revoke(tokenId: string): Promise<void> {
      await db.token.updateMany({
        where: { id: tokenId, revokedAt: null },
        data: { revokedAt: new Date(now()) },
      });
      this.forget(tokenId);
      for (const listener of revokedListeners) listener(tokenId);
    },

    /** Revokes the session's sandbox tokens (when the session stops); returns their ids. */
    async revokeSessionTokens(sessionId: string): Promise<string[]> {
      const tokens = await db.token.findMany({
        where: { sessionId, kind: 'SANDBOX', revokedAt: null },
        select: { id: true },
      });
      if (tokens.length === 0) return [];
      await db.token.updateMany({
        where: { id: { in: tokens.map((t) => t.id) } },
        data: { revokedAt: new Date(now()) },
      });
      const ids = tokens.map((t) => t.id);
      this.announceRevoked(ids);
      return ids;
    },

    /**
     * Tells this process's caches and the other server processes (the revocation listeners) that
     * these tokens are revoked. Idempotent: teardown says it again once the sandbox is STOPPING.
     */
    announceRevoked(tokenIds: readonly string[]): void {
      for (const id of tokenIds) {
        this.forget(id);
        for (const listener of revokedListeners) listener(id);
      }
    },

    /**
     * Resolves an Authorization header value to a principal. Returns null when no credential was
     * sent; throws UNAUTHENTICATED for anything malformed, unknown, expired or revoked.
     */
    async authenticate(authorization: string | null | undefined): Promise<Principal | null> {
      if (!authorization) return null;
      const match = /^Bearer\s+(\S+)\s*$/i.exec(authorization);
      if (!match?.[1]) throw unauthenticated('Malformed Authorization header: expected "Bearer <token>".');
      const token = match[1];
      const cached = cache.get(token);
      if (cached && cached.cachedUntil > now()) {
        if (cached.principal.expiresAt && cached.principal.expiresAt.getTime() <= now()) {
          throw unauthenticated('Token expired.');
        }
        touch(cached.principal.tokenId);
        return cached.principal;
      }
      const principal = token.startsWith('singulacomp_')
        ? await this.authenticateOpaque(token)
        : await this.authenticateSandbox(token);
      remember(token, principal);
      touch(principal.tokenId);
      return principal;
    },

    async authenticateOpaque(token: string): Promise<Principal> {
      // The checksum rejects typos and forgeries before any database round trip.
      if (!isWellFormedOpaqueToken(token)) throw unauthenticated('Invalid token.');
      const row = await db.token.findUnique({
        where: { hash: hashToken(token) },
        include: { user: { select: { role: true } } },
      });
      if (!row || row.kind === 'SANDBOX') throw unauthenticated('Invalid token.');
      if (row.revokedAt) throw unauthenticated('Token revoked.');
      if (row.expiresAt && row.expiresAt.getTime() <= now()) throw unauthenticated('Token expired.');
      const scopes = new Set(row.scopes);
      if (row.kind === 'PERSONAL_ACCESS' && row.userId) {
        return {
          kind: 'USER',
          userId: row.userId,
          accountId: row.accountId,
          isAdmin: row.user?.role === 'ADMIN',
          scopes,
          tokenId: row.id,
          expiresAt: row.expiresAt,
        };
      }
      if (row.kind === 'SERVICE_ACCOUNT' && row.serviceAccountId) {
        return {
          kind: 'SERVICE_ACCOUNT',
          serviceAccountId: row.serviceAccountId,
          accountId: row.accountId,
          scopes,
          tokenId: row.id,
          expiresAt: row.expiresAt,
        };
      }
      throw unauthenticated('Invalid token.');
    },

    async authenticateSandbox(token: string): Promise<SandboxPrincipal> {
      let payload: Awaited<ReturnType<typeof jwtVerify>>['payload'];
      try {
        ({ payload } = await jwtVerify(token, jwtKey, {
          issuer: JWT_ISSUER,
          audience: JWT_AUDIENCE,
          algorithms: ['HS256'],
        }));
      } catch {
        throw unauthenticated('Invalid token.');
      }
      const row = payload.jti ? await db.token.findUnique({ where: { id: payload.jti } }) : null;
      if (row?.kind !== 'SANDBOX' || row.hash !== hashToken(token)) throw unauthenticated('Invalid token.');
      if (row.revokedAt) throw unauthenticated('Token revoked.');
      const claim = (name: string) => {
        const value = payload[name];
        if (typeof value !== 'string') throw unauthenticated('Invalid token.');
        return value;
      };
      return {
        kind: 'SANDBOX',
        accountId: claim('acc'),
        userId: row.userId,
        projectId: claim('prj'),
        sessionId: claim('sid'),
        sandboxId: claim('sbx'),
        agent: claim('agt'),
        tokenId: row.id,
        expiresAt: payload.exp ? new Date(payload.exp * 1000) : null,
      };
    },
  };
}
