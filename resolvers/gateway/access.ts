// Who may reach what inside a sandbox over HTTP (R-CONV-2, R-PRV-1, R-PRV-2, R-PRV-3): the agent
// proxy for users with write access to the session, previews for readers of the sandbox (API token
// or a short-lived signed URL turned into a cookie scoped to one preview), and public share links
// whose secret is stored hashed. None of these touch leases or the idle clock (R-LEASE-2). The
// transports are server/agent-proxy.ts and server/preview-proxy.ts.
import { createHash, createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import type { ShareLinkMode } from '../../prisma/generated/client/client';
import type { Db } from '../platform';
import { assertCanReadSession, assertCanWriteSession } from '../auth/authz';
import type { Principal } from '../auth/principal';
import type { TokenService } from '../auth/tokens';
import { type DaemonTarget, contextUserId } from '../daemon/daemon-client';
import { NotFoundError, ValidationError, badUserInput, forbidden } from '../errors';
import { parseId } from '../ids';

/** The daemon's service port: never proxied (R-PRV-1). */
export const SERVICE_PORT = 8000;
/** OpenCode's own port and SSH: never behind a public link (R-PRV-2). */
export const SHARE_BLOCKED_BASE = [22, 4096, SERVICE_PORT] as const;

/** Answered by the transports as an HTTP status with a JSON `{ error }` body. */
export class AccessError extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

export interface ProxyGrant {
  target: DaemonTarget;
  /** Who the daemon sees in the user context. */
  userId: string;
  /** Sandbox port to reach; null for OpenCode itself (the agent proxy). */
  port: number | null;
}

export type PreviewForm = 'PATH' | 'SUBDOMAIN';

export interface AccessServiceOptions {
  db: Db;
  tokens: TokenService;
  /** Key for signed preview URLs and cookies. */
  signingKey: Buffer;
  fileSharePort: number;
  previewUrlTtlSeconds: number;
  /** host[:port] of subdomain previews; null: the API host when it is a DNS name. */
  previewDomain: string | null;
  apiUrl: () => string;
  now?: () => number;
}

export type AccessService = ReturnType<typeof createAccessService>;

function hashSecret(secret: string): string {
  return createHash('sha256').update(secret).digest('hex');
}

export function validPort(port: number): boolean {
  return Number.isInteger(port) && port >= 1 && port <= 65_535;
}

export function createAccessService(options: AccessServiceOptions) {
  const { db, tokens } = options;
  const now = options.now ?? Date.now;
  const shareBlocked = new Set<number>([...SHARE_BLOCKED_BASE, options.fileSharePort]);

  async function authenticate(authorization: string | undefined): Promise<Principal> {
    let principal: Principal | null;
    try {
      principal = await tokens.authenticate(authorization);
    } catch (error) {
      throw new AccessError(401, (error as Error).message);
    }
    if (!principal)
      throw new AccessError(401, 'Authentication required: send Authorization: Bearer <token>.');
    return principal;
  }

  function denied(error: unknown): never {
    if (error instanceof AccessError) throw error;
    throw new AccessError(403, (error as Error).message);
  }

  function reachable(sandbox: {
    sessionId: string;
    serviceUrl: string | null;
    sandboxTokenEnc: string | null;
    serviceHeadersEnc: string | null;
    status: string;
  }) {
    if (!sandbox.serviceUrl || !sandbox.sandboxTokenEnc || sandbox.status !== 'STARTED') {
      throw new AccessError(503, `The sandbox is not running (${sandbox.status}).`);
    }
    return {
      sessionId: sandbox.sessionId,
      serviceUrl: sandbox.serviceUrl,
      sandboxTokenEnc: sandbox.sandboxTokenEnc,
      serviceHeadersEnc: sandbox.serviceHeadersEnc,
    };
  }

  function sign(payload: string): string {
    return createHmac('sha256', options.signingKey).update(`preview\0${payload}`).digest('base64url');
  }

  /** `<base64url claims>.<mac>` binding one sandbox port and an expiry. */
  function previewToken(sandboxId: string, port: number, userId: string, expiresAtSeconds: number): string {
    const payload = Buffer.from(
      JSON.stringify({ sbx: sandboxId, port, sub: userId, exp: expiresAtSeconds }),
    ).toString('base64url');
    return `${payload}.${sign(payload)}`;
  }

  function verifyPreviewToken(
    token: string,
    sandboxId: string,
    port: number,
  ): { sub: string; exp: number } | null {
    const [payload, mac] = token.split('.');
    if (!payload || !mac) return null;
    const expected = Buffer.from(sign(payload));
    const given = Buffer.from(mac);
    if (expected.length !== given.length || !timingSafeEqual(expected, given)) return null;
    try {
      const claims = JSON.parse(Buffer.from(payload, 'base64url').toString('utf8')) as {
        sbx: string;
        port: number;
        sub: string;
        exp: number;
      };
      if (claims.sbx !== sandboxId || claims.port !== port || claims.exp * 1000 <= now()) return null;
      return { sub: claims.sub, exp: claims.exp };
    } catch {
      return null;
    }
  }

  /** The session a gateway path names, with its sandbox; an unknown or malformed id is a 404. */
  async function sessionWithSandbox(rawSessionId: string) {
    let sessionId: string;
    try {
      sessionId = parseId(rawSessionId, 'Session', ['sessionId']);
    } catch {
      throw new AccessError(404, 'No session with that id.');
    }
    const session = await db.session.findUnique({ where: { id: sessionId }, include: { sandbox: true } });
    if (!session) throw new AccessError(404, 'No session with that id.');
    return session;
  }

  return {
    shareBlocked,

    /** `/v1/sessions/<id>/agent/*`: the caller drives the agent, so it needs write access. */
    async agent(authorization: string | undefined, rawSessionId: string): Promise<ProxyGrant> {
      const principal = await authenticate(authorization);
      const session = await sessionWithSandbox(rawSessionId);
      try {
        if (principal.kind === 'SANDBOX') assertCanReadSession(principal, session);
        else assertCanWriteSession(principal, session);
      } catch (error) {
        denied(error);
      }
      if (!session.sandbox) throw new AccessError(503, `The session has no sandbox (${session.status}).`);
      return { target: reachable(session.sandbox), userId: contextUserId(principal), port: null };
    },

    /** Session attachments: readers of the session. */
    async attachment(authorization: string | undefined, rawSessionId: string): Promise<ProxyGrant> {
      const principal = await authenticate(authorization);
      const session = await sessionWithSandbox(rawSessionId);
      try {
        assertCanReadSession(principal, session);
      } catch (error) {
        denied(error);
      }
      if (!session.sandbox) throw new AccessError(503, `The session has no sandbox (${session.status}).`);
      return { target: reachable(session.sandbox), userId: contextUserId(principal), port: null };
    },

    /**
     * A preview request: an API token in Authorization, or the preview cookie/URL token for this
     * exact sandbox and port. Returns the grant and, for a URL token, the cookie to set.
     */
    async preview(input: {
      authorization: string | undefined;
      previewToken: string | null;
      sandboxId: string;
      port: number;
    }): Promise<ProxyGrant> {
      if (!validPort(input.port)) throw new AccessError(400, 'Not a valid port.');
      if (input.port === SERVICE_PORT)
        throw new AccessError(403, 'Port 8000 is the sandbox service port and is never proxied.');
      let sandboxId: string;
      try {
        sandboxId = parseId(input.sandboxId, 'Sandbox', ['sandboxId']);
      } catch {
        throw new AccessError(404, 'No sandbox with that id.');
      }
      const sandbox = await db.sandbox.findUnique({ where: { id: sandboxId } });
      if (!sandbox) throw new AccessError(404, 'No sandbox with that id.');
      let userId: string;
      const signed = input.previewToken
        ? verifyPreviewToken(input.previewToken, sandbox.id, input.port)
        : null;
      if (signed) {
        userId = signed.sub;
      } else if (input.authorization) {
        const principal = await authenticate(input.authorization);
        try {
          if (principal.kind === 'SANDBOX') {
            if (principal.sessionId !== sandbox.sessionId)
              throw forbidden('A sandbox token can only reach its own sandbox.');
          } else {
            assertCanReadSession(principal, { id: sandbox.sessionId, accountId: sandbox.accountId });
          }
        } catch (error) {
          denied(error);
        }
        userId = contextUserId(principal);
      } else {
        throw new AccessError(
          401,
          input.previewToken
            ? 'The preview link expired or is for another preview; ask for a new previewUrl.'
            : 'Authentication required: open a previewUrl or send Authorization: Bearer <token>.',
        );
      }
      const target = reachable(sandbox);
      // The daemon's own port (whatever it is on this provider) is the service port too.
      if (new URL(target.serviceUrl).port === String(input.port)) {
        throw new AccessError(403, 'The sandbox service port is never proxied.');
      }
      return { target, userId, port: input.port };
    },

    /** The longer-lived token a preview cookie carries once a signed URL was opened. */
    previewCookie(sandboxId: string, port: number, userId: string) {
      const maxAgeSeconds = PREVIEW_COOKIE_MAX_AGE_SECONDS;
      // Over HTTPS, SameSite=None lets a dashboard on another site embed the preview in an iframe.
      const secure = new URL(options.apiUrl()).protocol === 'https:';
      return {
        token: previewToken(sandboxId, port, userId, Math.floor(now() / 1000) + maxAgeSeconds),
        maxAgeSeconds,
        attributes: secure ? 'HttpOnly; Secure; SameSite=None' : 'HttpOnly; SameSite=Lax',
      };
    },

    /** Sandbox.previewUrl: a short-lived URL whose first load sets a cookie scoped to that preview. */
    previewUrl(
      principal: Principal,
      sandbox: { id: string; sessionId: string; accountId: string },
      port: number,
      form: PreviewForm,
    ) {
      // A query field: bad input is a top-level BAD_USER_INPUT error, not a payload type.
      if (!validPort(port)) throw badUserInput('port must be 1 to 65535.', ['port']);
      if (port === SERVICE_PORT)
        throw badUserInput('Port 8000 is the sandbox service port and is never proxied.', ['port']);
      const expiresAt = Math.floor(now() / 1000) + options.previewUrlTtlSeconds;
      const token = previewToken(sandbox.id, port, contextUserId(principal), expiresAt);
      const api = new URL(options.apiUrl());
      let url = `${api.origin}/v1/p/${sandbox.id}/${port}/`;
      if (form === 'SUBDOMAIN') {
        const domain = options.previewDomain ?? (/^[\d.]+$|^\[/.test(api.hostname) ? null : api.host);
        if (!domain) {
          throw badUserInput(
            'Subdomain previews need a DNS name for the API (set SINGULACOMP_PREVIEW_DOMAIN); use form: PATH.',
            ['form'],
          );
        }
        url = `${api.protocol}//p${port}-${sandbox.id}.${domain}/`;
      }
      return {
        url: `${url}?${PREVIEW_QUERY}=${encodeURIComponent(token)}`,
        expiresAt: new Date(expiresAt * 1000),
      };
    },

    /** A share-link request. View-only links allow GET/HEAD without WebSocket. */
    async share(input: {
      secret: string;
      method: string;
      upgrade: boolean;
    }): Promise<ProxyGrant & { linkId: string }> {
      const link = await db.shareLink.findUnique({
        where: { secretHash: hashSecret(input.secret) },
        include: { sandbox: true },
      });
      if (!link) throw new AccessError(404, 'No such share link.');
      if (link.revokedAt) throw new AccessError(410, 'This share link was revoked.');
      if (link.expiresAt.getTime() <= now()) throw new AccessError(410, 'This share link expired.');
      if (shareBlocked.has(link.port))
        throw new AccessError(403, `Port ${link.port} is never reachable through a share link.`);
      if (link.mode === 'VIEW_ONLY') {
        if (input.upgrade)
          throw new AccessError(403, 'A view-only share link does not allow WebSocket connections.');
        if (input.method !== 'GET' && input.method !== 'HEAD') {
          throw new AccessError(405, 'A view-only share link allows only GET and HEAD.');
        }
      }
      return {
        target: reachable(link.sandbox),
        userId: `share-link:${link.id}`,
        port: link.port,
        linkId: link.id,
      };
    },

    async createShareLink(
      principal: Principal,
      input: { sandboxId: string; port: number; mode: ShareLinkMode; expiresAt: Date },
    ) {
      const sandboxId = parseId(input.sandboxId, 'Sandbox', ['input', 'sandboxId']);
      const sandbox = await db.sandbox.findUnique({ where: { id: sandboxId } });
      if (!sandbox) throw new NotFoundError('No sandbox with that id.', ['input', 'sandboxId']);
      assertCanWriteSession(principal, sandbox);
      if (!validPort(input.port)) throw new ValidationError('port must be 1 to 65535.', ['input', 'port']);
      if (shareBlocked.has(input.port)) {
        throw new ValidationError(
          `Port ${input.port} can never be shared (blocked: ${[...shareBlocked].sort((a, b) => a - b).join(', ')}).`,
          ['input', 'port'],
        );
      }
      if (input.expiresAt.getTime() <= now()) {
        throw new ValidationError('expiresAt must be in the future.', ['input', 'expiresAt']);
      }
      const secret = randomBytes(24).toString('base64url');
      const link = await db.shareLink.create({
        data: {
          sandboxId,
          accountId: sandbox.accountId,
          port: input.port,
          mode: input.mode,
          secretHash: hashSecret(secret),
          createdById: principal.kind === 'USER' ? principal.userId : null,
          expiresAt: input.expiresAt,
        },
      });
      return { link, url: `${new URL(options.apiUrl()).origin}/v1/share/${secret}/` };
    },

    async revokeShareLink(principal: Principal, input: { shareLinkId: string }) {
      const id = parseId(input.shareLinkId, 'ShareLink', ['input', 'shareLinkId']);
      const link = await db.shareLink.findUnique({ where: { id } });
      if (!link) throw new NotFoundError('No share link with that id.', ['input', 'shareLinkId']);
      assertCanWriteSession(principal, link);
      return db.shareLink.update({ where: { id }, data: { revokedAt: link.revokedAt ?? new Date(now()) } });
    },
  };
}

/** Query parameter carrying a signed preview token; the proxy swaps it for a cookie. */
export const PREVIEW_QUERY = 'singulacomp_preview';
/** Cookie holding the preview token (scoped by Path, or by host for the subdomain form). */
export const PREVIEW_COOKIE = 'singulacomp_preview';
/** Lifetime of the cookie a preview URL sets (the URL itself lives minutes). */
export const PREVIEW_COOKIE_MAX_AGE_SECONDS = 12 * 3600;
