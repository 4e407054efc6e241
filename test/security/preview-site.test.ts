// Attacks on previews and share links (issue 42, items 2 and 3), against a real LOCAL session:
//  - a public VIEW_ONLY share link read the daemon's GET /singulacomp/messages (the conversation);
//  - an INTERACTIVE share link posted /singulacomp/message (a turn: commands, LLM spend);
//  - a sessions:read PAT started a turn through a preview path …/singulacomp/message;
//  - OpenCode's own port (random on LOCAL) was previewable and shareable, and a refused port
//    answered differently from an unused one, so it could be found by scanning.
// Preview and share traffic now reaches only the target app port, whatever the path: every request
// below lands in the app, which records it. Item 4's browser half is test/web/preview-isolation.
import { readFileSync } from 'node:fs';
import { type Server, createServer } from 'node:http';
import { decodeJwt, decodeProtectedHeader } from 'jose';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { freePort } from '../../contract/ports';
import { CreateShareLinkDocument, SandboxPreviewUrlDocument } from '../generated/graphql';
import type { LiveSession } from '../leases/helpers';
import { createPreviewClient, previewWebSocket, under } from '../support/preview';
import { E2E_SETUP_TIMEOUT_MS, type E2e, startE2e, appBesideDaemon, startReadySession } from '../e2e/helpers';

interface Received {
  method: string;
  url: string;
  body: string;
}

/** The sandbox's app: answers every path with what it received, and serves a service worker. */
async function startApp(port: number): Promise<{ server: Server; received: Received[] }> {
  const received: Received[] = [];
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks).toString();
      received.push({ method: req.method ?? '', url: req.url ?? '', body });
      if (req.url === '/sw.js') {
        res.writeHead(200, { 'content-type': 'text/javascript', 'service-worker-allowed': '/' });
        res.end('self.addEventListener("fetch", () => {});');
        return;
      }
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ from: 'app', method: req.method, url: req.url }));
    });
  });
  await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve));
  return { server, received };
}

/** The status line and body a WebSocket upgrade is refused with (admin token). */
function refusedUpgrade(
  url: string,
  token: string,
): Promise<{ status: number; message: string; body: string }> {
  return new Promise((resolve, reject) => {
    const ws = previewWebSocket(url.replace(/^http/, 'ws'), { authorization: `Bearer ${token}` });
    ws.on('open', () => reject(new Error(`${url} upgraded`)));
    ws.on('unexpected-response', (_req, res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () =>
        resolve({
          status: res.statusCode!,
          message: res.statusMessage!,
          body: Buffer.concat(chunks).toString(),
        }),
      );
    });
    ws.on('error', () => {});
  });
}

describe('previews and share links reach only the app port', () => {
  let e: E2e;
  let s: LiveSession;
  let app: Awaited<ReturnType<typeof startApp>>;
  let appPort: number;
  let opencodePort: number;
  let servicePort: number;
  let readerPat: string;

  beforeAll(async () => {
    appPort = await freePort();
    e = await startE2e(appBesideDaemon(appPort));
    app = await startApp(appPort);
    s = await startReadySession(e);
    const db = e.t.app.services.db;
    const sandbox = await db.sandbox.findUniqueOrThrow({ where: { id: s.sandboxId } });
    servicePort = Number(new URL(sandbox.serviceUrl!).port);
    // OpenCode's port on LOCAL is random: the provider hands it to the daemon on its command line.
    const daemon = await e.daemonPid(sandbox.providerSandboxId!);
    // One argument each, or inside the `sh -c` command line of an isolated sandbox.
    const cmdline = readFileSync(`/proc/${daemon}/cmdline`, 'utf8');
    opencodePort = Number(/--opencode-port[\0 ]+(\d+)/.exec(cmdline)?.[1]);
    expect(opencodePort).toBeGreaterThan(0);
    const session = await db.session.findUniqueOrThrow({ where: { id: s.sessionId } });
    const admin = await db.user.findFirstOrThrow({ where: { accountId: session.accountId, role: 'ADMIN' } });
    readerPat = (
      await e.t.app.services.tokens.createPersonalAccessToken(
        {
          kind: 'USER',
          userId: admin.id,
          accountId: session.accountId,
          isAdmin: true,
          scopes: new Set(['sessions:read', 'sessions:write']),
          tokenId: '',
          expiresAt: null,
        },
        { name: 'reader', scopes: ['sessions:read'] },
      )
    ).secret;
  }, E2E_SETUP_TIMEOUT_MS);
  afterAll(async () => {
    app?.server.closeAllConnections();
    await new Promise((resolve) => app?.server.close(resolve));
    await e?.stop();
  });

  const inAnHour = () => new Date(Date.now() + 3_600_000).toISOString();
  async function share(mode: 'VIEW_ONLY' | 'INTERACTIVE', port = appPort) {
    const res = await e.t.request(CreateShareLinkDocument, {
      input: { sandboxId: s.sandboxId, port, mode, expiresAt: inAnHour() },
    });
    return res.data!.createShareLink;
  }
  async function shareUrl(mode: 'VIEW_ONLY' | 'INTERACTIVE'): Promise<string> {
    const link = await share(mode);
    if (link.__typename !== 'CreateShareLinkSuccess') throw new Error(JSON.stringify(link));
    return link.url;
  }
  /** How many requests the daemon's conversation route has started (a turn reaches the stub model). */
  const turns = () => e.stub.requests.filter((r) => !JSON.stringify(r.messages).includes('title')).length;

  test('a VIEW_ONLY share link reading /singulacomp/messages gets the app, not the conversation', async () => {
    const url = await shareUrl('VIEW_ONLY');
    const client = createPreviewClient();
    const res = await client.request(under(url, 'singulacomp/messages'));
    expect(res.status).toBe(200);
    expect(JSON.parse(res.body)).toEqual({ from: 'app', method: 'GET', url: '/singulacomp/messages' });
    expect(res.body).not.toContain('"messages"');
  });

  test('an INTERACTIVE share link posting /singulacomp/message reaches the app and starts no turn', async () => {
    const url = await shareUrl('INTERACTIVE');
    const client = createPreviewClient();
    // The first visit trades the link's token for a cookie; the POST then carries only the cookie.
    expect((await client.request(url)).status).toBe(200);
    const before = turns();
    const target = under(url, 'singulacomp/message').split('?')[0]!;
    const res = await client.request(target, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ text: 'run rm -rf / please' }),
    });
    expect(JSON.parse(res.body)).toEqual({ from: 'app', method: 'POST', url: '/singulacomp/message' });
    expect(app.received.at(-1)).toEqual({
      method: 'POST',
      url: '/singulacomp/message',
      body: JSON.stringify({ text: 'run rm -rf / please' }),
    });
    const sandbox = await e.t.app.services.db.sandbox.findUniqueOrThrow({ where: { id: s.sandboxId } });
    expect(sandbox.runtimeState).not.toBe('BUSY');
    expect(turns()).toBe(before);
  });

  test('a sessions:read PAT posting …/singulacomp/message through a preview reaches the app, never a turn', async () => {
    const asked = await e.t.request(SandboxPreviewUrlDocument, { id: s.sandboxId, port: appPort }, readerPat);
    const base = asked.data!.sandbox!.previewUrl.url.split('?')[0]!;
    const before = turns();
    const res = await createPreviewClient().request(under(base, 'singulacomp/message'), {
      method: 'POST',
      headers: { authorization: `Bearer ${readerPat}`, 'content-type': 'application/json' },
      body: JSON.stringify({ text: 'hello' }),
    });
    expect(JSON.parse(res.body)).toEqual({ from: 'app', method: 'POST', url: '/singulacomp/message' });
    expect(turns()).toBe(before);
    // The agent route refuses the same PAT, as before.
    const agent = await fetch(`${e.t.url}/v1/sessions/${s.sessionId}/agent/session`, {
      headers: { authorization: `Bearer ${readerPat}` },
    });
    expect(agent.status).toBe(403);
  });

  test('OpenCode’s port and the daemon’s port are refused when a share link or a preview URL is made', async () => {
    for (const port of [opencodePort, servicePort]) {
      const created = await share('INTERACTIVE', port);
      expect(created, `share of ${port}`).toMatchObject({
        __typename: 'ValidationError',
        field: ['input', 'port'],
      });
      const asked = await e.t.request(SandboxPreviewUrlDocument, { id: s.sandboxId, port });
      expect(asked.errors?.[0]?.extensions?.code, `previewUrl of ${port}`).toBe('BAD_USER_INPUT');
    }
  });

  test('through a share link or a preview, OpenCode’s port and the daemon’s port answer exactly like an unused port', async () => {
    const unused = await freePort();
    // A link whose port was changed behind the API's back, and a preview with a PAT.
    const link = await share('INTERACTIVE');
    if (link.__typename !== 'CreateShareLinkSuccess') throw new Error(JSON.stringify(link));
    const linkId = (await e.t.app.services.db.shareLink.findFirstOrThrow({ orderBy: { createdAt: 'desc' } }))
      .id;
    const signed = (await e.t.request(SandboxPreviewUrlDocument, { id: s.sandboxId, port: appPort })).data!
      .sandbox!.previewUrl.url;
    const previewBase = (port: number) =>
      signed.split('?')[0]!.replace(`p${appPort}-`, `p${port}-`).replace(`/${appPort}/`, `/${port}/`);
    const answers = new Map<string, string>();
    for (const port of [unused, opencodePort, servicePort]) {
      await e.t.app.services.db.shareLink.update({ where: { id: linkId }, data: { port } });
      const shared = await createPreviewClient().request(under(link.url, 'config/providers'));
      const previewed = await createPreviewClient().request(under(previewBase(port), 'config/providers'), {
        headers: { authorization: `Bearer ${e.t.adminToken}` },
      });
      for (const [kind, res] of [
        ['share', shared],
        ['preview', previewed],
      ] as const) {
        expect(res.body, `${kind} of ${port}`).not.toContain(s.token);
        // Every header but the date and the request id, with its value.
        const headers = Object.entries(res.headers)
          .filter(([name]) => name !== 'date' && name !== 'x-request-id')
          .sort(([a], [b]) => a.localeCompare(b));
        answers.set(`${kind}:${port}`, JSON.stringify({ status: res.status, headers, body: res.body }));
      }
    }
    // A WebSocket to each port through the preview: the same refusal too.
    for (const port of [unused, opencodePort, servicePort]) {
      answers.set(`ws:${port}`, JSON.stringify(await refusedUpgrade(previewBase(port), e.t.adminToken)));
    }
    for (const kind of ['share', 'preview', 'ws']) {
      expect(answers.get(`${kind}:${opencodePort}`), `${kind}: OpenCode's port`).toBe(
        answers.get(`${kind}:${unused}`),
      );
      expect(answers.get(`${kind}:${servicePort}`), `${kind}: the daemon's port`).toBe(
        answers.get(`${kind}:${unused}`),
      );
    }
    expect(JSON.parse(answers.get(`share:${unused}`)!).status).toBeGreaterThanOrEqual(400);
  });

  test('previewed responses lose Service-Worker-Allowed', async () => {
    const url = await shareUrl('VIEW_ONLY');
    const res = await createPreviewClient().request(under(url, 'sw.js'));
    expect(res.status).toBe(200);
    expect(res.body).toContain('addEventListener');
    expect(res.headers['service-worker-allowed']).toBeUndefined();
  });
  test('a preview URL carries a jose-signed JWT bound to its sandbox, port, user and expiry', async () => {
    const asked = (await e.t.request(SandboxPreviewUrlDocument, { id: s.sandboxId, port: appPort })).data!
      .sandbox!.previewUrl;
    const url = new URL(asked.url);
    const token = url.searchParams.get('singulacomp_preview')!;
    expect(decodeProtectedHeader(token)).toEqual({ alg: 'HS256', typ: 'JWT' });
    const claims = decodeJwt(token);
    expect(claims).toEqual({
      iss: 'singulacomp',
      aud: 'singulacomp-preview',
      sub: expect.any(String),
      sbx: s.sandboxId,
      port: appPort,
      exp: Math.floor(Date.parse(asked.expiresAt as string) / 1000),
    });
    const open = (value: string) => {
      const forged = new URL(url);
      forged.searchParams.set('singulacomp_preview', value);
      return createPreviewClient().request(forged.toString());
    };
    expect((await open(token)).status).toBe(200);
    // The same claims for another port, under the original signature; and an unsigned token.
    const [header, , signature] = token.split('.');
    const otherPort = Buffer.from(JSON.stringify({ ...claims, port: appPort + 1 })).toString('base64url');
    expect((await open(`${header}.${otherPort}.${signature}`)).status).toBe(401);
    const none = Buffer.from(JSON.stringify({ alg: 'none', typ: 'JWT' })).toString('base64url');
    const payload = Buffer.from(JSON.stringify(claims)).toString('base64url');
    expect((await open(`${none}.${payload}.`)).status).toBe(401);
  });
});
