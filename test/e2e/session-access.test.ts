// Reaching a running session from outside on LOCAL: OpenCode's own API through
// /v1/sessions/<id>/agent with @opencode-ai/sdk and a PAT; a page served on a sandbox port through
// its preview origin on the preview site (HTTP and WebSocket echo, framing headers stripped, port
// 8000 refused, the old path forms redirected); public share links in both modes on their own
// origins; and an idle session with an open preview is still reaped. The preview site is the
// zero-config default, p<port>-<sandbox>.localhost:<API port> (test/support/preview.ts).
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { AddressInfo } from 'node:net';
import { createOpencodeClient } from '@opencode-ai/sdk';
import { once } from 'node:events';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import WebSocket, { WebSocketServer } from 'ws';
import { IMAGE_PLACEHOLDER } from '../../resolvers/gateway/llm';
import {
  AgentSessionDocument,
  CreateShareLinkDocument,
  RevokeShareLinkDocument,
  SandboxPreviewUrlDocument,
  SandboxShareLinksDocument,
} from '../generated/graphql';
import { type LiveSession, createProject, startSession } from '../leases/helpers';
import { waitFor } from '../support/wait';
import { UNREACHABLE_PORT_STATUS, freePort } from '../../contract/ports';
import { createPreviewClient, previewWebSocket } from '../support/preview';
import { type E2e, startE2e } from './helpers';

/** A 1×1 PNG. */
const PNG =
  'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==';

/** The app a user runs in the sandbox: a page that forbids framing, an echo endpoint, a WebSocket echo. */
async function startSandboxApp(port: number): Promise<{
  port: number;
  server: Server;
  beacons: string[];
  close(): Promise<void>;
}> {
  const beacons: string[] = [];
  const server = createServer((req, res) => {
    if (req.url?.startsWith('/echo')) {
      beacons.push(req.url);
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(
          JSON.stringify({
            method: req.method,
            url: req.url,
            body: Buffer.concat(chunks).toString(),
            cookie: req.headers.cookie ?? null,
            authorization: req.headers.authorization ?? null,
          }),
        );
      });
      return;
    }
    res.writeHead(200, {
      'content-type': 'text/html',
      'x-frame-options': 'DENY',
      'content-security-policy':
        "default-src 'self'; script-src 'self' 'unsafe-inline'; frame-ancestors 'none'; img-src *",
    });
    // Once rendered, the page reports (relative to itself, so through the preview) whether it is framed.
    res.end(
      req.method === 'HEAD'
        ? undefined
        : `<!doctype html><title>sandbox app</title><h1>hello from the sandbox</h1>
<script>fetch('echo?framed=' + (window.self !== window.top)).catch(() => {});</script>`,
    );
  });
  const wss = new WebSocketServer({ server });
  wss.on('connection', (ws) => ws.on('message', (data) => ws.send(`echo:${data.toString()}`)));
  await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve));
  return {
    port: (server.address() as AddressInfo).port,
    server,
    beacons,
    close: async () => {
      for (const client of wss.clients) client.terminate();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

function wsEcho(
  url: string,
  headers: Record<string, string> = {},
): Promise<{ reply?: string; status?: number; body?: string }> {
  return new Promise((resolve) => {
    const ws = previewWebSocket(url, headers);
    ws.on('open', () => ws.send('ping'));
    ws.on('message', (data) => {
      resolve({ reply: data.toString() });
      ws.close();
    });
    ws.on('unexpected-response', (_req, res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode, body: Buffer.concat(chunks).toString() }));
    });
    ws.on('error', () => {});
  });
}

describe('reaching a session from outside', () => {
  let e: E2e;
  let s: LiveSession;
  let pat: string;
  let app: Awaited<ReturnType<typeof startSandboxApp>>;
  let servicePort: number;

  beforeAll(async () => {
    // The app plays one the image starts beside the daemon: a host process the test controls, so the
    // sandbox runs unisolated on the host's loopback and the daemon is told the app's port.
    const appPort = await freePort();
    e = await startE2e({
      gateway: true,
      daemonEnv: { SINGULACOMP_ATTACHMENT_OFFLOAD: '0', SINGULACOMP_PROXY_EXTRA_PORTS: String(appPort) },
      env: {
        SINGULACOMP_LOCAL_ISOLATION: 'none',
        // The reaping test ticks the reaper itself: a background tick would race it for the fleet
        // lock (its tick then returns ran: false) or reap the session first.
        SINGULACOMP_REAPER_INTERVAL_MS: String(3_600_000),
      },
    });
    pat = e.t.adminToken;
    s = await startSession(e.t, await createProject(e.t, e.repo.url));
    await waitFor(async () => {
      const v = await e.t.request(AgentSessionDocument, { id: s.sessionId });
      return v.data?.session?.sandbox?.runtimeState === 'HEALTHY';
    }, 90_000);
    app = await startSandboxApp(appPort);
    const sandbox = await e.t.app.services.db.sandbox.findUniqueOrThrow({ where: { id: s.sandboxId } });
    servicePort = Number(new URL(sandbox.serviceUrl!).port);
  });
  afterAll(async () => {
    await app?.close();
    await e?.stop();
  });

  describe('the agent proxy', () => {
    test('@opencode-ai/sdk with a PAT lists sessions and receives events', async () => {
      const client = createOpencodeClient({
        baseUrl: `${e.t.url}/v1/sessions/${s.sessionId}/agent`,
        headers: { authorization: `Bearer ${pat}` },
      });
      const created = await client.session.create({ body: { title: 'through the proxy' } });
      expect(created.response.status).toBe(200);
      const list = await client.session.list();
      expect(list.data?.map((x) => x.id)).toContain(created.data!.id);

      const events = await client.event.subscribe();
      const first = await events.stream.next();
      expect((first.value as { type: string }).type).toBe('server.connected');
      // An event caused through the proxy arrives on the proxied stream.
      await client.session.update({ path: { id: created.data!.id }, body: { title: 'renamed' } });
      let seen = false;
      for await (const event of events.stream) {
        if ((event as { type: string }).type === 'session.updated') {
          seen = (event as { properties: { info: { title: string } } }).properties.info.title === 'renamed';
          if (seen) break;
        }
      }
      expect(seen).toBe(true);
    });

    test('without a token, or with another account’s token, the agent is not reachable', async () => {
      const none = await fetch(`${e.t.url}/v1/sessions/${s.sessionId}/agent/session`);
      expect(none.status).toBe(401);
      const other = await e.t.seedAccount();
      const foreign = await fetch(`${e.t.url}/v1/sessions/${s.sessionId}/agent/session`, {
        headers: { authorization: `Bearer ${other.token}` },
      });
      expect(foreign.status).toBe(403);
      const readOnly = await e.t.app.services.tokens.createPersonalAccessToken(
        {
          kind: 'USER',
          userId: (
            await e.t.app.services.db.user.findFirstOrThrow({
              where: { role: 'ADMIN', account: { tier: 'TEAM' } },
            })
          ).id,
          accountId: (await e.t.app.services.db.session.findUniqueOrThrow({ where: { id: s.sessionId } }))
            .accountId,
          isAdmin: true,
          scopes: new Set(['sessions:read', 'sessions:write']),
          tokenId: '',
          expiresAt: null,
        },
        { name: 'reader', scopes: ['sessions:read'] },
      );
      const reader = await fetch(`${e.t.url}/v1/sessions/${s.sessionId}/agent/session`, {
        headers: { authorization: `Bearer ${readOnly.secret}` },
      });
      expect(reader.status).toBe(403);
    });

    test('a browser WebSocket carries its token as a subprotocol: a shell over the PTY API; a wrong token is refused', async () => {
      const base = `${e.t.url}/v1/sessions/${s.sessionId}/agent`;
      const created = await fetch(`${base}/pty`, {
        method: 'POST',
        headers: { authorization: `Bearer ${pat}`, 'content-type': 'application/json' },
        body: JSON.stringify({ title: 'subprotocol' }),
      });
      expect(created.status).toBe(200);
      const { id } = (await created.json()) as { id: string };
      const url = `${base.replace(/^http/, 'ws')}/pty/${id}/connect`;
      try {
        const ws = new WebSocket(url, ['singulacomp.v1', `singulacomp.bearer.${pat}`]);
        let output = '';
        ws.on('message', (data, binary) => {
          if (!binary) output += data.toString();
        });
        await once(ws, 'open');
        // A browser fails a handshake whose answer names none of the protocols it offered.
        expect(ws.protocol).toBe('singulacomp.v1');
        ws.send('echo sum=$((40+2))\r');
        await waitFor(async () => output.includes('sum=42'), { what: 'the shell output' });
        ws.close();

        const refused = await new Promise<number>((resolve) => {
          const bad = new WebSocket(url, ['singulacomp.v1', 'singulacomp.bearer.singulacomp_pat_wrong']);
          bad.on('unexpected-response', (_req, res) => resolve(res.statusCode ?? 0));
          bad.on('error', () => {});
        });
        expect(refused).toBe(401);
      } finally {
        await fetch(`${base}/pty/${id}`, { method: 'DELETE', headers: { authorization: `Bearer ${pat}` } });
      }
    });

    test('a prompt with 14 images reaches the upstream with the newest 12', async () => {
      const base = `${e.t.url}/v1/sessions/${s.sessionId}/agent`;
      const headers = { authorization: `Bearer ${pat}`, 'content-type': 'application/json' };
      const session = (await (
        await fetch(`${base}/session`, { method: 'POST', headers, body: '{}' })
      ).json()) as { id: string };
      const before = e.stub.requests.length;
      const parts = [
        { type: 'text', text: 'Describe these screenshots.' },
        ...Array.from({ length: 14 }, (_, i) => ({
          type: 'file',
          mime: 'image/png',
          filename: `shot-${i + 1}.png`,
          url: `data:image/png;base64,${PNG}`,
        })),
      ];
      const sent = await fetch(`${base}/session/${session.id}/prompt_async`, {
        method: 'POST',
        headers,
        body: JSON.stringify({ parts }),
      });
      expect(sent.status, await sent.clone().text()).toBe(204);
      const request = await waitFor(
        async () =>
          e.stub.requests
            .slice(before)
            .find(
              (r) =>
                JSON.stringify(r.messages).includes('image_url') &&
                !JSON.stringify(r.messages).includes('title generator'),
            ),
        60_000,
      );
      const sentText = JSON.stringify(request.messages);
      expect(sentText.split('"type":"image_url"').length - 1).toBe(12);
      expect(sentText.split(IMAGE_PLACEHOLDER).length - 1).toBe(2);
      // The attachments are served through the API for the transcript's readers.
      await waitFor(async () => {
        const statuses = await (await fetch(`${base}/session/status`, { headers })).json();
        return !(statuses as Record<string, unknown>)[session.id];
      }, 60_000);
    });
  });

  describe('previews', () => {
    const previewUrl = async (port: number, form?: 'PATH' | 'SUBDOMAIN') => {
      const res = await e.t.request(SandboxPreviewUrlDocument, { id: s.sandboxId, port, form }, pat);
      return res;
    };
    const apiPort = () => new URL(e.t.url).port;
    const origin = (port: number) => `http://p${port}-${s.sandboxId}.localhost:${apiPort()}`;

    test('a signed preview URL on the preview site sets a cookie of that origin; the page arrives without framing restrictions', async () => {
      const res = await previewUrl(app.port);
      const url = res.data!.sandbox!.previewUrl.url;
      expect(url.startsWith(`${origin(app.port)}/?singulacomp_preview=`)).toBe(true);
      // The deprecated PATH form names the same origin.
      expect((await previewUrl(app.port, 'PATH')).data!.sandbox!.previewUrl.url).toContain(origin(app.port));
      const client = createPreviewClient();
      const opened = await client.request(url, { follow: false });
      expect(opened.status).toBe(303);
      expect(opened.headers.location).toBe('/');
      const cookie = String((opened.headers['set-cookie'] as string[])[0]);
      expect(cookie).toContain('Path=/;');
      expect(cookie).toContain('HttpOnly');
      expect(cookie).toContain('Partitioned');
      expect(cookie).not.toContain('Domain=');
      const page = await client.request(`${origin(app.port)}/`);
      expect(page.status).toBe(200);
      expect(page.body).toContain('hello from the sandbox');
      expect(page.headers['x-frame-options']).toBeUndefined();
      expect(page.headers['content-security-policy']).toBe(
        "default-src 'self'; script-src 'self' 'unsafe-inline'; img-src *",
      );
      // The preview cookie is ours: the app never sees it.
      const echo = await client.request(`${origin(app.port)}/echo`, {
        headers: { cookie: `${client.cookieHeader(origin(app.port))}; theme=dark` },
      });
      expect((JSON.parse(echo.body) as { cookie: string }).cookie).toBe('theme=dark');
      // The cookie opens only this preview.
      const elsewhere = await createPreviewClient().request(`${origin(app.port + 1)}/`, {
        headers: { cookie: client.cookieHeader(origin(app.port)) },
      });
      expect(elsewhere.status).toBe(401);
    });

    test('an API token works too, a WebSocket echoes, and no credential is refused', async () => {
      const page = await createPreviewClient().request(`${origin(app.port)}/echo?x=1`, {
        method: 'POST',
        headers: { authorization: `Bearer ${pat}` },
        body: 'hi',
      });
      expect(JSON.parse(page.body)).toEqual({
        method: 'POST',
        url: '/echo?x=1',
        body: 'hi',
        cookie: null,
        authorization: null,
      });
      const echoed = await wsEcho(`${origin(app.port).replace(/^http/, 'ws')}/`, {
        authorization: `Bearer ${pat}`,
      });
      expect(echoed.reply).toBe('echo:ping');
      const anonymous = await createPreviewClient().request(`${origin(app.port)}/`);
      expect(anonymous.status).toBe(401);
    });

    test('the old path form on the API origin redirects to the preview site and proxies nothing', async () => {
      const before = app.beacons.length;
      const old = await fetch(`${e.t.url}/v1/p/${s.sandboxId}/${app.port}/echo?x=1`, {
        method: 'POST',
        headers: { authorization: `Bearer ${pat}` },
        body: 'hi',
        redirect: 'manual',
      });
      expect(old.status).toBe(308);
      expect(old.headers.get('location')).toBe(`${origin(app.port)}/echo?x=1`);
      expect(app.beacons.length).toBe(before);
      const upgrade = await wsEcho(`${e.t.wsUrl.replace('/graphql', '')}/v1/p/${s.sandboxId}/${app.port}/`, {
        authorization: `Bearer ${pat}`,
      });
      expect(upgrade.status).toBe(410);
      expect(upgrade.body).toContain(origin(app.port));
      // The preview site's hosts are never the API: /graphql there is the app's path.
      const graphql = await createPreviewClient().request(`${origin(app.port)}/graphql`, {
        headers: { authorization: `Bearer ${pat}` },
      });
      expect(graphql.body).toContain('hello from the sandbox');
    });

    test('a signed preview URL loads in an iframe of another origin in headless Chromium', async () => {
      const signed = (await previewUrl(app.port)).data!.sandbox!.previewUrl.url;
      const parent = createServer((_req, res) => {
        res.writeHead(200, { 'content-type': 'text/html' });
        res.end(
          `<!doctype html><title>dashboard</title><iframe src="${signed}" width="800" height="600"></iframe>`,
        );
      });
      await new Promise<void>((resolve) => parent.listen(0, '127.0.0.1', resolve));
      const profile = mkdtempSync(join(tmpdir(), 'sc-chromium-'));
      const chromium = spawn(
        'chromium',
        [
          '--headless=new',
          '--no-sandbox',
          '--disable-gpu',
          '--no-first-run',
          `--user-data-dir=${profile}`,
          `http://127.0.0.1:${(parent.address() as AddressInfo).port}/`,
        ],
        // Its own process group: the browser's helper processes go with it.
        { stdio: 'ignore', detached: true },
      );
      const exited = once(chromium, 'exit');
      try {
        // Only a page that rendered inside the frame (framing headers gone, cookie set by the
        // signed URL and sent back) can report framed=true through the preview.
        await waitFor(async () => app.beacons.includes('/echo?framed=true'), 60_000);
      } finally {
        try {
          process.kill(-chromium.pid!, 'SIGKILL');
        } catch {
          // already gone
        }
        await exited;
        parent.closeAllConnections();
        parent.close();
        // A helper process may still be writing its last files into the profile for a moment.
        rmSync(profile, { recursive: true, force: true, maxRetries: 10, retryDelay: 100 });
      }
    });

    test('port 8000 and the daemon’s own port are never proxied', async () => {
      const asked = await previewUrl(8000);
      expect(asked.errors?.[0]).toMatchObject({ extensions: { code: 'BAD_USER_INPUT' } });
      expect(asked.errors?.[0]?.message).toContain('8000');
      for (const port of [8000, servicePort]) {
        const res = await createPreviewClient().request(`${origin(port)}/`, {
          headers: { authorization: `Bearer ${pat}` },
        });
        expect(res.status).toBe(UNREACHABLE_PORT_STATUS);
      }
    });
  });

  describe('share links', () => {
    const inAnHour = () => new Date(Date.now() + 3_600_000).toISOString();
    async function share(mode: 'VIEW_ONLY' | 'INTERACTIVE', port = app.port) {
      const res = await e.t.request(
        CreateShareLinkDocument,
        { input: { sandboxId: s.sandboxId, port, mode, expiresAt: inAnHour() } },
        pat,
      );
      return res.data!.createShareLink;
    }
    const latestLink = () =>
      e.t.app.services.db.shareLink.findFirstOrThrow({ orderBy: { createdAt: 'desc' } });
    const get = (url: string, init?: Parameters<ReturnType<typeof createPreviewClient>['request']>[1]) =>
      createPreviewClient().request(url, init);

    test('a view-only link on its own origin allows GET and HEAD only, and no WebSocket', async () => {
      const link = await share('VIEW_ONLY');
      if (link.__typename !== 'CreateShareLinkSuccess') throw new Error(JSON.stringify(link));
      const stored = await latestLink();
      expect(link.url).toMatch(
        new RegExp(`^http://s-${stored.id}\\.localhost:\\d+/\\?singulacomp_share=[A-Za-z0-9_-]+$`),
      );
      expect(link.url).not.toContain(stored.secretHash);
      expect(stored.secretHash).toMatch(/^[0-9a-f]{64}$/);
      const client = createPreviewClient();
      const page = await client.request(link.url);
      expect(page.status).toBe(200);
      expect(page.url).toBe(`${new URL(link.url).origin}/`);
      expect(page.body).toContain('hello from the sandbox');
      expect(page.headers['x-frame-options']).toBeUndefined();
      const origin = new URL(link.url).origin;
      expect((await client.request(`${origin}/`, { method: 'HEAD' })).status).toBe(200);
      expect((await client.request(`${origin}/echo`, { method: 'POST', body: 'x' })).status).toBe(405);
      const ws = await wsEcho(link.url.replace(/^http/, 'ws'));
      expect(ws.status).toBe(403);
      // The secret opens only its own link's origin.
      const other = await share('VIEW_ONLY');
      if (other.__typename !== 'CreateShareLinkSuccess') throw new Error(JSON.stringify(other));
      const swapped = `${new URL(other.url).origin}/?${new URL(link.url).searchParams}`;
      expect((await get(swapped)).status).toBe(404);
    });

    test('an interactive link allows every method and WebSocket', async () => {
      const link = await share('INTERACTIVE');
      if (link.__typename !== 'CreateShareLinkSuccess') throw new Error(JSON.stringify(link));
      const client = createPreviewClient();
      expect((await client.request(link.url)).status).toBe(200);
      const origin = new URL(link.url).origin;
      const post = await client.request(`${origin}/echo`, { method: 'POST', body: 'data' });
      expect(JSON.parse(post.body)).toMatchObject({ method: 'POST', body: 'data', cookie: null });
      const put = await client.request(`${origin}/echo`, { method: 'PUT', body: 'more' });
      expect(JSON.parse(put.body)).toMatchObject({ method: 'PUT', body: 'more' });
      expect((await wsEcho(link.url.replace(/^http/, 'ws'))).reply).toBe('echo:ping');
    });

    test('the old share path on the API origin redirects to the link’s origin', async () => {
      const link = await share('VIEW_ONLY');
      if (link.__typename !== 'CreateShareLinkSuccess') throw new Error(JSON.stringify(link));
      const secret = new URL(link.url).searchParams.get('singulacomp_share')!;
      const old = await fetch(`${e.t.url}/v1/share/${secret}/echo`, { redirect: 'manual' });
      expect(old.status).toBe(308);
      expect(old.headers.get('location')).toBe(
        `${new URL(link.url).origin}/echo?singulacomp_share=${secret}`,
      );
      expect((await fetch(`${e.t.url}/v1/share/${'x'.repeat(32)}/`, { redirect: 'manual' })).status).toBe(
        404,
      );
    });

    test.each([22, 4096, 8000, 8080])('port %i is refused at creation', async (port) => {
      const link = await share('INTERACTIVE', port);
      expect(link).toMatchObject({
        __typename: 'ValidationError',
        code: 'VALIDATION_FAILED',
        field: ['input', 'port'],
      });
    });

    test('a blocked port is refused at request time too (a link stored before the rule, or edited)', async () => {
      const link = await share('INTERACTIVE');
      if (link.__typename !== 'CreateShareLinkSuccess') throw new Error(JSON.stringify(link));
      const id = (await latestLink()).id;
      for (const port of [22, 4096, 8000, 8080]) {
        await e.t.app.services.db.shareLink.update({ where: { id }, data: { port } });
        expect((await get(link.url)).status).toBe(UNREACHABLE_PORT_STATUS);
      }
    });

    test('an expired link and a revoked link answer 410, and shareLinks shows them inactive', async () => {
      const expiring = await share('VIEW_ONLY');
      const revoking = await share('VIEW_ONLY');
      if (
        expiring.__typename !== 'CreateShareLinkSuccess' ||
        revoking.__typename !== 'CreateShareLinkSuccess'
      )
        throw new Error('create failed');
      expect((await get(expiring.url)).status).toBe(200);
      const expiringId = (
        await e.t.app.services.db.shareLink.findMany({ orderBy: { createdAt: 'desc' }, take: 2 })
      )[1]!.id;
      await e.t.app.services.db.shareLink.update({
        where: { id: expiringId },
        data: { expiresAt: new Date(Date.now() - 1_000) },
      });
      expect((await get(expiring.url)).status).toBe(410);

      const revoked = await e.t.request(
        RevokeShareLinkDocument,
        { input: { shareLinkId: revoking.shareLink.id } },
        pat,
      );
      expect(revoked.data?.revokeShareLink).toMatchObject({
        __typename: 'RevokeShareLinkSuccess',
        shareLink: { active: false },
      });
      expect((await get(revoking.url)).status).toBe(410);

      const listed = await e.t.request(SandboxShareLinksDocument, { id: s.sandboxId }, pat);
      const byId = new Map(listed.data!.sandbox!.shareLinks.map((l) => [l.id, l]));
      expect(byId.get(revoking.shareLink.id)).toMatchObject({ active: false });
      expect(byId.get(expiring.shareLink.id)).toMatchObject({ active: false });
    });

    test('a past expiry is refused at creation', async () => {
      const res = await e.t.request(
        CreateShareLinkDocument,
        {
          input: {
            sandboxId: s.sandboxId,
            port: app.port,
            mode: 'VIEW_ONLY',
            expiresAt: new Date(Date.now() - 60_000).toISOString(),
          },
        },
        pat,
      );
      expect(res.data?.createShareLink).toMatchObject({
        code: 'VALIDATION_FAILED',
        field: ['input', 'expiresAt'],
      });
    });
  });

  test('an idle session with an open preview is still reaped: preview traffic neither leases nor counts as activity', async () => {
    const db = e.t.app.services.db;
    // The turn of an earlier test has ended in the daemon's reports too: its lease release and its
    // IDLE report each write lastActivityAt, and one landing after the rewind below would undo it.
    await waitFor(async () => {
      const sandbox = await db.sandbox.findUniqueOrThrow({ where: { id: s.sandboxId } });
      const held = await db.executionLease.count({ where: { sessionId: s.sessionId, releasedAt: null } });
      return held === 0 && (sandbox.runtimeState === 'IDLE' || sandbox.runtimeState === 'HEALTHY');
    }, 60_000);
    // The session has been idle for an hour (past the 15-minute default idle timeout).
    const hourAgo = new Date(Date.now() - 3_600_000);
    await db.sandbox.update({ where: { id: s.sandboxId }, data: { lastActivityAt: hourAgo } });
    await db.session.update({ where: { id: s.sessionId }, data: { startedAt: hourAgo } });
    await db.executionLease.updateMany({
      where: { sessionId: s.sessionId },
      data: { releasedAt: hourAgo, expiresAt: hourAgo, renewedAt: hourAgo, acquiredAt: hourAgo },
    });
    const leaseBefore = await db.executionLease.findUnique({ where: { sessionId: s.sessionId } });

    // A preview is open (WebSocket) and in use (HTTP).
    const previewOrigin = `http://p${app.port}-${s.sandboxId}.localhost:${new URL(e.t.url).port}`;
    const ws = previewWebSocket(`${previewOrigin.replace(/^http/, 'ws')}/`, {
      authorization: `Bearer ${pat}`,
    });
    await new Promise((resolve) => ws.once('open', resolve));
    for (let i = 0; i < 5; i++) {
      expect(
        (
          await createPreviewClient().request(`${previewOrigin}/`, {
            headers: { authorization: `Bearer ${pat}` },
          })
        ).status,
      ).toBe(200);
    }
    const sandbox = await db.sandbox.findUniqueOrThrow({ where: { id: s.sandboxId } });
    expect(sandbox.lastActivityAt).toEqual(hourAgo);
    expect(await db.executionLease.findUnique({ where: { sessionId: s.sessionId } })).toEqual(leaseBefore);

    const result = await e.t.app.services.reaper.tick();
    expect(result.ran).toBe(true);
    expect(result.stopped).toContainEqual({ sessionId: s.sessionId, reason: 'IDLE_REAPED' });
    const session = await waitFor(async () => {
      const row = await db.session.findUniqueOrThrow({ where: { id: s.sessionId } });
      return row.status === 'STOPPED' ? row : null;
    }, 30_000);
    expect(session.stopReason).toBe('IDLE_REAPED');
    ws.terminate();
  });
});
