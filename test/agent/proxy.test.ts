import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { describe } from 'vitest';
import { WebSocket, WebSocketServer } from 'ws';
import { expect, test } from './helpers';

const HEADER = 'x-singulacomp-user-context';

describe('proxy', () => {
  test('refuses missing, forged, expired and other-session headers and proxies a valid one to opencode', async ({
    agent: h,
  }) => {
    const get = (headers: Record<string, string> = {}) => fetch(`${h.url}/session`, { headers });

    const missing = await get();
    expect(missing.status).toBe(401);
    const forged = await get({
      [HEADER]: h.userContext({ audience: 'opencode', token: 'not-the-sandbox-token' }),
    });
    expect(forged.status).toBe(401);
    const malformed = await get({ [HEADER]: 'v1.garbage' });
    expect(malformed.status).toBe(401);
    const expired = await get({
      [HEADER]: h.userContext({ audience: 'opencode', nowSeconds: Math.floor(Date.now() / 1000) - 600 }),
    });
    expect(expired.status).toBe(401);
    expect(await expired.json()).toEqual({ error: 'user context expired' });
    const otherSession = await get({
      [HEADER]: h.userContext({ audience: 'opencode', sessionId: 'another-session' }),
    });
    expect(otherSession.status).toBe(403);
    // A control call reaches only the daemon's own routes.
    const control = await get({ [HEADER]: h.userContext({ audience: 'control' }) });
    expect(control.status).toBe(404);

    // A valid header reaches OpenCode's real API: create a session through the proxy, list it directly.
    const created = await fetch(`${h.url}/session`, {
      method: 'POST',
      headers: { [HEADER]: h.userContext({ audience: 'opencode' }), 'content-type': 'application/json' },
      body: JSON.stringify({ title: 'through the proxy' }),
    });
    expect(created.status).toBe(200);
    const session = (await created.json()) as { id: string; title: string };
    expect(session.title).toBe('through the proxy');
    const direct = (await (
      await fetch(`${h.agent.supervisor.current!.client.baseUrl}/session`)
    ).json()) as Array<{
      id: string;
    }>;
    expect(direct.map((s) => s.id)).toContain(session.id);
  });

  test('/singulacomp/health needs no header; control routes do', async ({ agent: h }) => {
    const health = await fetch(`${h.url}/singulacomp/health`);
    expect(health.status).toBe(200);
    expect(await health.json()).toEqual({
      ok: true,
      sessionId: h.sessionId,
      runtime: { state: 'HEALTHY', healthy: true },
    });
    expect((await fetch(`${h.url}/singulacomp/part/nothing`)).status).toBe(401);
    expect((await fetch(`${h.url}/singulacomp/refresh`, { method: 'POST' })).status).toBe(401);
    expect((await fetch(`${h.url}/singulacomp/reload`, { method: 'POST', body: '{}' })).status).toBe(401);
    const refresh = await fetch(`${h.url}/singulacomp/refresh`, {
      method: 'POST',
      headers: { [HEADER]: h.userContext() },
    });
    expect(refresh.status).toBe(200);
  });

  test('an app header reaches its port over HTTP and WebSocket, never the service port', async ({
    agent: h,
  }) => {
    const app = createServer((req, res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ path: req.url, sawUserContext: HEADER in req.headers }));
    });
    const wss = new WebSocketServer({ server: app });
    const upgradeHeaders: string[][] = [];
    wss.on('connection', (socket, req) => {
      upgradeHeaders.push(Object.keys(req.headers));
      socket.on('message', (data) => socket.send(`echo:${data.toString()}`));
    });
    await new Promise<void>((resolve) => app.listen(0, '127.0.0.1', resolve));
    const appPort = (app.address() as AddressInfo).port;
    try {
      const asApp = (port: number) => ({
        [HEADER]: h.userContext({ audience: 'app', port }),
        'x-singulacomp-target-port': String(port),
      });
      const res = await fetch(`${h.url}/hello?x=1`, { headers: asApp(appPort) });
      expect(await res.json()).toEqual({ path: '/hello?x=1', sawUserContext: false });

      const self = await fetch(`${h.url}/x`, { headers: asApp(h.agent.servicePort) });
      expect(self.status).toBe(502);

      // The header names the signed port or nothing: it cannot redirect an app header elsewhere.
      const redirected = await fetch(`${h.url}/x`, {
        headers: { ...asApp(appPort), 'x-singulacomp-target-port': String(appPort + 1) },
      });
      expect(redirected.status).toBe(502);

      const ws = new WebSocket(`ws://127.0.0.1:${h.agent.servicePort}/socket`, { headers: asApp(appPort) });
      const reply = await new Promise<string>((resolve, reject) => {
        ws.once('open', () => ws.send('ping'));
        ws.once('message', (data) => resolve(data.toString()));
        ws.once('error', reject);
      });
      ws.close();
      expect(reply).toBe('echo:ping');
      expect(upgradeHeaders[0]).not.toContain(HEADER);
      expect(upgradeHeaders[0]).not.toContain('x-singulacomp-target-port');

      // The header is checked on upgrade too.
      const refused = new WebSocket(`ws://127.0.0.1:${h.agent.servicePort}/socket`, {
        headers: { 'x-singulacomp-target-port': String(appPort) },
      });
      const status = await new Promise<number>((resolve) => {
        refused.once('unexpected-response', (_req, response) => resolve(response.statusCode ?? 0));
        refused.once('open', () => resolve(101));
        refused.once('error', () => undefined);
      });
      expect(status).toBe(401);
    } finally {
      wss.close();
      app.closeAllConnections();
      await new Promise<void>((resolve) => app.close(() => resolve()));
    }
  });
});
