// Webhook deliveries for triggers: `POST /v1/triggers/<triggerId>/webhook` with
// `X-SingulaComp-Timestamp: <Unix seconds>` and `X-Hub-Signature-256: sha256=<hex HMAC-SHA256 of
// "<timestamp>.<body>">`. Verification, the timestamp window, replay protection and firing are
// resolvers/triggers/. The answer is JSON `{ code, message, runId, status, sessionId }`; `code` says
// why a delivery was refused (TIMESTAMP_MISSING, SIGNATURE_INVALID, TIMESTAMP_OUTSIDE_WINDOW,
// TRIGGER_PAUSED, REPLAYED, CONCURRENT_SESSION_LIMIT, FIRING_FAILED, TRIGGER_NOT_FOUND).
import type { IncomingMessage, ServerResponse } from 'node:http';
import { SIGNATURE_HEADER, TIMESTAMP_HEADER, type TriggerService } from '../resolvers/triggers/triggers';
import { readBody } from './body-limit';
import type { Logger } from './logger';

const ROUTE = /^\/v1\/triggers\/([^/]+)\/webhook$/;

export function isWebhookPath(path: string): boolean {
  return ROUTE.test(path);
}

export async function handleWebhook(
  req: IncomingMessage,
  res: ServerResponse,
  options: { triggers: TriggerService; logger: Logger; maxBodyBytes: number },
): Promise<void> {
  const reply = (status: number, body: unknown): void => {
    res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body));
  };
  if (req.method !== 'POST') return reply(405, { error: 'Use POST.' });
  const triggerId = ROUTE.exec((req.url ?? '').split('?')[0] ?? '')?.[1] ?? '';
  const body = await readBody(req, options.maxBodyBytes);
  if (!body) return reply(413, { error: 'Body too large (limit 1 MiB).' });
  try {
    const header = (name: string): string | undefined => {
      const value = req.headers[name];
      return Array.isArray(value) ? value[0] : value;
    };
    const outcome = await options.triggers.deliver(triggerId, {
      signature: header(SIGNATURE_HEADER),
      timestamp: header(TIMESTAMP_HEADER),
      body,
    });
    reply(outcome.status, {
      code: outcome.code,
      message: outcome.message,
      runId: outcome.run?.id ?? null,
      status: outcome.run?.status ?? null,
      sessionId: outcome.run?.sessionId ?? null,
    });
  } catch (error) {
    options.logger.child({ module: 'webhooks' }).error({ err: error, triggerId }, 'webhook delivery failed');
    reply(500, { error: 'The delivery could not be processed; retry later.' });
  }
}
