// Webhook deliveries for triggers: `POST /v1/triggers/<triggerId>/webhook` with the raw body signed
// in `X-Hub-Signature-256`. Verification, replay protection and firing are resolvers/triggers/.
import type { IncomingMessage, ServerResponse } from 'node:http';
import { SIGNATURE_HEADER, type TriggerService } from '../resolvers/triggers/triggers';
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
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > options.maxBodyBytes) return reply(413, { error: 'Body too large (limit 1 MiB).' });
    chunks.push(chunk);
  }
  try {
    const header = req.headers[SIGNATURE_HEADER];
    const outcome = await options.triggers.deliver(
      triggerId,
      Array.isArray(header) ? header[0] : header,
      Buffer.concat(chunks),
    );
    reply(outcome.status, {
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
