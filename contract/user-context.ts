// The X-SingulaComp-User-Context header (docs/agent-api.md). The server imports `signUserContext`
// from here, so this module depends on node:crypto only.
import type * as NodeCrypto from 'node:crypto';

/**
 * node:crypto, loaded on the first signature or check: loading it costs a process about 3 MiB, and
 * an idle daemon (no request yet through its proxy) never needs it.
 */
let loadedCrypto: typeof NodeCrypto | undefined;
const crypto = (): typeof NodeCrypto => {
  loadedCrypto ??= process.getBuiltinModule('node:crypto');
  return loadedCrypto;
};

export const USER_CONTEXT_HEADER = 'x-singulacomp-user-context';
/** Longest lifetime (`exp - iat`) the daemon accepts. */
export const USER_CONTEXT_MAX_TTL_SECONDS = 300;

/** How far in the future a header's `iat` may lie (clock skew between server and sandbox). */
export const USER_CONTEXT_MAX_SKEW_SECONDS = 30;

/**
 * What a header lets its request reach in the daemon (R-PRV-5): `control` the daemon's own routes
 * (`/singulacomp/*`) and nothing else; `opencode` OpenCode's API (the agent proxy, R-CONV-2);
 * `app` one sandbox port named in the claims (previews and share links), whatever the path, never
 * the daemon's or OpenCode's port. Preview and share traffic is only ever signed `app`, so no
 * request of theirs can carry the credential the control routes take.
 */
export type UserContextAudience = 'control' | 'opencode' | 'app';

const AUDIENCES: ReadonlySet<string> = new Set<UserContextAudience>(['control', 'opencode', 'app']);

export interface UserContextClaims {
  sid: string;
  sub: string;
  iat: number;
  exp: number;
  aud: UserContextAudience;
  /** The sandbox port an `app` header reaches. */
  port?: number;
}

export interface SignUserContextInput {
  sessionId: string;
  userId: string;
  audience: UserContextAudience;
  /** Required for the `app` audience: the one port the request may reach. */
  port?: number;
  /** @default 300 */
  ttlSeconds?: number;
  /** Issue time in unix seconds. @default now */
  nowSeconds?: number;
}

export type VerifyUserContextResult =
  | { ok: true; claims: UserContextClaims }
  | { ok: false; status: 401 | 403; reason: string };

function keyFor(token: string): Buffer {
  return crypto().createHash('sha256').update(`singulacomp-user-context\0${token}`).digest();
}

function signature(payload: string, token: string): Buffer {
  return crypto().createHmac('sha256', keyFor(token)).update(`v1.${payload}`).digest();
}

export function signUserContext(input: SignUserContextInput, token: string): string {
  const iat = input.nowSeconds ?? Math.floor(Date.now() / 1000);
  const ttl = Math.min(input.ttlSeconds ?? USER_CONTEXT_MAX_TTL_SECONDS, USER_CONTEXT_MAX_TTL_SECONDS);
  if (input.audience === 'app' && input.port === undefined)
    throw new Error('an app user context names its port');
  const claims: UserContextClaims = {
    sid: input.sessionId,
    sub: input.userId,
    iat,
    exp: iat + ttl,
    aud: input.audience,
    ...(input.audience === 'app' ? { port: input.port } : {}),
  };
  const payload = Buffer.from(JSON.stringify(claims)).toString('base64url');
  return `v1.${payload}.${signature(payload, token).toString('base64url')}`;
}

export function verifyUserContext(
  header: string | string[] | undefined,
  token: string,
  sessionId: string,
  nowSeconds: number = Math.floor(Date.now() / 1000),
): VerifyUserContextResult {
  return verifyWithKey(header, keyFor(token), sessionId, nowSeconds).result;
}

/** The signature and claims of a header (what never changes for the same bytes), or a refusal. */
function checkSigned(
  header: string | string[] | undefined,
  key: Buffer,
): { claims: UserContextClaims } | { refused: VerifyUserContextResult & { ok: false } } {
  if (typeof header !== 'string' || header.length === 0) {
    return { refused: { ok: false, status: 401, reason: 'missing user context' } };
  }
  const parts = header.split('.');
  if (parts.length !== 3 || parts[0] !== 'v1' || !parts[1] || !parts[2]) {
    return { refused: { ok: false, status: 401, reason: 'malformed user context' } };
  }
  const payload = parts[1];
  const given = Buffer.from(parts[2], 'base64url');
  const expected = crypto().createHmac('sha256', key).update(`v1.${payload}`).digest();
  if (given.length !== expected.length || !crypto().timingSafeEqual(given, expected)) {
    return { refused: { ok: false, status: 401, reason: 'bad user context signature' } };
  }
  let claims: UserContextClaims;
  try {
    claims = JSON.parse(Buffer.from(payload, 'base64url').toString('utf8')) as UserContextClaims;
  } catch {
    return { refused: { ok: false, status: 401, reason: 'malformed user context payload' } };
  }
  if (
    typeof claims.sid !== 'string' ||
    typeof claims.sub !== 'string' ||
    !Number.isFinite(claims.iat) ||
    !Number.isFinite(claims.exp) ||
    typeof claims.aud !== 'string' ||
    !AUDIENCES.has(claims.aud) ||
    (claims.aud === 'app' && !(Number.isInteger(claims.port) && claims.port! >= 1 && claims.port! <= 65_535))
  ) {
    return { refused: { ok: false, status: 401, reason: 'malformed user context claims' } };
  }
  return { claims };
}

/** The checks that depend on the clock and the session, run on every request. */
function checkClaims(
  claims: UserContextClaims,
  sessionId: string,
  nowSeconds: number,
): VerifyUserContextResult {
  if (claims.exp <= nowSeconds) return { ok: false, status: 401, reason: 'user context expired' };
  // A header minted for the future would outlive the TTL cap; 30 s absorbs clock skew.
  if (claims.iat > nowSeconds + USER_CONTEXT_MAX_SKEW_SECONDS) {
    return { ok: false, status: 401, reason: 'user context issued in the future' };
  }
  if (claims.exp - claims.iat > USER_CONTEXT_MAX_TTL_SECONDS) {
    return { ok: false, status: 401, reason: 'user context lifetime too long' };
  }
  if (claims.sid !== sessionId)
    return { ok: false, status: 403, reason: 'user context is for another session' };
  return { ok: true, claims };
}

function verifyWithKey(
  header: string | string[] | undefined,
  key: Buffer,
  sessionId: string,
  nowSeconds: number,
): { result: VerifyUserContextResult; claims: UserContextClaims | null } {
  const signed = checkSigned(header, key);
  if ('refused' in signed) return { result: signed.refused, claims: null };
  return { result: checkClaims(signed.claims, sessionId, nowSeconds), claims: signed.claims };
}

/** Distinct headers a verifier remembers; a header lives at most 300 s, so few are live at once. */
const VERIFIED_CACHE_SIZE = 256;

/**
 * `verifyUserContext` for one token and session, for a server that checks every request: the HMAC
 * key is derived once, and a header whose signature and claims were verified is remembered by its
 * exact bytes, so a repeated header costs a map lookup. The clock and session checks (expiry,
 * issue time, lifetime, session) still run on every call; only headers with a valid signature are
 * remembered, and the oldest is dropped past VERIFIED_CACHE_SIZE.
 */
export class UserContextVerifier {
  /** Derived on the first check (see `crypto` above). */
  private key: Buffer | undefined;
  private readonly verified = new Map<string, UserContextClaims>();

  constructor(
    private readonly token: string,
    private readonly sessionId: string,
  ) {}

  verify(
    header: string | string[] | undefined,
    nowSeconds: number = Math.floor(Date.now() / 1000),
  ): VerifyUserContextResult {
    if (typeof header === 'string') {
      const claims = this.verified.get(header);
      if (claims) {
        const result = checkClaims(claims, this.sessionId, nowSeconds);
        if (!result.ok && claims.exp <= nowSeconds) this.verified.delete(header);
        return result;
      }
    }
    this.key ??= keyFor(this.token);
    const { result, claims } = verifyWithKey(header, this.key, this.sessionId, nowSeconds);
    if (claims && typeof header === 'string' && claims.exp > nowSeconds) {
      if (this.verified.size >= VERIFIED_CACHE_SIZE) {
        this.verified.delete(this.verified.keys().next().value as string);
      }
      this.verified.set(header, claims);
    }
    return result;
  }
}
