// The LLM gateway transport (R-LLM-1): `/v1/llm/openai/v1/{chat/completions,models}` and
// `/v1/llm/anthropic/v1/messages`. The request body is trimmed to the newest images, the server's
// upstream credential replaces the sandbox token, and the answer streams back as it arrives (with
// backpressure; a caller that goes away cancels the upstream call). Rules live in
// resolvers/gateway/llm.ts.
import { once } from 'node:events';
import {
  Agent as HttpAgent,
  type IncomingMessage,
  type OutgoingHttpHeaders,
  type ServerResponse,
  request as httpRequest,
} from 'node:http';
import { Agent as HttpsAgent, request as httpsRequest } from 'node:https';
import {
  GatewayError,
  type LlmFormat,
  type LlmGatewayService,
  StreamUsage,
  errorBody,
  mapUpstreamStatus,
  trimImages,
  usageFrom,
} from '../resolvers/gateway/llm';
import { readBody } from './body-limit';
import type { Logger } from './logger';

export const LLM_PREFIX = '/v1/llm/';
/** Screenshots are large: a conversation with a dozen of them runs to megabytes. */
export const LLM_MAX_BODY_BYTES = 64 * 1024 * 1024;

interface Route {
  format: LlmFormat;
  method: 'GET' | 'POST';
  /** Path below the upstream base URL. */
  upstreamPath: string;
}

const ROUTES: Record<string, Route> = {
  '/v1/llm/openai/v1/chat/completions': {
    format: 'openai',
    method: 'POST',
    upstreamPath: '/chat/completions',
  },
  '/v1/llm/openai/v1/models': { format: 'openai', method: 'GET', upstreamPath: '/models' },
  '/v1/llm/anthropic/v1/messages': { format: 'anthropic', method: 'POST', upstreamPath: '/messages' },
};

/** Response headers worth passing back; hop-by-hop and length headers are ours to set. */
const PASS_RESPONSE_HEADERS = [
  'content-type',
  'retry-after',
  'request-id',
  'x-request-id',
  'anthropic-ratelimit-requests-remaining',
];
/** Anthropic request headers that select API behaviour (not credentials). */
const PASS_ANTHROPIC_HEADERS = ['anthropic-version', 'anthropic-beta'];

async function readRequest(req: IncomingMessage, limit: number): Promise<Buffer> {
  const tooLarge = () => new GatewayError(413, 'request_too_large', `Request body over ${limit} bytes.`);
  if (Number(req.headers['content-length'] ?? 0) > limit) throw tooLarge();
  const body = await readBody(req, limit);
  if (!body) throw tooLarge();
  return body;
}

export interface LlmGatewayTransportOptions {
  service: LlmGatewayService;
  logger: Logger;
  /** Deadline for the upstream's response headers. @default 120_000 */
  upstreamHeadersTimeoutMs?: number;
}

class HeadersTimeout extends Error {}

/**
 * One upstream call on node:http with kept-alive connections, resolved at the response headers.
 * fetch (undici) spent about 2 ms of CPU per streamed completion here on its WHATWG streams and
 * request bookkeeping; a plain request and the response as a Node stream do not.
 */
function upstreamCall(
  url: URL,
  init: {
    method: string;
    headers: OutgoingHttpHeaders;
    body: string | undefined;
    signal: AbortSignal;
    headersTimeoutMs: number;
    agents: { http: HttpAgent; https: HttpsAgent };
  },
): Promise<IncomingMessage> {
  return new Promise((resolve, reject) => {
    const https = url.protocol === 'https:';
    const req = (https ? httpsRequest : httpRequest)(url, {
      method: init.method,
      headers:
        init.body === undefined
          ? init.headers
          : { ...init.headers, 'content-length': Buffer.byteLength(init.body) },
      agent: https ? init.agents.https : init.agents.http,
      signal: init.signal,
    });
    const timer = setTimeout(() => req.destroy(new HeadersTimeout()), init.headersTimeoutMs);
    req.once('response', (response) => {
      clearTimeout(timer);
      resolve(response);
    });
    req.once('error', (error) => {
      clearTimeout(timer);
      reject(error);
    });
    req.end(init.body);
  });
}

async function readText(response: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of response) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString('utf8');
}

export function createLlmGateway(options: LlmGatewayTransportOptions) {
  const { service } = options;
  const log = options.logger.child({ module: 'llm-gateway' });
  const headersTimeoutMs = options.upstreamHeadersTimeoutMs ?? 120_000;
  const agents = {
    http: new HttpAgent({ keepAlive: true, maxFreeSockets: 64 }),
    https: new HttpsAgent({ keepAlive: true, maxFreeSockets: 64 }),
  };

  function fail(res: ServerResponse, format: LlmFormat, error: GatewayError): void {
    if (res.headersSent) {
      res.destroy();
      return;
    }
    const body = errorBody(format, error.type, error.message);
    res.writeHead(error.status, {
      'content-type': 'application/json',
      'content-length': Buffer.byteLength(body),
      ...error.headers,
    });
    res.end(body);
  }

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const path = (req.url ?? '/').split('?')[0] ?? '/';
    const route = ROUTES[path];
    const format: LlmFormat = path.startsWith('/v1/llm/anthropic/') ? 'anthropic' : 'openai';
    // The caller going away cancels the upstream call (and stops the stream below).
    const abort = new AbortController();
    res.once('close', () => {
      if (!res.writableFinished) abort.abort();
    });
    try {
      if (!route) throw new GatewayError(404, 'not_found', `No LLM gateway route ${req.method} ${path}.`);
      if (req.method !== route.method) {
        throw new GatewayError(405, 'method_not_allowed', `${path} takes ${route.method}.`, {
          allow: route.method,
        });
      }
      const principal = await service.authenticate(req.headers as never);
      const upstream = service.upstream(principal, route.format);

      let body: string | undefined;
      let streaming = false;
      if (route.method === 'POST') {
        const raw = await readRequest(req, LLM_MAX_BODY_BYTES);
        let json: Record<string, unknown>;
        try {
          json = JSON.parse(raw.toString('utf8')) as Record<string, unknown>;
        } catch {
          throw new GatewayError(400, 'invalid_request_error', 'The request body is not JSON.');
        }
        if (!json || typeof json !== 'object' || Array.isArray(json)) {
          throw new GatewayError(400, 'invalid_request_error', 'The request body must be a JSON object.');
        }
        const dropped = trimImages(json, route.format, service.maxImages);
        if (dropped > 0) log.debug({ sessionId: principal.sessionId, dropped }, 'older images replaced');
        streaming = json.stream === true;
        // Usage of a streamed OpenAI answer arrives only when asked for.
        if (streaming && route.format === 'openai') {
          json.stream_options = { ...(json.stream_options as object | undefined), include_usage: true };
        }
        body = JSON.stringify(json);
      }

      const headers: Record<string, string> = {
        accept: streaming ? 'text/event-stream' : 'application/json',
      };
      if (body !== undefined) headers['content-type'] = 'application/json';
      if (route.format === 'openai') {
        if (upstream.apiKey) headers.authorization = `Bearer ${upstream.apiKey}`;
      } else {
        if (upstream.apiKey) headers['x-api-key'] = upstream.apiKey;
        for (const name of PASS_ANTHROPIC_HEADERS) {
          const value = req.headers[name];
          if (typeof value === 'string') headers[name] = value;
        }
        headers['anthropic-version'] ??= '2023-06-01';
      }

      let response: IncomingMessage;
      try {
        response = await upstreamCall(
          new URL(`${upstream.baseUrl.replace(/\/+$/, '')}${route.upstreamPath}`),
          {
            method: route.method,
            headers,
            body,
            signal: abort.signal,
            headersTimeoutMs,
            agents,
          },
        );
      } catch (error) {
        if (abort.signal.aborted) return;
        const cause = (error as { code?: string }).code ?? (error as Error).message;
        throw new GatewayError(
          502,
          'upstream_unreachable',
          error instanceof HeadersTimeout
            ? `The ${route.format} upstream did not answer within ${headersTimeoutMs} ms.`
            : `The ${route.format} upstream could not be reached (${cause}).`,
        );
      }

      const status = response.statusCode ?? 502;
      const mapped = mapUpstreamStatus(status, route.format);
      if (mapped) {
        const detail = (await readText(response).catch(() => '')).slice(0, 2_000);
        log.warn({ sessionId: principal.sessionId, status, detail }, 'upstream refused');
        const retryAfter = response.headers['retry-after'];
        // The caller's own request errors keep the upstream's explanation; credential and outage
        // details stay in the server log.
        const message =
          mapped.type === 'invalid_request' && detail ? `${mapped.message} ${detail}` : mapped.message;
        throw new GatewayError(
          mapped.status,
          mapped.type,
          message,
          typeof retryAfter === 'string' ? { 'retry-after': retryAfter } : {},
        );
      }

      const out: Record<string, string> = {};
      for (const name of PASS_RESPONSE_HEADERS) {
        const value = response.headers[name];
        if (typeof value === 'string' && value) out[name] = value;
      }
      if (streaming) {
        out['cache-control'] = 'no-cache';
        out['x-accel-buffering'] = 'no';
      }
      res.writeHead(status, out);
      // The upstream's first bytes mostly arrive with its headers (already read into the response):
      // then ours leave with them in one write, and the caller wakes once for its first byte, not
      // for the headers and again for the byte. Headers go ahead alone only while the body has not
      // begun, so a slow first token still shows the caller a live answer.
      if (response.readableLength === 0) res.flushHeaders();

      const tracker = new StreamUsage(route.format);
      const whole: Buffer[] = [];
      try {
        for await (const chunk of response as AsyncIterable<Buffer>) {
          if (streaming) tracker.push(chunk);
          else whole.push(chunk);
          if (!res.write(chunk)) {
            await Promise.race([once(res, 'drain'), once(res, 'close')]);
            if (res.destroyed) break;
          }
        }
      } catch (error) {
        if (!abort.signal.aborted) log.warn({ err: (error as Error).message }, 'upstream stream broke');
      }
      if (route.method === 'POST') {
        let usage = tracker.usage;
        if (!streaming) {
          try {
            const found = usageFrom(route.format, JSON.parse(Buffer.concat(whole).toString('utf8')));
            usage = { inputTokens: found?.inputTokens ?? 0, outputTokens: found?.outputTokens ?? 0 };
          } catch {
            // not JSON: counted as a request without usage
          }
        }
        // Recorded before the response ends, so a caller that reads usage next sees this request.
        await service.record(principal.sessionId, usage);
      }
      if (!res.destroyed) res.end();
    } catch (error) {
      if (error instanceof GatewayError) return fail(res, format, error);
      log.error({ err: error, path }, 'llm gateway failure');
      fail(
        res,
        format,
        new GatewayError(500, 'internal_error', 'The LLM gateway failed; see the server log.'),
      );
    }
  }

  return {
    matches: (path: string) => path.startsWith(LLM_PREFIX),
    handle,
    close(): void {
      agents.http.destroy();
      agents.https.destroy();
    },
  };
}
