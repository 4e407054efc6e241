// `/v1/sessions/<id>/agent/*` (R-CONV-2): OpenCode's own API (HTTP, SSE, WebSocket) for an
// authenticated user, so `@opencode-ai/sdk` pointed at this base URL with a PAT works unchanged.
// The control plane signs X-SingulaComp-User-Context per request. Also serves
// `/v1/sessions/<id>/attachments/<messageId>/<partId>`, the URLs Session.messages gives files.
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import type { AccessService } from '../resolvers/gateway/access';
import { AccessError } from '../resolvers/gateway/access';
import type { DaemonClient } from '../resolvers/daemon/daemon-client';
import { type DaemonProxy, refuseUpgrade, sendJson } from './daemon-proxy';
import type { Logger } from './logger';

const AGENT = /^\/v1\/sessions\/([^/]+)\/agent(\/.*)?$/;
const ATTACHMENT = /^\/v1\/sessions\/([^/]+)\/attachments\/([^/]+)\/([^/]+)$/;

/**
 * A browser cannot set Authorization on a WebSocket, so a WebSocket may carry its token as a
 * subprotocol instead (as Kubernetes' API server does): `Sec-WebSocket-Protocol: singulacomp.v1,
 * singulacomp.bearer.<token>`. The token never reaches the sandbox; the answer names
 * `singulacomp.v1`. A PAT is all token characters, so it is a valid protocol name.
 */
export const WS_PROTOCOL = 'singulacomp.v1';
export const WS_BEARER_PREFIX = 'singulacomp.bearer.';

function authorizationOf(req: IncomingMessage): string | undefined {
  return req.headers.authorization;
}

function bearerProtocol(req: IncomingMessage): string | undefined {
  const offered = (req.headers['sec-websocket-protocol'] ?? '').split(',').map((p) => p.trim());
  if (!offered.includes(WS_PROTOCOL)) return undefined;
  const token = offered.find((p) => p.startsWith(WS_BEARER_PREFIX))?.slice(WS_BEARER_PREFIX.length);
  return token ? `Bearer ${token}` : undefined;
}

export function createAgentProxy(options: {
  access: AccessService;
  daemon: DaemonClient;
  proxy: DaemonProxy;
  logger: Logger;
}) {
  const { access, daemon, proxy } = options;
  const log = options.logger.child({ module: 'agent-proxy' });

  async function attachment(req: IncomingMessage, res: ServerResponse, m: RegExpExecArray): Promise<void> {
    const grant = await access.attachment(authorizationOf(req), m[1]!);
    const messageId = decodeURIComponent(m[2]!);
    const partId = decodeURIComponent(m[3]!);
    const response = await daemon.request(grant.target, grant.userId, '/singulacomp/messages');
    if (!response.ok) throw new AccessError(502, `The sandbox answered HTTP ${response.status}.`);
    const body = (await response.json()) as { messages?: Array<{ parts?: Array<Record<string, unknown>> }> };
    const part = (body.messages ?? [])
      .flatMap((msg) => msg.parts ?? [])
      .find((p) => p.id === partId && p.messageID === messageId && p.type === 'file');
    if (!part) throw new AccessError(404, 'No such attachment.');
    const url = typeof part.url === 'string' ? part.url : '';
    const data = /^data:([^;,]+)?(;base64)?,(.*)$/s.exec(url);
    // Offloaded bytes (R-AG-6) live with the daemon; the transcript keeps only a placeholder.
    const offloaded = JSON.stringify(part).includes('singulacomp.offloaded');
    if (offloaded || !data) {
      const bytes = await daemon.request(
        grant.target,
        grant.userId,
        `/singulacomp/part/${encodeURIComponent(partId)}`,
      );
      if (!bytes.ok) throw new AccessError(404, 'The attachment bytes are not available.');
      res.writeHead(200, {
        'content-type': bytes.headers.get('content-type') ?? 'application/octet-stream',
        'cache-control': 'private, max-age=3600',
      });
      res.end(Buffer.from(await bytes.arrayBuffer()));
      return;
    }
    const payload = data[2] ? Buffer.from(data[3]!, 'base64') : Buffer.from(decodeURIComponent(data[3]!));
    res.writeHead(200, {
      'content-type': data[1] ?? (typeof part.mime === 'string' ? part.mime : 'application/octet-stream'),
      'content-length': payload.length,
      'cache-control': 'private, max-age=3600',
    });
    res.end(payload);
  }

  return {
    matches: (path: string) => AGENT.test(path) || ATTACHMENT.test(path),

    async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
      const [path = '/', query] = (req.url ?? '/').split(/\?(.*)/s, 2);
      try {
        const file = ATTACHMENT.exec(path);
        if (file) return await attachment(req, res, file);
        const m = AGENT.exec(path)!;
        const grant = await access.agent(authorizationOf(req), m[1]!);
        proxy.web(req, res, grant, `${m[2] ?? '/'}${query ? `?${query}` : ''}`);
      } catch (error) {
        if (error instanceof AccessError) return sendJson(res, error.status, { error: error.message });
        log.error({ err: error, path }, 'agent proxy failure');
        sendJson(res, 502, { error: 'The agent could not be reached.' });
      }
    },

    async upgrade(req: IncomingMessage, socket: Socket, head: Buffer): Promise<void> {
      const [path = '/', query] = (req.url ?? '/').split(/\?(.*)/s, 2);
      const m = AGENT.exec(path);
      if (!m) return refuseUpgrade(socket, 404, 'No WebSocket route here.');
      try {
        const viaProtocol = authorizationOf(req) ? undefined : bearerProtocol(req);
        const grant = await access.agent(authorizationOf(req) ?? viaProtocol, m[1]!);
        proxy.ws(
          req,
          socket,
          head,
          grant,
          `${m[2] ?? '/'}${query ? `?${query}` : ''}`,
          viaProtocol ? { answerProtocol: WS_PROTOCOL } : {},
        );
      } catch (error) {
        if (error instanceof AccessError) return refuseUpgrade(socket, error.status, error.message);
        log.error({ err: error, path }, 'agent proxy upgrade failure');
        refuseUpgrade(socket, 502, 'The agent could not be reached.');
      }
    },
  };
}
