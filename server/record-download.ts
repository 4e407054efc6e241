// `GET /v1/sessions/<id>/record` (R-REC-1): the session's record as one JSON document, for whoever
// may read the session, authorised like the GraphQL API (Authorization: Bearer <token>).
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Services } from '../resolvers/services';
import { DomainError } from '../resolvers/errors';
import { sendJson } from './daemon-proxy';
import type { Logger } from './logger';

const RECORD = /^\/v1\/sessions\/([^/]+)\/record$/;

export function createRecordDownload(options: { services: Services; logger: Logger }) {
  const { services } = options;
  const log = options.logger.child({ module: 'record-download' });
  return {
    matches: (path: string) => RECORD.test(path),

    async handle(req: IncomingMessage, res: ServerResponse, path: string): Promise<void> {
      if (req.method !== 'GET' && req.method !== 'HEAD')
        return sendJson(res, 405, { error: 'Use GET to download a session record.' });
      let principal: Awaited<ReturnType<Services['tokens']['authenticate']>>;
      try {
        principal = await services.tokens.authenticate(req.headers.authorization);
      } catch (error) {
        return sendJson(res, 401, { error: (error as Error).message });
      }
      if (!principal)
        return sendJson(res, 401, { error: 'Authentication required: send Authorization: Bearer <token>.' });
      const id = decodeURIComponent(RECORD.exec(path)![1]!);
      try {
        const document = await services.record.document(principal, id);
        const body = Buffer.from(JSON.stringify(document));
        res.writeHead(200, {
          'content-type': 'application/json; charset=utf-8',
          'content-length': body.length,
          'content-disposition': `attachment; filename="session-${document.session.id}.json"`,
          'cache-control': 'private, no-store',
        });
        res.end(req.method === 'HEAD' ? undefined : body);
      } catch (error) {
        if (error instanceof DomainError) return sendJson(res, 404, { error: error.message });
        const code = (error as { extensions?: { code?: string } }).extensions?.code;
        if (code === 'FORBIDDEN') return sendJson(res, 403, { error: (error as Error).message });
        log.error({ err: error, path }, 'record download failed');
        sendJson(res, 500, { error: 'The record could not be read.' });
      }
    },
  };
}
