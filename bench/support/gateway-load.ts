// The session gateway bench's far side in a process of its own: the clients, the stub LLM upstream
// and the previewed app (HTTP, WebSocket echo). In the bench's process they shared one event loop
// with the server under test, and at concurrency 4 each request's proxying queued behind the
// clients' and the stub's work: the gateway's first-byte gap was +1.1 ms sequential and up to
// +4.5 ms concurrent. A deployed server never shares its loop with its callers; here a direct call
// (the baseline) and a call through the server (the value) are both made, and both answered, by
// this process alike.
//
// Forked by bench/session-gateway.ts with the app's port. Messages: it sends {ready: {upstream}}
// (the stub's base URL) once both listen; given {id, task} it answers {id, result} or
// {id, failed}. Given {stop} it closes everything and exits.
import { createServer, request as httpRequest } from 'node:http';
import { performance } from 'node:perf_hooks';
import WebSocket, { WebSocketServer } from 'ws';
import { startStubModel } from '../../test/fixtures/stub-model';
import { loopbackLookup } from '../../test/support/preview';

export type LoadTask =
  /** Streamed chat completions: first byte and total of each. */
  | { kind: 'llm'; url: string; headers: Record<string, string>; count: number; concurrency: number }
  /** GETs, each answered 200. */
  | { kind: 'http'; url: string; headers: Record<string, string>; count: number; concurrency: number }
  /** Sequential echo round trips on one WebSocket. */
  | { kind: 'ws'; url: string; headers: Record<string, string>; count: number }
  /** The cookie a previewUrl's first visit sets (303 to the clean URL), as a Cookie header. */
  | { kind: 'cookie'; url: string };

export type LoadMessage =
  | { ready: { upstream: string } }
  | { id: number; result: unknown }
  | { id: number; failed: string };

async function pool(count: number, concurrency: number, task: () => Promise<void>): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < count) {
        next += 1;
        await task();
      }
    }),
  );
}

/** First byte and total of one streamed completion. */
async function streamed(
  url: string,
  headers: Record<string, string>,
): Promise<{ first: number; total: number }> {
  const started = performance.now();
  const res = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: JSON.stringify({ model: 'stub-model', stream: true, messages: [{ role: 'user', content: 'hi' }] }),
  });
  if (res.status !== 200)
    throw new Error(`HTTP ${res.status} from ${url}: ${(await res.text()).slice(0, 300)}`);
  let first = 0;
  for await (const _chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
    if (first === 0) first = performance.now() - started;
  }
  return { first, total: performance.now() - started };
}

async function llmSamples(task: Extract<LoadTask, { kind: 'llm' }>) {
  const first: number[] = [];
  const total: number[] = [];
  await pool(task.count, task.concurrency, async () => {
    const s = await streamed(task.url, task.headers);
    first.push(s.first);
    total.push(s.total);
  });
  return { first, total };
}

/** One GET over node:http with a loopback lookup (preview hosts are *.localhost names). */
function get(
  url: string,
  headers: Record<string, string>,
): Promise<{ status: number; headers: Record<string, string | string[] | undefined>; body: string }> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(url, { headers, lookup: loopbackLookup }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () =>
        resolve({
          status: res.statusCode ?? 0,
          headers: res.headers,
          body: Buffer.concat(chunks).toString(),
        }),
      );
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end();
  });
}

async function httpSamples(task: Extract<LoadTask, { kind: 'http' }>): Promise<number[]> {
  const samples: number[] = [];
  await pool(task.count, task.concurrency, async () => {
    const started = performance.now();
    const { status, body } = await get(task.url, task.headers);
    if (status !== 200) throw new Error(`HTTP ${status} from ${task.url}: ${body.slice(0, 300)}`);
    samples.push(performance.now() - started);
  });
  return samples;
}

async function wsRoundTrips(task: Extract<LoadTask, { kind: 'ws' }>): Promise<number[]> {
  const ws = new WebSocket(task.url, {
    headers: task.headers,
    lookup: loopbackLookup,
  } as WebSocket.ClientOptions);
  await new Promise((resolve, reject) => {
    ws.once('open', resolve);
    ws.once('error', reject);
  });
  const samples: number[] = [];
  for (let i = 0; i < task.count; i++) {
    const started = performance.now();
    ws.send(String(i));
    await new Promise((resolve) => ws.once('message', resolve));
    samples.push(performance.now() - started);
  }
  ws.close();
  return samples;
}

async function previewCookie(url: string): Promise<string> {
  const res = await get(url, {});
  if (res.status !== 303) throw new Error(`HTTP ${res.status} from the preview URL`);
  const setCookie = res.headers['set-cookie'];
  const pair = (Array.isArray(setCookie) ? setCookie[0] : setCookie)?.split(';')[0];
  if (!pair) throw new Error('the preview URL set no cookie');
  return pair;
}

function perform(task: LoadTask): Promise<unknown> {
  switch (task.kind) {
    case 'llm':
      return llmSamples(task);
    case 'http':
      return httpSamples(task);
    case 'ws':
      return wsRoundTrips(task);
    case 'cookie':
      return previewCookie(task.url);
  }
}

async function main(): Promise<void> {
  const appPort = Number(process.argv[2]);
  if (!appPort || !process.send) {
    console.error('usage: fork(gateway-load.ts, [appPort])');
    process.exit(2);
  }
  const send = (message: LoadMessage) => process.send!(message);
  const stub = await startStubModel({ reply: 'Done.' });
  const app = createServer((_req, res) => res.writeHead(200, { 'content-type': 'text/plain' }).end('ok'));
  const wss = new WebSocketServer({ server: app });
  wss.on('connection', (ws) => ws.on('message', (data) => ws.send(data)));
  await new Promise<void>((resolve) => app.listen(appPort, '127.0.0.1', resolve));

  process.on('message', (message: { id: number; task: LoadTask } | { stop: true }) => {
    if ('stop' in message) {
      for (const client of wss.clients) client.terminate();
      app.closeAllConnections();
      app.close();
      void stub.close().finally(() => process.exit(0));
      return;
    }
    perform(message.task).then(
      (result) => send({ id: message.id, result }),
      (error: unknown) => send({ id: message.id, failed: String((error as Error).message ?? error) }),
    );
  });
  send({ ready: { upstream: stub.baseURL } });
}

void main();
