// Who may reach what inside a sandbox over HTTP (R-CONV-2, R-PRV-1..5): the agent proxy for users
// with write access to the session, previews for readers of the sandbox (API token or a short-lived
// signed URL turned into a cookie scoped to one preview), and public share links whose secret is
// stored hashed. Previews and share links live on the preview site only (R-PRV-4): one origin per
// sandbox port (`p<port>-<sandbox-id>.<preview domain>`) and one per share link
// (`s-<link-id>.<preview domain>`), never the API's or the dashboard's origin. They reach only an
// app port: never the daemon's control routes (the daemon tells them apart by the user context's
// audience) nor the daemon's or OpenCode's port, and a refused port answers exactly as an unused one
// (R-PRV-5). None of these touch leases or the idle clock (R-LEASE-2). The transports are
// server/agent-proxy.ts and server/preview-proxy.ts.
import { createHash, randomBytes } from 'node:crypto';
import { SignJWT, jwtVerify } from 'jose';
import type { ShareLinkMode } from '../../prisma/generated/client/client';
import { UNREACHABLE_PORT_MESSAGE, UNREACHABLE_PORT_STATUS } from '../../contract/ports';
import type { Db } from '../platform';
import { type Principal, userOf } from '../auth/principal';
import { type Decision, authorize, decide } from '../auth/policy';
import type { TokenService } from '../auth/tokens';
import { type DaemonClient, type DaemonTarget, contextUserId } from '../daemon/daemon-client';
import { NotFoundError, ValidationError, badUserInput } from '../errors';
import { parseId } from '../ids';

/** The daemon's service port: never proxied (R-PRV-1). */
export const SERVICE_PORT = 8000;
/** OpenCode's port in images and SSH: never behind a public link (R-PRV-2). */
export const SHARE_BLOCKED_BASE = [22, 4096, SERVICE_PORT] as const;

/** A preview's or share link's origin names what it opens: `p<port>-<sandbox-id>.` or `s-<link-id>.`. */
const PREVIEW_LABEL = /^p(\d{1,5})-([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})$/;
const SHARE_LABEL = /^s-([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})$/;

/** Where a request on the preview site goes, read from its Host. */
export type PreviewSiteHost =
  | { kind: 'preview'; sandboxId: string; port: number }
  | { kind: 'share'; linkId: string };

/** The refusal for a port a preview or share link cannot reach: the daemon's answer for an unused one. */
function unreachablePort(): AccessError {
  return new AccessError(UNREACHABLE_PORT_STATUS, UNREACHABLE_PORT_MESSAGE);
}

/**
 * The preview site: `SINGULACOMP_PREVIEW_DOMAIN` (host[:port]) or, unset, `localhost:<API port>`
 * (browsers resolve every *.localhost name to loopback, and each is a site of its own), with the
 * API's scheme.
 */
export function previewSite(
  apiUrl: string,
  previewDomain: string | null,
): { protocol: string; host: string } {
  const api = new URL(apiUrl);
  const host = (previewDomain ?? `localhost${api.port ? `:${api.port}` : ''}`).toLowerCase();
  return { protocol: api.protocol, host };
}

/** True when hosts `a` and `b` are one host or one lies inside the other (one site, for cookies). */
export function nestedHosts(a: string, b: string): boolean {
  const x = a.toLowerCase().replace(/\.$/, '');
  const y = b.toLowerCase().replace(/\.$/, '');
  return x === y || x.endsWith(`.${y}`) || y.endsWith(`.${x}`);
}

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
  /** Asks a running daemon which ports are its own and OpenCode's, when a link is created. */
  daemon?: DaemonClient;
  /** Key for signed preview URLs and cookies. */
  signingKey: Buffer;
  fileSharePort: number;
  previewUrlTtlSeconds: number;
  /** host[:port] of the preview site; null: `localhost:<API port>`. */
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

/** Entries of each of the preview caches below; the oldest goes first. */
const PREVIEW_CACHE_ENTRIES = 10_000;
/**
 * How long a running sandbox's row serves previews without a read. A revocation empties the cache
 * at once (stopping a session revokes its sandbox token first); this bounds what no revocation
 * announces (a daemon moved by its provider).
 */
const SANDBOX_CACHE_MS = 1_000;

function bounded<K, V>(map: Map<K, V>, key: K, value: V): void {
  if (map.size >= PREVIEW_CACHE_ENTRIES) map.delete(map.keys().next().value as K);
  map.set(key, value);
}

type SandboxRow = NonNullable<Awaited<ReturnType<Db['sandbox']['findUnique']>>>;

export function createAccessService(options: AccessServiceOptions) {
  const { db, tokens } = options;
  const now = options.now ?? Date.now;
  const shareBlocked = new Set<number>([...SHARE_BLOCKED_BASE, options.fileSharePort]);
  /**
   * Previews read their sandbox on every request (a database round trip, about 1 ms of the 7 ms a
   * preview GET took over the app's own answer). Running sandboxes' rows are kept briefly, each
   * with the token service's revocation epoch when it was read: a hit from before any revocation
   * since (here or on another process) is a miss.
   */
  const runningSandboxes = new Map<string, { row: SandboxRow; epoch: number; until: number }>();
  /** Preview tokens whose signature checked out: their claims (expiry is checked on every use). */
  const verifiedPreviewTokens = new Map<string, { sub: string; exp: number; sbx: unknown; port: unknown }>();

  async function previewSandbox(sandboxId: string): Promise<SandboxRow | null> {
    const epoch = tokens.revocationEpoch();
    const hit = runningSandboxes.get(sandboxId);
    if (hit && hit.epoch === epoch && hit.until > performance.now()) return hit.row;
    const row = await db.sandbox.findUnique({ where: { id: sandboxId } });
    if (row?.status === 'STARTED' && row.serviceUrl && row.sandboxTokenEnc) {
      bounded(runningSandboxes, sandboxId, { row, epoch, until: performance.now() + SANDBOX_CACHE_MS });
    } else {
      runningSandboxes.delete(sandboxId);
    }
    return row;
  }

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

  /** Whether a share link opens now: revoked wins over expired; expired at its `expiresAt` instant. */
  function shareLinkState(link: {
    revokedAt: Date | null;
    expiresAt: Date;
  }): 'ACTIVE' | 'REVOKED' | 'EXPIRED' {
    if (link.revokedAt) return 'REVOKED';
    return link.expiresAt.getTime() <= now() ? 'EXPIRED' : 'ACTIVE';
  }

  /** Throws the policy's refusal as the proxies answer it. */
  function permit(decision: Decision): void {
    if (!decision.allowed) throw new AccessError(decision.status, decision.message);
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

  /**
   * A JWT (HS256, signed with jose like the sandbox tokens) binding one sandbox port, the user the
   * daemon is told about and an expiry: claims `sbx`, `port`, `sub`, `exp`, under the preview
   * audience so no other token of ours is taken for one.
   */
  function previewToken(sandboxId: string, port: number, userId: string, expiresAtSeconds: number) {
    return new SignJWT({ sbx: sandboxId, port })
      .setProtectedHeader({ alg: 'HS256', typ: 'JWT' })
      .setIssuer(PREVIEW_JWT_ISSUER)
      .setAudience(PREVIEW_JWT_AUDIENCE)
      .setSubject(userId)
      .setExpirationTime(expiresAtSeconds)
      .sign(options.signingKey);
  }

  /** The token's user and expiry when it is valid now for this sandbox and port; null otherwise. */
  async function verifyPreviewToken(
    token: string,
    sandboxId: string,
    port: number,
  ): Promise<{ sub: string; exp: number } | null> {
    const known = verifiedPreviewTokens.get(token);
    if (known) {
      // jose's rule: expired once exp is at or before the current second.
      const valid = known.sbx === sandboxId && known.port === port && known.exp > Math.floor(now() / 1000);
      return valid ? { sub: known.sub, exp: known.exp } : null;
    }
    try {
      const { payload } = await jwtVerify(token, options.signingKey, {
        issuer: PREVIEW_JWT_ISSUER,
        audience: PREVIEW_JWT_AUDIENCE,
        algorithms: ['HS256'],
        requiredClaims: ['exp', 'sub'],
        // Expiry is judged on the injected clock; jose's default leeway is none.
        currentDate: new Date(now()),
      });
      bounded(verifiedPreviewTokens, token, {
        sub: payload.sub!,
        exp: payload.exp!,
        sbx: payload.sbx,
        port: payload.port,
      });
      if (payload.sbx !== sandboxId || payload.port !== port) return null;
      return { sub: payload.sub!, exp: payload.exp! };
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

  // Every request asks (the router's matches, then the proxy): parse the API URL once per value.
  let siteOf: { apiUrl: string; site: { protocol: string; host: string } } | null = null;
  function site() {
    const apiUrl = options.apiUrl();
    if (siteOf?.apiUrl !== apiUrl) siteOf = { apiUrl, site: previewSite(apiUrl, options.previewDomain) };
    return siteOf.site;
  }

  /** Cookies of the preview site: partitioned under HTTPS or *.localhost, so the dashboard can frame it. */
  function cookieAttributes(): string {
    const { protocol, host } = site();
    const hostname = host.replace(/:\d+$/, '');
    const trustworthy = protocol === 'https:' || hostname === 'localhost' || hostname.endsWith('.localhost');
    // A preview framed by the dashboard is a third-party context: only a partitioned SameSite=None
    // cookie reaches it there (which needs Secure; browsers allow that on *.localhost).
    return trustworthy ? 'HttpOnly; Secure; SameSite=None; Partitioned' : 'HttpOnly; SameSite=Lax';
  }

  /**
   * The ports of this sandbox no preview or share link may reach: the daemon's and, when the daemon
   * answers, every port OpenCode uses (random on LOCAL). Best effort at creation; the daemon refuses
   * them again on every request.
   */
  async function reservedPorts(sandbox: {
    sessionId: string;
    serviceUrl: string | null;
    sandboxTokenEnc: string | null;
    serviceHeadersEnc: string | null;
    status: string;
  }): Promise<Set<number>> {
    const ports = new Set<number>([SERVICE_PORT]);
    if (!sandbox.serviceUrl) return ports;
    const daemonPort = Number(new URL(sandbox.serviceUrl).port);
    if (daemonPort) ports.add(daemonPort);
    if (!options.daemon || !sandbox.sandboxTokenEnc || sandbox.status !== 'STARTED') return ports;
    try {
      const res = await options.daemon.request(sandbox, 'control-plane', '/singulacomp/ports', {
        timeoutMs: 3_000,
      });
      if (res.ok) {
        const body = (await res.json()) as { reserved?: unknown };
        for (const p of Array.isArray(body.reserved) ? body.reserved : []) {
          if (typeof p === 'number' && validPort(p)) ports.add(p);
        }
      }
    } catch {
      // An unreachable daemon refuses these ports itself when the link is used.
    }
    return ports;
  }

  /** Refuses a port no preview or share link may open (at creation: the caller names the reason). */
  function refusedPortMessage(port: number, reserved: Set<number>): string | null {
    if (port === SERVICE_PORT) return 'Port 8000 is the sandbox service port and is never proxied.';
    if (reserved.has(port))
      return `Port ${port} serves the sandbox's daemon or its agent (OpenCode) and is never proxied.`;
    return null;
  }

  return {
    shareBlocked,

    /** `https://p<port>-<sandbox-id>.<preview domain>`: the origin of one sandbox port's preview. */
    previewOrigin(sandboxId: string, port: number): string {
      const { protocol, host } = site();
      return `${protocol}//p${port}-${sandboxId}.${host}`;
    },

    /** `https://s-<link-id>.<preview domain>`: the origin of one share link. */
    shareOrigin(linkId: string): string {
      const { protocol, host } = site();
      return `${protocol}//s-${linkId}.${host}`;
    },

    /** What a Host on the preview site opens; null when the host is not the preview site's. */
    siteHost(hostHeader: string | undefined): PreviewSiteHost | null {
      if (!hostHeader) return null;
      const host = hostHeader.toLowerCase();
      const dot = host.indexOf('.');
      if (dot < 1) return null;
      const label = host.slice(0, dot);
      // The label first: it rules out the API's own hosts without parsing the API URL.
      const p = PREVIEW_LABEL.exec(label);
      const sh = p ? null : SHARE_LABEL.exec(label);
      if (!p && !sh) return null;
      // The port of the Host may differ from the configured one behind a reverse proxy.
      const domain = host.slice(dot + 1).replace(/:\d+$/, '');
      if (domain !== site().host.replace(/:\d+$/, '')) return null;
      return p
        ? { kind: 'preview', port: Number(p[1]), sandboxId: p[2]! }
        : { kind: 'share', linkId: sh![1]! };
    },

    /** `/v1/sessions/<id>/agent/*`: the caller drives the agent, so it needs write access. */
    async agent(authorization: string | undefined, rawSessionId: string): Promise<ProxyGrant> {
      const principal = await authenticate(authorization);
      const session = await sessionWithSandbox(rawSessionId);
      permit(decide(principal, 'session.sendMessage', session));
      if (!session.sandbox) throw new AccessError(503, `The session has no sandbox (${session.status}).`);
      return { target: reachable(session.sandbox), userId: contextUserId(principal), port: null };
    },

    /** Session attachments: readers of the session. */
    async attachment(authorization: string | undefined, rawSessionId: string): Promise<ProxyGrant> {
      const principal = await authenticate(authorization);
      const session = await sessionWithSandbox(rawSessionId);
      permit(decide(principal, 'session.read', session));
      if (!session.sandbox) throw new AccessError(503, `The session has no sandbox (${session.status}).`);
      return { target: reachable(session.sandbox), userId: contextUserId(principal), port: null };
    },

    /**
     * A preview request: an API token in Authorization, or the preview cookie/URL token for this
     * exact sandbox and port. The daemon's port answers as an unused port does, after the caller
     * proved access (the daemon answers the same for OpenCode's).
     */
    async preview(input: {
      authorization: string | undefined;
      previewToken: string | null;
      sandboxId: string;
      port: number;
    }): Promise<ProxyGrant> {
      if (!validPort(input.port)) throw new AccessError(400, 'Not a valid port.');
      let sandboxId: string;
      try {
        sandboxId = parseId(input.sandboxId, 'Sandbox', ['sandboxId']);
      } catch {
        throw new AccessError(404, 'No sandbox with that id.');
      }
      const sandbox = await previewSandbox(sandboxId);
      if (!sandbox) throw new AccessError(404, 'No sandbox with that id.');
      let userId: string;
      const signed = input.previewToken
        ? await verifyPreviewToken(input.previewToken, sandbox.id, input.port)
        : null;
      const resource = {
        sandboxId: sandbox.id,
        sessionId: sandbox.sessionId,
        accountId: sandbox.accountId,
        port: input.port,
      };
      if (signed) {
        const actor = {
          kind: 'PREVIEW_TOKEN',
          sandboxId: sandbox.id,
          port: input.port,
          userId: signed.sub,
        } as const;
        permit(decide(actor, 'preview.open', resource));
        userId = signed.sub;
      } else if (input.authorization) {
        const principal = await authenticate(input.authorization);
        permit(decide(principal, 'preview.open', resource));
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
      if (input.port === SERVICE_PORT || new URL(target.serviceUrl).port === String(input.port)) {
        throw unreachablePort();
      }
      return { target, userId, port: input.port };
    },

    /** The longer-lived token a preview cookie carries once a signed URL was opened. */
    async previewCookie(sandboxId: string, port: number, userId: string) {
      const maxAgeSeconds = PREVIEW_COOKIE_MAX_AGE_SECONDS;
      return {
        token: await previewToken(sandboxId, port, userId, Math.floor(now() / 1000) + maxAgeSeconds),
        maxAgeSeconds,
        attributes: cookieAttributes(),
      };
    },

    /** Attributes of the cookie a share link's first visit sets (it holds the link's secret). */
    shareCookie(link: { expiresAt: Date }) {
      const maxAgeSeconds = Math.max(1, Math.ceil((link.expiresAt.getTime() - now()) / 1000));
      return { maxAgeSeconds, attributes: cookieAttributes() };
    },

    /**
     * Sandbox.previewUrl: a short-lived URL on the preview site whose first load sets a cookie
     * scoped to that origin. Both forms give it (PATH is the old name of the same thing).
     */
    async previewUrl(
      principal: Principal,
      sandbox: { id: string; sessionId: string; accountId: string },
      port: number,
      _form: PreviewForm,
    ) {
      // A query field: bad input is a top-level BAD_USER_INPUT error, not a payload type.
      if (!validPort(port)) throw badUserInput('port must be 1 to 65535.', ['port']);
      const row = await db.sandbox.findUnique({ where: { id: sandbox.id } });
      const refused = refusedPortMessage(port, row ? await reservedPorts(row) : new Set([SERVICE_PORT]));
      if (refused) throw badUserInput(refused, ['port']);
      const expiresAt = Math.floor(now() / 1000) + options.previewUrlTtlSeconds;
      const token = await previewToken(sandbox.id, port, contextUserId(principal), expiresAt);
      const { protocol, host } = site();
      return {
        url: `${protocol}//p${port}-${sandbox.id}.${host}/?${PREVIEW_QUERY}=${encodeURIComponent(token)}`,
        expiresAt: new Date(expiresAt * 1000),
      };
    },

    /**
     * A share-link request on the link's own origin (`linkId`, from the Host). View-only links allow
     * GET/HEAD without WebSocket. A port no link may reach answers as an unused one does.
     */
    async share(input: {
      secret: string;
      linkId: string;
      method: string;
      upgrade: boolean;
    }): Promise<ProxyGrant & { linkId: string; expiresAt: Date }> {
      const link = await db.shareLink.findUnique({
        where: { secretHash: hashSecret(input.secret) },
        include: { sandbox: true },
      });
      if (!link || link.id !== input.linkId) throw new AccessError(404, 'No such share link.');
      const state = shareLinkState(link);
      if (state === 'REVOKED') throw new AccessError(410, 'This share link was revoked.');
      if (state === 'EXPIRED') throw new AccessError(410, 'This share link expired.');
      permit(
        decide({ kind: 'SHARE_LINK', linkId: link.id, mode: link.mode }, 'share.open', {
          linkId: input.linkId,
          method: input.method,
          upgrade: input.upgrade,
        }),
      );
      const target = reachable(link.sandbox);
      if (shareBlocked.has(link.port) || new URL(target.serviceUrl).port === String(link.port)) {
        throw unreachablePort();
      }
      return {
        target,
        userId: `share-link:${link.id}`,
        port: link.port,
        linkId: link.id,
        expiresAt: link.expiresAt,
      };
    },

    /**
     * ShareLink.active: the link still opens (not revoked, not expired on this service's clock), the
     * same test `share` makes before it lets a request through.
     */
    shareLinkActive(link: { revokedAt: Date | null; expiresAt: Date }): boolean {
      return shareLinkState(link) === 'ACTIVE';
    },

    /** The share link an old `/v1/share/<secret>/` URL named, on its own origin; null when unknown. */
    async legacyShareUrl(secret: string, rest: string): Promise<string | null> {
      const link = await db.shareLink.findUnique({ where: { secretHash: hashSecret(secret) } });
      if (!link) return null;
      const { protocol, host } = site();
      const url = new URL(`${protocol}//s-${link.id}.${host}${rest}`);
      url.searchParams.set(SHARE_QUERY, secret);
      return url.href;
    },

    async createShareLink(
      principal: Principal,
      input: { sandboxId: string; port: number; mode: ShareLinkMode; expiresAt: Date },
    ) {
      const sandboxId = parseId(input.sandboxId, 'Sandbox', ['input', 'sandboxId']);
      const sandbox = await db.sandbox.findUnique({ where: { id: sandboxId } });
      if (!sandbox) throw new NotFoundError('No sandbox with that id.', ['input', 'sandboxId']);
      authorize(principal, 'share.create', sandbox);
      if (!validPort(input.port)) throw new ValidationError('port must be 1 to 65535.', ['input', 'port']);
      if (shareBlocked.has(input.port)) {
        throw new ValidationError(
          `Port ${input.port} can never be shared (blocked: ${[...shareBlocked].sort((a, b) => a - b).join(', ')}).`,
          ['input', 'port'],
        );
      }
      const refused = refusedPortMessage(input.port, await reservedPorts(sandbox));
      if (refused) throw new ValidationError(refused, ['input', 'port']);
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
          createdById: userOf(principal),
          expiresAt: input.expiresAt,
        },
      });
      const { protocol, host } = site();
      return { link, url: `${protocol}//s-${link.id}.${host}/?${SHARE_QUERY}=${secret}` };
    },

    async revokeShareLink(principal: Principal, input: { shareLinkId: string }) {
      const id = parseId(input.shareLinkId, 'ShareLink', ['input', 'shareLinkId']);
      const link = await db.shareLink.findUnique({ where: { id } });
      if (!link) throw new NotFoundError('No share link with that id.', ['input', 'shareLinkId']);
      authorize(principal, 'share.revoke', link);
      return db.shareLink.update({ where: { id }, data: { revokedAt: link.revokedAt ?? new Date(now()) } });
    },
  };
}

/** Query parameter carrying a share link's secret on its first visit; the proxy swaps it for a cookie. */
export const SHARE_QUERY = 'singulacomp_share';
/** Cookie holding a share link's secret on the link's own origin. */
export const SHARE_COOKIE = 'singulacomp_share';
/** Query parameter carrying a signed preview token; the proxy swaps it for a cookie. */
export const PREVIEW_QUERY = 'singulacomp_preview';
/** Cookie holding the preview token (host-only: one preview origin). */
export const PREVIEW_COOKIE = 'singulacomp_preview';
/** Lifetime of the cookie a preview URL sets (the URL itself lives minutes). */
export const PREVIEW_COOKIE_MAX_AGE_SECONDS = 12 * 3600;
/** `iss` and `aud` of preview tokens (sandbox tokens name another audience and use another key). */
const PREVIEW_JWT_ISSUER = 'singulacomp';
const PREVIEW_JWT_AUDIENCE = 'singulacomp-preview';
