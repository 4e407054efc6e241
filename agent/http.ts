// The daemon's outgoing HTTP (the API, the LLM gateway's model list, OpenCode) on node:http, with
// the little of fetch's surface the daemon uses. Global fetch loads undici on first use, which alone
// costs the idle daemon ~15 MiB of resident memory; node:http is loaded anyway for the proxy.
// node:https is imported only when a URL asks for it. Keep-alive comes from the global agents.
import { type IncomingMessage, request as httpRequest } from 'node:http';

export interface HttpRequestInit {
  /** @default 'GET' */
  method?: string;
  headers?: Record<string, string>;
  body?: string;
  /** Aborts the request, or the reading of its answer. */
  signal?: AbortSignal;
}

export interface HttpResponse {
  status: number;
  /** 2xx */
  ok: boolean;
  /** The answer's body as a stream (async-iterable chunks). */
  body: IncomingMessage;
  /** The whole body as UTF-8. */
  text(): Promise<string>;
  json(): Promise<unknown>;
}

/** Sends a request to an http: or https: URL; resolves once the answer's head arrived. */
export type HttpRequester = (url: string, init?: HttpRequestInit) => Promise<HttpResponse>;

async function readText(body: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of body) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString('utf8');
}

export const request: HttpRequester = async (url, init = {}) => {
  const target = new URL(url);
  let send: typeof httpRequest;
  if (target.protocol === 'http:') send = httpRequest;
  else if (target.protocol === 'https:') send = (await import('node:https')).request;
  else throw new TypeError(`unsupported protocol ${target.protocol}`);
  const body = init.body === undefined ? undefined : Buffer.from(init.body, 'utf8');
  const headers: Record<string, string> = { ...init.headers };
  if (body) headers['content-length'] = String(body.length);
  init.signal?.throwIfAborted();
  return new Promise<HttpResponse>((resolve, reject) => {
    const req = send(target, { method: init.method ?? 'GET', headers, signal: init.signal }, (res) => {
      const status = res.statusCode ?? 0;
      let text: Promise<string> | undefined;
      const read = (): Promise<string> => {
        text ??= readText(res);
        return text;
      };
      resolve({
        status,
        ok: status >= 200 && status < 300,
        body: res,
        text: read,
        json: async () => JSON.parse(await read()) as unknown,
      });
    });
    req.on('error', reject);
    req.end(body);
  });
};
