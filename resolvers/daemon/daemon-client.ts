// The one way the control plane talks to a sandbox daemon (docs/agent-api.md): every call carries
// an X-SingulaComp-User-Context header signed with the sandbox token the server keeps encrypted,
// for the user on whose behalf it is made. Reloads, the conversation, the agent proxy and the
// preview proxy all go through here, so transport concerns (provider preview tokens, port rules)
// plug in at one place.
import { USER_CONTEXT_HEADER, type UserContextAudience, signUserContext } from '../../contract/user-context';
import { type Principal, contextUserOf } from '../auth/principal';
import { decrypt } from '../auth/crypto';

/** The daemon's own header naming the sandbox port to proxy to (agent/proxy.ts). */
export const TARGET_PORT_HEADER = 'x-singulacomp-target-port';

export interface DaemonTarget {
  sessionId: string;
  serviceUrl: string | null;
  sandboxTokenEnc: string | null;
  /** The provider's stored access headers for serviceUrl (e.g. Daytona's preview token). */
  serviceHeadersEnc?: string | null;
}

/** Thrown when the daemon cannot be reached or answers with an unexpected status. */
export class DaemonUnavailableError extends Error {
  constructor(
    message: string,
    readonly status: number | null = null,
  ) {
    super(message);
  }
}

/** The user id a daemon sees in the user context. */
export function contextUserId(principal: Principal): string {
  return contextUserOf(principal);
}

export interface DaemonClientOptions {
  encryptionKey: Buffer;
  /** Per-call deadline. @default 10_000 */
  requestTimeoutMs?: number;
  fetch?: typeof fetch;
}

export type DaemonClient = ReturnType<typeof createDaemonClient>;

/** Entries of each memo below; the oldest goes first. */
const MEMO_ENTRIES = 4_096;
/**
 * How long one signed user context serves the same (sandbox token, session, user, audience, port):
 * well inside its lifetime, so a reused header is as valid at the daemon as a fresh one.
 */
const HEADER_REUSE_SECONDS = 30;

function remember<K, V>(map: Map<K, V>, key: K, value: V): V {
  if (map.size >= MEMO_ENTRIES) map.delete(map.keys().next().value as K);
  map.set(key, value);
  return value;
}

export function createDaemonClient(options: DaemonClientOptions) {
  const fetchImpl = options.fetch ?? fetch;
  const requestTimeoutMs = options.requestTimeoutMs ?? 10_000;
  // A proxied request decrypted the sandbox token (AES-GCM: a cipher object each time) and signed a
  // fresh header: about 0.2 ms of CPU per preview GET. Both are pure functions of their inputs.
  const plaintexts = new Map<string, string>();
  const signedHeaders = new Map<string, { iat: number; value: string }>();

  function baseUrl(target: DaemonTarget): string {
    if (!target.serviceUrl || !target.sandboxTokenEnc) {
      throw new DaemonUnavailableError('The sandbox daemon is not reachable yet (no service URL).');
    }
    return target.serviceUrl.replace(/\/+$/, '');
  }

  /**
   * Headers that authorize one request to the daemon for `userId` (short-lived), for one audience:
   * `control` for the daemon's routes (request() below), `opencode` for the agent proxy, `app` with
   * its port for preview and share traffic (docs/agent-api.md).
   */
  function headers(
    target: DaemonTarget,
    claims: { userId: string; audience: UserContextAudience; port?: number; ttlSeconds?: number },
  ): Record<string, string> {
    baseUrl(target);
    const enc = target.sandboxTokenEnc!;
    const nowSeconds = Math.floor(Date.now() / 1000);
    const ttlSeconds = claims.ttlSeconds ?? 120;
    const key = `${enc}\0${target.sessionId}\0${claims.userId}\0${claims.audience}\0${claims.port ?? ''}\0${ttlSeconds}`;
    let signed = signedHeaders.get(key);
    // Reused only while young: the header's own lifetime, from its iat, stays most of ttlSeconds.
    const reuse = Math.min(HEADER_REUSE_SECONDS, Math.floor(ttlSeconds / 4));
    if (!signed || nowSeconds - signed.iat >= reuse || signed.iat > nowSeconds) {
      const token = plaintexts.get(enc) ?? remember(plaintexts, enc, decrypt(options.encryptionKey, enc));
      const value = signUserContext(
        {
          sessionId: target.sessionId,
          userId: claims.userId,
          audience: claims.audience,
          ...(claims.port === undefined ? {} : { port: claims.port }),
          ttlSeconds,
          nowSeconds,
        },
        token,
      );
      signed = remember(signedHeaders, key, { iat: nowSeconds, value });
    }
    const own: Record<string, string> = { [USER_CONTEXT_HEADER]: signed.value };
    // An older daemon reads the port from this header; a newer one checks it names the claims' port.
    if (claims.audience === 'app') own[TARGET_PORT_HEADER] = String(claims.port);
    return own;
  }

  return {
    baseUrl,
    headers,

    /** One control call; network failures become DaemonUnavailableError. The caller reads the status. */
    async request(
      target: DaemonTarget,
      userId: string,
      path: string,
      init: { method?: string; body?: unknown; timeoutMs?: number } = {},
    ): Promise<Response> {
      const url = `${baseUrl(target)}${path}`;
      try {
        return await fetchImpl(url, {
          method: init.method ?? 'GET',
          headers: {
            ...headers(target, { userId, audience: 'control' }),
            ...(init.body === undefined ? {} : { 'content-type': 'application/json' }),
          },
          body: init.body === undefined ? undefined : JSON.stringify(init.body),
          signal: AbortSignal.timeout(init.timeoutMs ?? requestTimeoutMs),
        });
      } catch (error) {
        const cause = (error as { cause?: { code?: string; message?: string } }).cause;
        throw new DaemonUnavailableError(
          `The sandbox daemon could not be reached at ${target.serviceUrl}: ${cause?.code ?? cause?.message ?? (error as Error).message}`,
        );
      }
    },
  };
}
