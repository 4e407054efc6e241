// Request body limits: a declared Content-Length is checked against its limit before anything is
// read; a streamed (chunked) body is counted as it arrives.
import { type Plugin, createGraphQLError } from 'graphql-yoga';

/**
 * Limit for a body that declares its Content-Length, and for one WebSocket message. Bodies sent
 * without Content-Length (chunked) are counted against STREAMED_BODY_LIMIT_BYTES instead.
 */
export const DECLARED_BODY_LIMIT_BYTES = 1024 * 1024;

/** graphql-yoga's default request body limit, kept for bodies without Content-Length. */
export const STREAMED_BODY_LIMIT_BYTES = 25_000_000;

const bodyTooLarge = () =>
  createGraphQLError('Request body too large', {
    extensions: { http: { status: 413 }, code: 'REQUEST_ENTITY_TOO_LARGE' },
  });

/**
 * graphql-yoga's request body limit (its `maxRequestBodySize`, same checks and errors), without
 * piping a body that has a valid Content-Length through a counting stream on every request: Node's
 * HTTP parser delivers exactly Content-Length bytes (and rejects it alongside chunked encoding),
 * and the header itself is checked against the limit. Bodies without it are still counted.
 */
export function useRequestBodyLimit(limit: number): Plugin {
  return {
    onRequestParse({ request, requestParser, setRequestParser, fetchAPI }) {
      const contentLength = request.headers.get('content-length');
      if (contentLength != null) {
        if (!/^\d+$/.test(contentLength)) {
          throw createGraphQLError('Content-Length header is invalid.', {
            extensions: { http: { status: 400 }, code: 'BAD_REQUEST' },
          });
        }
        if (Number(contentLength) > limit) throw bodyTooLarge();
        return;
      }
      if (requestParser == null || request.body == null) return;
      setRequestParser((req) => {
        const body = req.body;
        if (!body) return requestParser(req);
        const Transform =
          body instanceof ReadableStream ? globalThis.TransformStream : fetchAPI.TransformStream;
        let bytesRead = 0;
        const limited = body.pipeThrough(
          new Transform({
            transform(chunk: Uint8Array, controller: TransformStreamDefaultController<Uint8Array>) {
              bytesRead += chunk.byteLength;
              if (bytesRead > limit) {
                controller.error(bodyTooLarge());
                return;
              }
              controller.enqueue(chunk);
            },
          }),
        );
        return requestParser(
          new fetchAPI.Request(req.url, {
            method: req.method,
            headers: req.headers,
            signal: req.signal,
            body: limited,
            // @ts-expect-error Node's fetch needs duplex for a streamed body; the DOM types lack it.
            duplex: 'half',
          }),
        );
      });
    },
  };
}

/**
 * Reads a request body (or a stream decoded from it) whole. With a `limit`, null once it grows past
 * that many bytes (the rest is not read), for the caller to answer with its own 413.
 */
export function readBody(source: AsyncIterable<Buffer>): Promise<Buffer>;
export function readBody(source: AsyncIterable<Buffer>, limit: number): Promise<Buffer | null>;
export async function readBody(source: AsyncIterable<Buffer>, limit = Number.POSITIVE_INFINITY) {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of source) {
    size += chunk.length;
    if (size > limit) return null;
    chunks.push(chunk);
  }
  return chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks);
}
