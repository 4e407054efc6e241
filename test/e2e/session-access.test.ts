// Reaching a running session from outside on LOCAL: OpenCode's own API through
// /v1/sessions/<id>/agent with @opencode-ai/sdk and a PAT; a page served on a sandbox port through
// both preview forms (HTTP and WebSocket echo, framing headers stripped, port 8000 refused); public
// share links in both modes; and an idle session with an open preview is still reaped.
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { request as httpRequest, createServer, type Server } from 'node:http';
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
import { freePort } from '../../contract/ports';
import { type E2e, startE2e } from './helpers';

/** Subdomain previews need a DNS name under which `p<port>-<sandbox-id>.` hosts resolve. */
const PREVIEW_DOMAIN = 'preview.test';

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
    const ws = new WebSocket(url, { headers });
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

/** An HTTP request with a Host header of our choosing (the subdomain form). */
function withHost(
  url: string,
  host: string,
  method = 'GET',
): Promise<{ status: number; headers: Record<string, unknown>; body: string }> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(url, { method, headers: { host } }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () =>
        resolve({ status: res.statusCode!, headers: res.headers, body: Buffer.concat(chunks).toString() }),
      );
    });
    req.on('error', reject);
    req.end();
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
        SINGULACOMP_PREVIEW_DOMAIN: PREVIEW_DOMAIN,
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

    test('a signed preview URL sets a cookie scoped to that preview; the page arrives without framing restrictions', async () => {
      const res = await previewUrl(app.port);
      const url = res.data!.sandbox!.previewUrl.url;
      expect(url).toContain(`/v1/p/${s.sandboxId}/${app.port}/?singulacomp_preview=`);
      const opened = await fetch(url, { redirect: 'manual' });
      expect(opened.status).toBe(303);
      expect(opened.headers.get('location')).toBe(`/v1/p/${s.sandboxId}/${app.port}/`);
      const cookie = opened.headers.get('set-cookie')!;
      expect(cookie).toContain(`Path=/v1/p/${s.sandboxId}/${app.port}/`);
      expect(cookie).toContain('HttpOnly');
      const page = await fetch(`${e.t.url}/v1/p/${s.sandboxId}/${app.port}/`, {
        headers: { cookie: cookie.split(';')[0]! },
      });
      expect(page.status).toBe(200);
      expect(await page.text()).toContain('hello from the sandbox');
      expect(page.headers.get('x-frame-options')).toBeNull();
      expect(page.headers.get('content-security-policy')).toBe(
        "default-src 'self'; script-src 'self' 'unsafe-inline'; img-src *",
      );
      // The preview cookie is ours: the app never sees it.
      const echo = await fetch(`${e.t.url}/v1/p/${s.sandboxId}/${app.port}/echo`, {
        headers: { cookie: `${cookie.split(';')[0]}; theme=dark` },
      });
      expect(((await echo.json()) as { cookie: string }).cookie).toBe('theme=dark');
      // The cookie opens only this preview.
      const elsewhere = await fetch(`${e.t.url}/v1/p/${s.sandboxId}/${app.port + 1}/`, {
        headers: { cookie: cookie.split(';')[0]! },
      });
      expect(elsewhere.status).toBe(401);
    });

    test('an API token works too, a WebSocket echoes through the path form, and no credential is refused', async () => {
      const page = await fetch(`${e.t.url}/v1/p/${s.sandboxId}/${app.port}/echo?x=1`, {
        method: 'POST',
        headers: { authorization: `Bearer ${pat}` },
        body: 'hi',
      });
      expect(await page.json()).toEqual({
        method: 'POST',
        url: '/echo?x=1',
        body: 'hi',
        cookie: null,
        authorization: null,
      });
      const echoed = await wsEcho(`${e.t.wsUrl.replace('/graphql', '')}/v1/p/${s.sandboxId}/${app.port}/`, {
        authorization: `Bearer ${pat}`,
      });
      expect(echoed.reply).toBe('echo:ping');
      const anonymous = await fetch(`${e.t.url}/v1/p/${s.sandboxId}/${app.port}/`);
      expect(anonymous.status).toBe(401);
    });

    test('the subdomain form serves HTTP and refuses a WebSocket upgrade, naming the path form', async () => {
      const host = `p${app.port}-${s.sandboxId}.${PREVIEW_DOMAIN}`;
      const res = await previewUrl(app.port, 'SUBDOMAIN');
      expect(res.errors).toBeUndefined();
      const signed = new URL(res.data!.sandbox!.previewUrl.url);
      expect(signed.host).toBe(host);
      const opened = await withHost(`${e.t.url}/${signed.search}`, host);
      expect(opened.status).toBe(303);
      const cookie = String((opened.headers['set-cookie'] as string[])[0]).split(';')[0]!;
      expect(String((opened.headers['set-cookie'] as string[])[0])).toContain('Path=/;');
      const page = await new Promise<{ status: number; body: string; headers: Record<string, unknown> }>(
        (resolve, reject) => {
          const req = httpRequest(`${e.t.url}/`, { headers: { host, cookie } }, (r) => {
            const chunks: Buffer[] = [];
            r.on('data', (c: Buffer) => chunks.push(c));
            r.on('end', () =>
              resolve({ status: r.statusCode!, body: Buffer.concat(chunks).toString(), headers: r.headers }),
            );
          });
          req.on('error', reject);
          req.end();
        },
      );
      expect(page.status).toBe(200);
      expect(page.body).toContain('hello from the sandbox');
      expect(page.headers['x-frame-options']).toBeUndefined();
      const upgrade = await wsEcho(`${e.t.wsUrl.replace('/graphql', '')}/`, {
        host,
        authorization: `Bearer ${pat}`,
      });
      expect(upgrade.status).toBe(400);
      expect(upgrade.body).toContain(`/v1/p/${s.sandboxId}/${app.port}/`);
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
        const res = await fetch(`${e.t.url}/v1/p/${s.sandboxId}/${port}/`, {
          headers: { authorization: `Bearer ${pat}` },
        });
        expect(res.status).toBe(403);
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

    test('a view-only link allows GET and HEAD only, and no WebSocket', async () => {
      const link = await share('VIEW_ONLY');
      if (link.__typename !== 'CreateShareLinkSuccess') throw new Error(JSON.stringify(link));
      expect(link.url).toMatch(/\/v1\/share\/[A-Za-z0-9_-]+\/$/);
      const stored = await e.t.app.services.db.shareLink.findUniqueOrThrow({
        where: {
          id: (await e.t.app.services.db.shareLink.findFirstOrThrow({ orderBy: { createdAt: 'desc' } })).id,
        },
      });
      expect(link.url).not.toContain(stored.secretHash);
      expect(stored.secretHash).toMatch(/^[0-9a-f]{64}$/);
      const get = await fetch(link.url);
      expect(get.status).toBe(200);
      expect(await get.text()).toContain('hello from the sandbox');
      expect(get.headers.get('x-frame-options')).toBeNull();
      expect((await fetch(link.url, { method: 'HEAD' })).status).toBe(200);
      expect((await fetch(`${link.url}echo`, { method: 'POST', body: 'x' })).status).toBe(405);
      const ws = await wsEcho(link.url.replace(/^http/, 'ws'));
      expect(ws.status).toBe(403);
    });

    test('an interactive link allows every method and WebSocket', async () => {
      const link = await share('INTERACTIVE');
      if (link.__typename !== 'CreateShareLinkSuccess') throw new Error(JSON.stringify(link));
      const post = await fetch(`${link.url}echo`, { method: 'POST', body: 'data' });
      expect(await post.json()).toMatchObject({ method: 'POST', body: 'data' });
      const put = await fetch(`${link.url}echo`, { method: 'PUT', body: 'more' });
      expect(await put.json()).toMatchObject({ method: 'PUT', body: 'more' });
      expect((await wsEcho(link.url.replace(/^http/, 'ws'))).reply).toBe('echo:ping');
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
      const id = (await e.t.app.services.db.shareLink.findFirstOrThrow({ orderBy: { createdAt: 'desc' } }))
        .id;
      for (const port of [22, 4096, 8000, 8080]) {
        await e.t.app.services.db.shareLink.update({ where: { id }, data: { port } });
        expect((await fetch(link.url)).status).toBe(403);
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
      expect((await fetch(expiring.url)).status).toBe(200);
      const expiringId = (
        await e.t.app.services.db.shareLink.findMany({ orderBy: { createdAt: 'desc' }, take: 2 })
      )[1]!.id;
      await e.t.app.services.db.shareLink.update({
        where: { id: expiringId },
        data: { expiresAt: new Date(Date.now() - 1_000) },
      });
      expect((await fetch(expiring.url)).status).toBe(410);

      const revoked = await e.t.request(
        RevokeShareLinkDocument,
        { input: { shareLinkId: revoking.shareLink.id } },
        pat,
      );
      expect(revoked.data?.revokeShareLink).toMatchObject({
        __typename: 'RevokeShareLinkSuccess',
        shareLink: { active: false },
      });
      expect((await fetch(revoking.url)).status).toBe(410);

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
    const ws = new WebSocket(`${e.t.wsUrl.replace('/graphql', '')}/v1/p/${s.sandboxId}/${app.port}/`, {
      headers: { authorization: `Bearer ${pat}` },
    });
    await new Promise((resolve) => ws.once('open', resolve));
    for (let i = 0; i < 5; i++) {
      expect(
        (
          await fetch(`${e.t.url}/v1/p/${s.sandboxId}/${app.port}/`, {
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
